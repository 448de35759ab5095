// The process-wide part of ringproxy: log and counters, workers and their threads, and
// the admin socket's listener thread (the backends' health probes: backend_pool.cpp).
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
  // Every page of the ring mapped at start (MADV_POPULATE_WRITE): the first lap of the
  // ring takes no page fault per 4 KiB written (256 MiB: 65 536 faults, ~1.5 us of kernel
  // time per request over the first ~250 000 requests), for a one-off cost at start.
  ringlog::LogOptions lo;
  lo.ring.populate = true;
  log_ = std::make_unique<ringlog::Log>(ringlog::Log::create(dir + "/ring", co, lo));
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
    b->last_change_ns = ringlog::realtime_ns();
    backends_.push_back(std::move(b));
  }

  if (backends_.empty()) {
    demo_origin_ = std::make_unique<Backend>();
    demo_origin_->kind = Backend::Kind::demo;
    demo_origin_->spec.name = "demo";
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
