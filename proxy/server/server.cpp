// The process-wide part of ringproxy: log and counters, workers and their threads,
// backend health probes, and the admin socket's listener thread.
#include "server.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ringproxy/http/http.hpp"
#include "unix_path.hpp"
#include "worker.hpp"

namespace ringproxy {

namespace V = ringproxy::counters::vbe;

Server::Server(Config cfg) : cfg_(std::move(cfg)) {}

Server::~Server() {
  stop();
  if (admin_fd_ >= 0) ::close(admin_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (!admin_path_.empty()) ::unlink(admin_path_.c_str());
}

bool Server::trusted(const SockAddr& a) const noexcept {
  for (const Cidr& c : cfg_.trusted)
    if (c.contains(a)) return true;
  return false;
}

std::string Server::stats_file() const { return ringlog::instance_dir(cfg_.instance) + "/stats"; }

void Server::start() {
  // A port already in use: SO_REUSEPORT would silently share it with another process
  // of ours, so first try a plain bind, which fails if anything holds the address.
  for (const SockAddr& a : cfg_.listen) {
    int fd = ::socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw ConfigError(std::string("socket: ") + std::strerror(errno));
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a.sa(), a.len) != 0) {
      int e = errno;
      ::close(fd);
      throw ConfigError("cannot listen on " + a.str() + ": " + std::strerror(e));
    }
    ::close(fd);
  }
  // The admin socket: refuse to take over one that a live ringproxy answers on.
  std::string dir = ringlog::instance_dir(cfg_.instance);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string apath = cfg_.admin_socket.empty() ? dir + "/admin.sock" : cfg_.admin_socket;
  UnixPath un(apath);
  if (!un.ok()) throw ConfigError("admin socket " + apath + ": " + un.error());
  {
    int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0 && ::connect(probe, un.sa(), un.len()) == 0) {
      ::close(probe);
      throw ConfigError("another ringproxy answers on the admin socket " + apath + " (instance '" + cfg_.instance + "')");
    }
    if (probe >= 0) ::close(probe);
  }

  ringlog::stats::StatsOptions so;  // the library's mode, 0640: the group ringlog reads them
  stats_ = std::make_unique<ringlog::stats::Stats>(ringlog::stats::Stats::create_instance(cfg_.instance, so));
  main_ = stats_->add_group(counters::main::kKind, "", counters::main::kDefs);
  ringlog::CreateOptions co;
  co.area_size = cfg_.ring_size;
  log_ = std::make_unique<ringlog::Log>(ringlog::Log::create(dir + "/ring", co));
  if (!cfg_.mask.empty()) {
    try {
      log_->set_mask(cfg_.mask);
    } catch (const ringlog::Error& e) {
      throw ConfigError(std::string("bad --mask: ") + e.what());
    }
  }
  log_->set_trace(cfg_.trace);
  if (cfg_.cache) {
    delivery::StoreConfig sc;
    sc.capacity = std::size_t(cfg_.storage);
    sc.transient_window = std::size_t(cfg_.pass_window);
    store_ = std::make_unique<delivery::Store>(sc);
    cache::Config cc;
    cc.default_ttl = cfg_.default_ttl;
    cc.default_grace = cfg_.default_grace;
    cache_ = std::make_unique<cache::Cache>(*store_, cc, &main_, log_.get());
  }

  for (std::size_t i = 0; i < cfg_.backends.size(); ++i) {
    auto b = std::make_unique<Backend>();
    b->spec = cfg_.backends[i];
    b->ip = b->spec.addr.ip();
    b->port = b->spec.addr.port();
    b->index = unsigned(i);
    try {
      b->stats = stats_->add_group(V::kKind, b->spec.name, V::kDefs);
    } catch (const ringlog::Error& e) {
      throw ConfigError("backend " + b->spec.spec + ": " + e.what());
    }
    b->stats.set(V::healthy, 1);
    b->last_change_ns = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    backends_.push_back(std::move(b));
  }

  unsigned n = cfg_.threads ? cfg_.threads : std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n; ++i) {
    auto w = std::make_unique<Worker>(*this, i);
    w->bind_listeners();
    workers_.push_back(std::move(w));
  }

  admin_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ::unlink(apath.c_str());
  mode_t old = ::umask(0177);  // the socket is created 0600
  int br = ::bind(admin_fd_, un.sa(), un.len());
  ::umask(old);
  if (br != 0 || ::listen(admin_fd_, 16) != 0)
    throw ConfigError("cannot create the admin socket " + apath + ": " + std::strerror(errno));
  ::chmod(apath.c_str(), 0600);
  admin_path_ = apath;
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

  for (auto& w : workers_) threads_.emplace_back([p = w.get()] { p->run(); });
  if (!backends_.empty()) health_thread_ = std::thread([this] { health_loop(); });
  admin_thread_ = std::thread([this] { admin_loop(); });
  log_->record(ringlog::Tag::Notice, "ringproxy started");
}

void Server::stop() {
  if (done_.exchange(true)) return;
  stopping_.store(true, std::memory_order_release);
  for (auto& w : workers_) w->wake();
  for (auto& t : threads_) t.join();
  if (wake_fd_ >= 0) {
    std::uint64_t one = 1;
    ssize_t r = ::write(wake_fd_, &one, sizeof one);
    (void)r;
  }
  if (health_thread_.joinable()) health_thread_.join();
  if (admin_thread_.joinable()) admin_thread_.join();
  if (log_) log_->record(ringlog::Tag::Notice, "ringproxy stopped");
  workers_.clear();
}

