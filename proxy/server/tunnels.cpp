// The server's glue to the tunnel layer (proxy/tunnel): per worker thread, a pipe pool,
// the tunnels and the backend connections being opened for them, all hosted by that
// worker's epoll loop (Worker::add_fd) and ticked by a timerfd of its own; the tunnels'
// counts go to MAIN.pipe_* through a TunnelStats sink. Handlers of ended tunnels are
// freed two ticks later, so that an event already fetched in the same epoll batch
// never reaches freed memory. The tunnel layer knows nothing of the server: only this
// file joins them.
#include "tunnels.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "ringlog_cli11.hpp"

#include "ringproxy/counters.hpp"
#include "header_log.hpp"
#include "ringproxy/tunnel/tunnel.hpp"
#include "server.hpp"
#include "worker.hpp"

namespace ringproxy::tunnel {

namespace {

namespace sm = ringproxy::counters::main;
using ringlog::Tag;

constexpr std::uint64_t kTickNs = 100'000'000;  // timeouts are checked this often

// The checked configuration, shared by the workers (read-only after install()).
struct Module {
  Server* srv = nullptr;
  std::vector<unsigned> ports;
  std::vector<Cidr> from;
  bool splice = true;
  std::size_t pipe_size = 0;
  unsigned max_pipes = 0;
  std::vector<std::string> pipe_urls;
};

// A small response written straight to a fresh client socket (a few hundred bytes
// always fit its empty send buffer); the connection is closed after it.
void send_response(int fd, int status, const char* reason, const char* extra = "") {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf,
                        "HTTP/1.1 %d %s\r\n%sContent-Length: 0\r\nConnection: close\r\n\r\n", status, reason, extra);
  [[maybe_unused]] ssize_t w = ::send(fd, buf, std::size_t(n), MSG_NOSIGNAL | MSG_DONTWAIT);
}


// MAIN.pipe_*: what the tunnels count, in the server's counter group.
class MainTunnelStats final : public TunnelStats {
 public:
  explicit MainTunnelStats(const ringlog::stats::Group& main) : main_(main) {}
  void tunnel_started() noexcept override {
    main_.add(sm::pipe_sess);
    main_.add(sm::pipe_active);
  }
  void tunnel_ended() noexcept override { main_.sub(sm::pipe_active); }
  void tunnel_fell_back() noexcept override { main_.add(sm::pipe_fallback); }
  void tunnel_idle_timeout() noexcept override { main_.add(sm::pipe_idle_timeout); }
  void tunnel_bytes(std::uint64_t spliced, std::uint64_t copied) noexcept override {
    if (spliced) main_.add(sm::pipe_splice_bytes, spliced);
    if (copied) main_.add(sm::pipe_copy_bytes, copied);
  }
  void denied() noexcept { main_.add(sm::pipe_denied); }

 private:
  const ringlog::stats::Group& main_;
};

class WorkerTunnels;

struct FdHandler final : Handler {
  WorkerTunnels* wt = nullptr;
  Tunnel* t = nullptr;
  int fd = -1;
  bool alive = true;
  void on_event(std::uint32_t events) override;
};

// A backend connection being opened (CONNECT target, or a backend for pipe).
struct Opening final : Handler {
  WorkerTunnels* wt = nullptr;
  int client_fd = -1, backend_fd = -1;
  bool connect_method = false;  // CONNECT: answer 200 / 503 to the client
  std::string target;
  std::uint64_t deadline_ns = 0;
  TunnelStart start;
  bool alive = true;
  void on_event(std::uint32_t events) override;
};

struct Ticker final : Handler {
  WorkerTunnels* wt = nullptr;
  void on_event(std::uint32_t) override;
};

class WorkerTunnels final : public TunnelHost {
 public:
  WorkerTunnels(const Module& m, Worker& w)
      : m_(m), w_(w), stats_(m.srv->main_stats()), pool_({.pipe_size = m.pipe_size, .max_pipes = m.max_pipes, .max_idle = std::min(32u, m.max_pipes)}) {
    env_.host = this;
    env_.pool = &pool_;
    env_.log = &m.srv->log();
    env_.stats = &stats_;
    env_.opts.splice = m.splice;
    refresh_params();
    timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    itimerspec its{};
    its.it_interval.tv_nsec = long(kTickNs);
    its.it_value.tv_nsec = long(kTickNs);
    ::timerfd_settime(timer_fd_, 0, &its, nullptr);
    ticker_.wt = this;
    w_.add_fd(timer_fd_, &ticker_, EPOLLIN);
  }
  // At the worker thread's exit (its loop has ended): tunnels still open are aborted.
  ~WorkerTunnels() override {
    std::vector<Tunnel*> ts;
    for (auto& [t, p] : live_) ts.push_back(t);
    for (Tunnel* t : ts) t->abort("shutdown");
    for (auto& o : opening_)
      if (o->alive) fail_opening(*o, ECANCELED);
    w_.del_fd(timer_fd_);
    ::close(timer_fd_);
  }

