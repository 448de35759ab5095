// The delivery half of the seeds/000 test: 64 MiB bodies sent from storage to loopback
// TCP clients by one event loop, writev vs io_uring (with and without zero-copy), with
// and without the CRC32 check filter, cached (finished) and pass (transient, streamed
// by a producer thread through a 1 MiB window). Reports MB/s and send system calls per
// response (the transport's own count; run under `strace -c -f` to cross-check).
// Not the full proxy-fronting-itself test: ringproxy does not use this stack yet.
// bench-link: ringproxy_delivery
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringproxy/delivery/transport.hpp"

namespace d = ringproxy::delivery;

namespace {
void tcp_pair(int fds[2]) {
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(l, (sockaddr*)&a, sizeof a) || ::listen(l, 4)) std::abort();
  socklen_t len = sizeof a;
  ::getsockname(l, (sockaddr*)&a, &len);
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(c, (sockaddr*)&a, sizeof a)) std::abort();
  fds[0] = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  fds[1] = c;
  ::close(l);
}

struct Conn {
  int fd[2];
  d::ReadyNotify notify;
  d::ObjRef obj;
  std::unique_ptr<d::Chain> chain;
  std::unique_ptr<d::Sender> sender;
  std::thread rx, producer;
};

struct Run {
  double mbs;
  double syscalls_per_resp;
  std::uint64_t zc;
};

