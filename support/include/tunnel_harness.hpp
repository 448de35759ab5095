// A small epoll loop that hosts tunnels on its own thread (as a ringproxy worker would),
// loopback socket pairs, and blocking peers to drive them. Shared by the tunnel tests
// and bench/bench_tunnel.cpp. Tunnels are only touched on the loop thread; the test
// thread talks to it through post() and reads finished tunnels' results.
#pragma once

#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ringproxy/tunnel/tunnel.hpp"

namespace ringproxy::tunnel::test {

// splice(2) into a socket whose peer is gone raises SIGPIPE: hosts ignore it.
inline const bool kSigpipeIgnored = (::signal(SIGPIPE, SIG_IGN), true);

inline void die(const char* what) { throw std::runtime_error(std::string(what) + ": " + std::strerror(errno)); }

inline void set_nonblock(int fd, bool on) {
  int fl = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

// A connected TCP pair on 127.0.0.1: {connecting end, accepted end}, both blocking.
inline std::pair<int, int> tcp_pair() {
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0) die("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &al) != 0)
    die("listen");
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
  int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  if (s < 0) die("accept");
  ::close(l);
  int one = 1;
  ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return {c, s};
}

// Two loopback connections around a tunnel: client peer <-> [client_fd tunnel backend_fd]
// <-> backend peer. The tunnel's ends are non-blocking; the peers stay blocking.
struct Wiring {
  int client_peer = -1, client_fd = -1, backend_fd = -1, backend_peer = -1;
  static Wiring make() {
    Wiring w;
    auto [cp, cf] = tcp_pair();
    auto [bf, bp] = tcp_pair();
    w.client_peer = cp, w.client_fd = cf, w.backend_fd = bf, w.backend_peer = bp;
    set_nonblock(cf, true);
    set_nonblock(bf, true);
    return w;
  }
};

// The TunnelStart for a wiring's two tunnel ends.
inline TunnelStart start_of(const Wiring& w) {
  TunnelStart s;
  s.client_fd = w.client_fd;
  s.backend_fd = w.backend_fd;
  return s;
}

inline std::size_t count_fds() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n - 1;  // the directory stream's own fd
}

// Deterministic payload: byte i of stream `seed`.
inline std::string pattern(std::size_t n, std::uint32_t seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    s[i] = char(x);
  }
  return s;
}