  Worker& worker() noexcept { return w_; }

  void watch(int fd, std::uint32_t events, Tunnel* t) override {
    auto h = std::make_unique<FdHandler>();
    h->wt = this, h->t = t, h->fd = fd;
    w_.add_fd(fd, h.get(), events & ~std::uint32_t(EPOLLET));  // add_fd makes it edge-triggered
    fds_[fd] = std::move(h);
  }
  void unwatch(int fd) override {
    w_.del_fd(fd);
    auto it = fds_.find(fd);
    if (it == fds_.end()) return;
    it->second->alive = false;
    dead_.push_back(std::move(it->second));
    fds_.erase(it);
  }

  void event(FdHandler& h, std::uint32_t events) {
    if (!h.alive) return;
    Tunnel* t = h.t;
    if (t->on_event(h.fd, events) == State::done) retire(t);
  }

  void tick() {
    std::uint64_t v;
    [[maybe_unused]] ssize_t r = ::read(timer_fd_, &v, sizeof v);
    refresh_params();
    auto now = Clock::now();
    std::vector<Tunnel*> ts;
    for (auto& [t, p] : live_) ts.push_back(t);
    for (Tunnel* t : ts)
      if (t->on_timer(now) == State::done) retire(t);
    std::uint64_t mono = ringlog::monotonic_ns();
    for (auto& o : opening_)
      if (o->alive && mono >= o->deadline_ns) fail_opening(*o, ETIMEDOUT);
    // Free what ended before the previous tick: no event of this batch can name it.
    dead_old_.clear();
    dead_old_.swap(dead_);
    tdead_old_.clear();
    tdead_old_.swap(tdead_);
    for (auto it = opening_.begin(); it != opening_.end();) {
      if (!(*it)->alive) {
        dead_.push_back(std::move(*it));
        it = opening_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // CONNECT host:port from the client (t.target).
  bool connect_request(TunnelHandoff& t) {
    ringlog::Txn& req = *t.req;
    SockAddr peer = sockaddr_of_fd(t.client_fd, true);
    bool from_ok = false;
    for (const Cidr& c : m_.from)
      if (c.contains(peer)) from_ok = true;
    if (!from_ok) {
      req.recordf(Tag::Error, "CONNECT not allowed from %s", peer.ip().c_str());
      return deny(t, 405, "Method Not Allowed", "Allow: GET, HEAD, POST, PUT, DELETE, OPTIONS\r\n");
    }
    SockAddr dst;
    const std::string& target = t.target;
    try {
      if (target.empty() || target[0] == ':') throw ConfigError("no host");
      dst = parse_hostport(target);
    } catch (const ConfigError& e) {
      req.recordf(Tag::Error, "CONNECT target '%s': %s", target.c_str(), e.what());
      return deny(t, 400, "Bad Request");
    }
    bool port_ok = false;
    for (unsigned p : m_.ports)
      if (p == dst.port()) port_ok = true;
    if (!port_ok) {
      req.recordf(Tag::Error, "CONNECT to port %u not allowed", unsigned(dst.port()));
      return deny(t, 403, "Forbidden");
    }
    auto o = std::make_unique<Opening>();
    o->connect_method = true;
    o->target = target;
    o->start.txn = req.child(ringlog::TxnType::bereq, "pipe");
    o->start.txn.record(Tag::BereqMethod, "CONNECT");
    o->start.txn.record(Tag::BereqURL, target);
    o->start.txn.record(Tag::BereqProtocol, "HTTP/1.1");
    o->start.to_backend = std::move(t.client_pending);
    o->start.to_client = "HTTP/1.1 200 Connection established\r\n\r\n";
    return open(t, std::move(o), dst);
  }

  // A request chosen for pipe: its raw head and whatever followed go to a backend.
  bool pipe_request(TunnelHandoff& t) {
    Backend* b = w_.backends().pick();
    if (!b || b->kind != Backend::Kind::socket) {  // a tunnel needs a socket: not the demo origin
      t.req->record(Tag::Error, "pipe: no healthy backend");
      return deny(t, 503, "Service Unavailable");
    }
    auto o = std::make_unique<Opening>();
    o->target = b->spec.addr.str();
    o->start.txn = t.req->child(ringlog::TxnType::bereq, "pipe");
    o->start.txn.recordf(Tag::Notice, "pipe to backend %s", b->spec.name.c_str());
    o->start.to_backend = std::move(t.client_pending);
    return open(t, std::move(o), b->spec.addr);
  }

  // The backend answered 101: both connections are open, bytes may already wait.
  bool upgrade(TunnelHandoff& t) {
    auto tun = std::make_unique<Tunnel>(env_);
    TunnelStart s;
    s.client_fd = t.client_fd;
    s.backend_fd = t.backend_fd;
    s.to_backend = std::move(t.client_pending);
    s.to_client = std::move(t.backend_pending);
    s.txn = t.req->child(ringlog::TxnType::bereq, "pipe");
    s.txn.record(Tag::Notice, "upgrade");
    launch(std::move(tun), std::move(s));
    return true;
  }

  void opened(Opening& o, std::uint32_t events) {
    if (!o.alive) return;
    int err = 0;
    socklen_t l = sizeof err;
    if (::getsockopt(o.backend_fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
    if (!err && (events & (EPOLLERR | EPOLLHUP))) err = ECONNREFUSED;
    if (err) return fail_opening(o, err);
    if (!(events & EPOLLOUT)) return;
    w_.del_fd(o.backend_fd);
    o.alive = false;
    SockAddr local = sockaddr_of_fd(o.backend_fd, false);
    o.start.txn.recordf(Tag::BackendOpen, "%d %s %s", o.backend_fd, o.target.c_str(), local.str().c_str());
    TunnelStart s = std::move(o.start);
    s.client_fd = o.client_fd;
    s.backend_fd = o.backend_fd;
    launch(std::make_unique<Tunnel>(env_), std::move(s));
  }

  void fail_opening(Opening& o, int err) {
    o.alive = false;
    w_.del_fd(o.backend_fd);
    ::close(o.backend_fd);
    o.start.txn.recordf(Tag::FetchError, "connect %s: %s", o.target.c_str(), std::strerror(err));
    o.start.txn.record(Tag::Error, "tunnel not opened: 503");
    send_response(o.client_fd, 503, "Service Unavailable");
    ::close(o.client_fd);
    o.start.txn.end();
  }

 private:
  void refresh_params() {
    env_.opts.idle_timeout = std::chrono::milliseconds(std::int64_t(m_.srv->params().get(tunnel_idle_timeout) * 1000));
  }

  bool deny(TunnelHandoff& t, int status, const char* reason, const char* extra = "") {
    header_log::response_status(*t.req, status, reason);
    send_response(t.client_fd, status, reason, extra);
    ::close(t.client_fd);
    if (t.backend_fd >= 0) ::close(t.backend_fd);
    t.client_fd = t.backend_fd = -1;
    stats_.denied();
    return true;
  }

  bool open(TunnelHandoff& t, std::unique_ptr<Opening> o, const SockAddr& dst) {
    int fd = ::socket(dst.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    o->wt = this;
    o->client_fd = t.client_fd;
    o->backend_fd = fd;
    t.client_fd = -1;
    if (fd < 0 || (::connect(fd, dst.sa(), dst.len) != 0 && errno != EINPROGRESS)) {
      int e = errno;
      if (fd >= 0) {
        ::close(fd);
        o->backend_fd = -1;
      }
      o->alive = false;
      o->start.txn.recordf(Tag::FetchError, "connect %s: %s", o->target.c_str(), std::strerror(e));
      o->start.txn.record(Tag::Error, "tunnel not opened: 503");
      send_response(o->client_fd, 503, "Service Unavailable");
      ::close(o->client_fd);
      o->start.txn.end();
      return true;
    }
    o->deadline_ns = ringlog::monotonic_ns() + m_.srv->params().ns(connect_timeout);
    w_.add_fd(fd, o.get(), EPOLLOUT | EPOLLRDHUP);
    opening_.push_back(std::move(o));
    return true;
  }

  void launch(std::unique_ptr<Tunnel> tun, TunnelStart s) {
    Tunnel* raw = tun.get();
    live_[raw] = std::move(tun);
    if (raw->start(std::move(s)) == State::done) retire(raw);
  }

  void retire(Tunnel* t) {
    auto it = live_.find(t);
    if (it == live_.end()) return;
    tdead_.push_back(std::move(it->second));
    live_.erase(it);
  }

  const Module& m_;
  Worker& w_;
  MainTunnelStats stats_;
  PipePool pool_;
  TunnelEnv env_;
  int timer_fd_ = -1;
  Ticker ticker_;
  std::unordered_map<Tunnel*, std::unique_ptr<Tunnel>> live_;
  std::unordered_map<int, std::unique_ptr<FdHandler>> fds_;
  std::vector<std::unique_ptr<Opening>> opening_;
  std::vector<std::unique_ptr<Handler>> dead_, dead_old_;
  std::vector<std::unique_ptr<Tunnel>> tdead_, tdead_old_;
};

void FdHandler::on_event(std::uint32_t events) { wt->event(*this, events); }
void Opening::on_event(std::uint32_t events) { wt->opened(*this, events); }
void Ticker::on_event(std::uint32_t) { wt->tick(); }

// One WorkerTunnels per worker thread, made at its first tunnel and destroyed when the
// thread exits (after its loop ended, while the Server, its log and epoll still live).
struct ThreadSlot {
  const Module* m = nullptr;
  std::unique_ptr<WorkerTunnels> wt;
};
thread_local ThreadSlot t_slot;

WorkerTunnels& tunnels_of(const Module& m, Worker& w) {
  if (t_slot.m != &m || !t_slot.wt || &t_slot.wt->worker() != &w) {
    t_slot.wt.reset();
    t_slot.m = &m;
    t_slot.wt = std::make_unique<WorkerTunnels>(m, w);
  }
  return *t_slot.wt;
}

}  // namespace

void add_options(CLI::App& app, ProxyTunnelConfig& c) {
  app.add_option("--connect-port", c.connect_ports, "Destination port CONNECT may open (repeatable; default 443)");
  app.add_option("--connect-from", c.connect_from,
                 "Client address or CIDR allowed to use CONNECT (repeatable; default 127.0.0.0/8 and ::1)");
  app.add_flag("--tunnel-copy", [&c](std::int64_t) { c.splice = false; },
               "Tunnels copy through user space instead of using splice(2)");
  app.add_option("--tunnel-pipe-size", c.pipe_size, "Kernel pipe size for splice tunnels (a size; default 256k)");
  app.add_option("--tunnel-pipes", c.max_pipes,
                 "Most pipes per worker, two per tunnel; beyond, tunnels copy (0: never splice; default 256)");
  app.add_option("--pipe-url", c.pipe_urls,
                 "Requests whose URL starts with this prefix are piped to a backend as a blind tunnel (repeatable)");
}

void install(Server& srv, const ProxyTunnelConfig& c) {
  auto m = std::make_shared<Module>();
  m->srv = &srv;
  for (unsigned p : c.connect_ports) {
    if (p == 0 || p > 65535) throw ConfigError("--connect-port " + std::to_string(p) + ": not a port");
    m->ports.push_back(p);
  }
  for (const auto& s : c.connect_from) m->from.push_back(parse_cidr(s));
  m->splice = c.splice;
  const std::uint64_t pipe_size = parse_size(c.pipe_size);
  if (pipe_size < 4096 || pipe_size > (1u << 30))
    throw ConfigError("--tunnel-pipe-size must be between 4k and 1G");
  m->pipe_size = std::size_t(pipe_size);
  m->max_pipes = c.max_pipes;
  for (const auto& u : c.pipe_urls) {
    if (u.empty() || (u[0] != '/' && u != "*")) throw ConfigError("--pipe-url '" + u + "': must start with /");
    m->pipe_urls.push_back(u);
  }
  srv.tunnel_hook = [m](TunnelHandoff& t) -> bool {
    WorkerTunnels& wt = tunnels_of(*m, *t.worker);
    if (!t.target.empty()) return wt.connect_request(t);
    if (t.backend_fd >= 0) return wt.upgrade(t);
    return wt.pipe_request(t);
  };
  if (!m->pipe_urls.empty()) {
    srv.pipe_match = [m](std::string_view url) {
      for (const auto& p : m->pipe_urls)
        if (p == "*" || url.substr(0, p.size()) == p) return true;
      return false;
    };
  }
}

}  // namespace ringproxy::tunnel