Run run(const char* kind, std::size_t zc, bool crc, bool pass, std::size_t conns, std::size_t body_len,
        const std::string& body, std::uint32_t body_crc, d::Store& st, const d::ObjRef& cached) {
  d::LoopWaker w;
  auto t = d::make_transport({.kind = kind, .zc_threshold = zc});
  std::vector<std::unique_ptr<Conn>> cs;
  std::string head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_len) + "\r\n\r\n";
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < conns; ++i) {
    auto c = std::make_unique<Conn>();
    tcp_pair(c->fd);
    c->notify.waker = &w;
    if (pass) {
      c->obj = st.new_object(true);
      d::Object* o = c->obj.get();
      c->producer = std::thread([o, &body] {
        d::LoopWaker pw;
        d::ReadyNotify space(&pw);
        std::size_t done = 0;
        while (done < body.size()) {
          ssize_t n = o->append(body.data() + done, std::min<std::size_t>(16384, body.size() - done));
          if (n < 0) return;
          done += std::size_t(n);
          if (n == 0 && o->arm_space(&space)) {
            pollfd p{pw.fd(), POLLIN, 0};
            while (!space.take()) {
              ::poll(&p, 1, 1000);
              pw.drain();
            }
          }
        }
        o->finish();
      });
    } else {
      c->obj = cached;
    }
    c->chain = std::make_unique<d::Chain>(c->obj, &c->notify);
    if (crc) c->chain->push(std::make_unique<d::Crc32Filter>(body_crc));
    // writev gains nothing from longer arrays (the socket buffer cuts every call
    // short); io_uring sends a whole array per submission (MSG_WAITALL).
    std::size_t iov = std::string(kind) == "io_uring" ? 1024 : 64;
    c->sender = std::make_unique<d::Sender>(c->fd[0], head, c->chain.get(), iov);
    int rfd = c->fd[1];
    std::size_t want = head.size() + body_len;
    c->rx = std::thread([rfd, want] {
      std::vector<char> b(1 << 20);
      std::size_t got = 0;
      while (got < want) {
        ssize_t r = ::read(rfd, b.data(), b.size());
        if (r <= 0) break;
        got += std::size_t(r);
      }
    });
    cs.push_back(std::move(c));
  }
  std::vector<d::Sender*> ready, changed;
  for (auto& c : cs) ready.push_back(c->sender.get());
  std::size_t left = cs.size();
  while (left) {
    for (d::Sender* s : ready) {
      if (s->finished()) continue;
      auto stt = t->pump(*s);
      if (stt == d::Sender::Status::done || stt == d::Sender::Status::error) --left;
    }
    ready.clear();
    t->flush();
    if (!left) break;
    std::vector<pollfd> p{{w.fd(), POLLIN, 0}};
    if (t->completion_fd() >= 0) p.push_back({t->completion_fd(), POLLIN, 0});
    for (auto& c : cs)
      if (c->sender->status() == d::Sender::Status::wait_write) p.push_back({c->fd[0], POLLOUT, 0});
    ::poll(p.data(), p.size(), 1000);
    if (p[0].revents) w.drain();
    for (auto& c : cs)
      if (!c->sender->finished() && !c->sender->inflight() && c->sender->status() == d::Sender::Status::wait_data &&
          c->notify.take())
        ready.push_back(c->sender.get());
    for (std::size_t i = 1; i < p.size(); ++i) {
      if (!p[i].revents) continue;
      if (i == 1 && t->completion_fd() >= 0) {
        changed.clear();
        t->reap(changed);
        for (d::Sender* s : changed) (s->finished() ? (void)--left : ready.push_back(s));
        continue;
      }
      for (auto& c : cs)
        if (c->fd[0] == p[i].fd) ready.push_back(c->sender.get());
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool ok = true;
  for (auto& c : cs) {
    ok &= c->sender->status() == d::Sender::Status::done;
    c->rx.join();
    if (c->producer.joinable()) c->producer.join();
    c->sender.reset();
    c->chain.reset();
    ::close(c->fd[0]);
    ::close(c->fd[1]);
  }
  if (!ok) std::fprintf(stderr, "bench_delivery: a response failed (%s)\n", kind);
  return {double(body_len) * double(conns) / secs / 1e6, double(t->syscalls()) / double(conns), t->zc_sends()};
}
}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  std::size_t mib = argc > 1 ? std::size_t(std::atoi(argv[1])) : 64;
  std::size_t conns = argc > 2 ? std::size_t(std::atoi(argv[2])) : 4;
  std::size_t rounds = argc > 3 ? std::size_t(std::atoi(argv[3])) : 3;
  std::size_t len = mib << 20;
  std::string body(len, '\0');
  std::mt19937_64 g(1);
  for (std::size_t i = 0; i + 8 <= len; i += 8) {
    std::uint64_t v = g();
    std::memcpy(&body[i], &v, 8);
  }
  std::uint32_t crc = std::uint32_t(crc32_z(0, (const Bytef*)body.data(), body.size()));
  d::Store st({.capacity = len + (16 << 20), .segment_size = 16 << 10, .transient_window = 1 << 20});
  d::ObjRef cached = st.new_object(false);
  cached->append(body.data(), body.size());
  cached->finish();
  std::printf("bench_delivery: %zu MiB body, %zu connections, %zu rounds (medians), 16 KiB segments\n", mib, conns, rounds);
  std::printf("%-6s %-5s %-16s %10s %18s %8s\n", "object", "crc", "transport", "MB/s", "send syscalls/resp", "zc");
  struct Cfg { const char* kind; std::size_t zc; const char* label; };
  const Cfg cfgs[] = {{"writev", 0, "writev"}, {"io_uring", 0, "io_uring"}, {"io_uring", 64 << 10, "io_uring+zc"}};
  for (bool pass : {false, true})
    for (bool c : {false, true}) {
      double base_sys = 0, base_mbs = 0;
      for (const Cfg& cfg : cfgs) {
        std::vector<double> m, s;
        std::uint64_t zc = 0;
        for (std::size_t r = 0; r < rounds; ++r) {
          Run x = run(cfg.kind, cfg.zc, c, pass, conns, len, body, crc, st, cached);
          m.push_back(x.mbs);
          s.push_back(x.syscalls_per_resp);
          zc += x.zc;
        }
        std::sort(m.begin(), m.end());
        std::sort(s.begin(), s.end());
        double mm = m[m.size() / 2], ss = s[s.size() / 2];
        if (!base_sys) base_sys = ss, base_mbs = mm;
        std::printf("%-6s %-5s %-16s %10.1f %18.1f %8llu   (vs writev: %.2fx MB/s, %.1fx fewer syscalls)\n",
                    pass ? "pass" : "cached", c ? "yes" : "no", cfg.label, mm, ss, (unsigned long long)zc,
                    mm / base_mbs, base_sys / ss);
      }
    }
  return 0;
}