inline bool write_all(int fd, const char* p, std::size_t n, std::size_t chunk = 1 << 20) {
  while (n) {
    ssize_t w = ::send(fd, p, std::min(n, chunk), MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w, n -= std::size_t(w);
  }
  return true;
}

// Reads until EOF (or error: returns what it got, sets *err). between(), if given, runs
// after each chunk read (a slow reader waits there for something).
inline std::string read_all(int fd, int* err = nullptr, std::size_t chunk = 1 << 16,
                            const std::function<void()>& between = {}) {
  std::string out;
  std::string buf(chunk, '\0');
  for (;;) {
    ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
    if (r > 0) {
      out.append(buf.data(), std::size_t(r));
      if (between) between();
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (err) *err = r < 0 ? errno : 0;
    return out;
  }
}

// What a finished tunnel reports (copied out on the loop thread).
struct Result {
  EndReason reason = EndReason::none;
  std::string detail;
  std::uint64_t to_backend = 0, to_client = 0, spliced = 0, copied = 0;
  Mode up = Mode::copy, down = Mode::copy;
  bool fell_back = false;
  std::size_t pipe_max = 0;
};

class EpollLoop final : public TunnelHost {
 public:
  explicit EpollLoop(PipePoolOptions popts = {}, TunnelOptions topts = {}) : pool_(popts) {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ep_ < 0 || wake_ < 0) die("epoll");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_;
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, wake_, &ev);
    env_.host = this;
    env_.pool = &pool_;
    env_.opts = topts;
  }
  ~EpollLoop() override {
    stop();
    ::close(ep_);
    ::close(wake_);
  }

  // Before start(): the env is the loop thread's from then on.
  TunnelEnv& env() { return env_; }
  PipePool& pool() { return pool_; }

  // The loop thread's id (0 before start()): tests look at what it is doing in /proc.
  pid_t tid() const { return tid_.load(); }

  void start() {
    thr_ = std::thread([this] {
      tid_ = static_cast<pid_t>(::syscall(SYS_gettid));
      run();
    });
  }
  void stop() {
    if (!thr_.joinable()) return;
    post([this] { quit_ = true; });
    thr_.join();
  }

  // Runs f on the loop thread.
  void post(std::function<void()> f) {
    {
      std::lock_guard lk(mu_);
      q_.push_back(std::move(f));
    }
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_, &one, sizeof one);
  }
  // Runs f on the loop thread and waits for it.
  void call(std::function<void()> f) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    post([&] {
      f();
      std::lock_guard lk(m);
      done = true;
      cv.notify_one();
    });
    std::unique_lock lk(m);
    cv.wait(lk, [&] { return done; });
  }

  // Starts a tunnel on the loop thread; returns its id (results come in that order).
  std::size_t add(TunnelStart s) {
    std::size_t id = next_id_.fetch_add(1);
    auto sp = std::make_shared<TunnelStart>(std::move(s));
    post([this, id, sp] {
      auto t = std::make_unique<Tunnel>(env_);
      Tunnel* raw = t.get();
      live_[raw] = {std::move(t), id};
      if (raw->start(std::move(*sp)) == State::done) retire(raw);
    });
    return id;
  }
  // Waits until tunnel id has finished; false on timeout.
  bool wait(std::size_t id, Result* out, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    std::unique_lock lk(rmu_);
    if (!rcv_.wait_for(lk, limit, [&] { return results_.count(id) != 0; })) return false;
    if (out) *out = results_[id];
    return true;
  }
  std::size_t live() {
    std::size_t n = 0;
    call([&] { n = live_.size(); });
    return n;
  }
  // Ends every live tunnel with abort().
  void abort_all() {
    call([this] {
      std::vector<Tunnel*> v;
      for (auto& [t, e] : live_) v.push_back(t);
      for (Tunnel* t : v)
        if (t->abort("test") == State::done) retire(t);
    });
  }

  void watch(int fd, std::uint32_t events, Tunnel* t) override {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    int op = fds_.count(fd) ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (::epoll_ctl(ep_, op, fd, &ev) != 0) die("epoll_ctl");
    fds_[fd] = t;
  }
  void unwatch(int fd) override {
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
    fds_.erase(fd);
  }

 private:
  struct Entry {
    std::unique_ptr<Tunnel> t;
    std::size_t id;
  };

  void retire(Tunnel* t) {
    auto it = live_.find(t);
    Result r{t->end_reason(),     t->end_detail(),  t->bytes_to_backend(), t->bytes_to_client(),
             t->spliced_bytes(),  t->copied_bytes(), t->mode_up(),         t->mode_down(),
             t->fell_back(),      t->pipe_bytes_max()};
    std::size_t id = it->second.id;
    live_.erase(it);
    std::lock_guard lk(rmu_);
    results_[id] = std::move(r);
    rcv_.notify_all();
  }

  void run() {
    epoll_event evs[64];
    auto next_tick = Clock::now();
    while (!quit_) {
      int n = ::epoll_wait(ep_, evs, 64, 20);
      for (int i = 0; i < n; ++i) {
        int fd = evs[i].data.fd;
        if (fd == wake_) {
          std::uint64_t v;
          [[maybe_unused]] ssize_t r = ::read(wake_, &v, sizeof v);
          std::vector<std::function<void()>> q;
          {
            std::lock_guard lk(mu_);
            q.swap(q_);
          }
          for (auto& f : q) f();
          continue;
        }
        auto it = fds_.find(fd);  // gone if its tunnel ended earlier in this batch
        if (it == fds_.end()) continue;
        Tunnel* t = it->second;
        if (t->on_event(fd, evs[i].events) == State::done) retire(t);
      }
      auto now = Clock::now();
      if (now >= next_tick) {
        next_tick = now + std::chrono::milliseconds(20);
        std::vector<Tunnel*> v;
        for (auto& [t, e] : live_) v.push_back(t);
        for (Tunnel* t : v)
          if (t->on_timer(now) == State::done) retire(t);
      }
    }
    for (auto& [t, e] : live_) e.t->abort("loop stopped");
    live_.clear();
  }

  PipePool pool_;
  TunnelEnv env_;
  int ep_ = -1, wake_ = -1;
  std::thread thr_;
  bool quit_ = false;  // loop thread only
  std::mutex mu_;
  std::vector<std::function<void()>> q_;
  std::unordered_map<int, Tunnel*> fds_;
  std::unordered_map<Tunnel*, Entry> live_;
  std::atomic<std::size_t> next_id_{0};
  std::atomic<pid_t> tid_{0};
  std::mutex rmu_;
  std::condition_variable rcv_;
  std::unordered_map<std::size_t, Result> results_;
};

}  // namespace ringproxy::tunnel::test