// Health probes: every health_interval, each backend gets "HEAD <health_path>"; a
// 2xx/3xx answer within connect_timeout + first_byte_timeout (at most 2 s) is a pass.
// A sick backend (a probe failed, or a worker's connect failed) is used again after
// the next passing probe.
void Server::health_loop() {
  // The first round comes one interval after start; the interval is read every turn,
  // so a param.set applies to the next probe.
  std::uint64_t last = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  for (;;) {
    std::uint64_t now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    std::uint64_t next = last + std::uint64_t(params_.get(health_interval) * 1e9);
    if (now >= next) {
      for (auto& b : backends_) {
        if (stopping()) return;
        probe(*b);
      }
      last = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      continue;
    }
    pollfd p{wake_fd_, POLLIN, 0};
    // Until the next probe, at most a second (a lowered interval applies within it); the
    // stop wakes this at once through wake_fd_.
    int wait_ms = int(std::min<std::uint64_t>((next - std::min(next, now)) / 1000000 + 1, 1000));
    ::poll(&p, 1, wait_ms);
    if (stopping()) return;
  }
}

void Server::probe(Backend& b) {
  bool ok = false;
  std::string what;
  int timeout_ms = int(std::min(2000.0, (params_.get(connect_timeout) + params_.get(first_byte_timeout)) * 1000));
  int fd = ::socket(b.spec.addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto left = [&] {
    auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    return int(std::max<long long>(d, 0));
  };
  if (fd >= 0) {
    int r = ::connect(fd, b.spec.addr.sa(), b.spec.addr.len);
    if (r == 0 || errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      if (::poll(&p, 1, left()) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        std::string req = "HEAD " + cfg_.health_path + " HTTP/1.1\r\nHost: " + b.spec.addr.str() +
                          "\r\nUser-Agent: ringproxy-probe\r\nConnection: close\r\n\r\n";
        if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == ssize_t(req.size())) {
          std::string in;
          char buf[4096];
          for (;;) {
            pollfd q{fd, POLLIN, 0};
            if (::poll(&q, 1, left()) != 1) {
              what = "timeout";
              break;
            }
            ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) {
              what = n == 0 ? "closed" : std::strerror(errno);
              break;
            }
            in.append(buf, std::size_t(n));
            http::ResponseParser rp;
            http::ResponseHead rh;
            auto res = rp.parse(in, rh, http::Method::Head);
            if (res.need_more()) continue;
            if (res.failed()) {
              what = "bad response";
              break;
            }
            ok = rh.status >= 200 && rh.status < 400;
            what = "HTTP " + std::to_string(rh.status);
            break;
          }
        } else {
          what = "send failed";
        }
      } else {
        what = err ? std::strerror(err) : "connect timeout";
      }
    } else {
      what = std::strerror(errno);
    }
    ::close(fd);
  }
  b.probes.fetch_add(1, std::memory_order_relaxed);
  if (!ok) b.probe_failures.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t h = (b.happy.load(std::memory_order_relaxed) << 1) | (ok ? 1 : 0);
  b.happy.store(h, std::memory_order_relaxed);
  b.stats.set(V::happy, h);
  {
    std::lock_guard<std::mutex> lk(b.probe_mu);
    b.last_probe = what;
  }
  bool was = b.healthy.exchange(ok, std::memory_order_relaxed);
  if (was != ok) {
    if (!ok) b.stats.add(V::sick);
    log_->record(ringlog::Tag::Notice, "backend " + b.spec.name + (ok ? " healthy: " : " sick: ") + what);
  }
  b.stats.set(V::healthy, b.healthy.load(std::memory_order_relaxed) ? 1 : 0);
}

void Server::admin_loop() {
  for (;;) {
    pollfd p[2] = {{admin_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int r = ::poll(p, 2, -1);  // a command, or the stop (wake_fd_)
    if (stopping() && done_.load()) return;
    if (r <= 0 || !(p[0].revents & POLLIN)) {
      if (p[1].revents & POLLIN) return;
      continue;
    }
    int c = ::accept4(admin_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    // One command line per connection; the reply is "OK\n" or "ERR\n", then the text.
    timeval tv{2, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string line;
    char buf[1024];
    while (line.find('\n') == std::string::npos && line.size() < 65536) {
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      line.append(buf, std::size_t(n));
    }
    if (auto nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
    // Arguments are separated by the unit separator (0x1f), so values may hold spaces.
    std::vector<std::string> argv;
    std::size_t pos = 0;
    while (pos <= line.size() && !line.empty()) {
      std::size_t e = line.find('\x1f', pos);
      if (e == std::string::npos) e = line.size();
      argv.push_back(line.substr(pos, e - pos));
      pos = e + 1;
    }
    bool ok = true;
    std::string reply;
    try {
      reply = admin_command(argv, ok);
    } catch (const std::exception& e) {
      ok = false;
      reply = e.what();
    }
    std::string out = (ok ? "OK\n" : "ERR\n") + reply;
    if (!out.empty() && out.back() != '\n') out += '\n';
    std::size_t off = 0;
    while (off < out.size()) {
      ssize_t n = ::send(c, out.data() + off, out.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += std::size_t(n);
    }
    ::close(c);
  }
}

}  // namespace ringproxy
