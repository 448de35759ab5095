// The configured backends' side: a socket connection (SocketConn), the worker's pool
// of them (pick, reuse, idle timeout) and the health probes the server's health thread
// runs. May call the worker's epoll registration and the server's params and log;
// never a session (a connection only wakes the session that uses it).
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "backend.hpp"
#include "demo_origin.hpp"
#include "ringlog/fmt.hpp"
#include "ringproxy/http/http.hpp"
#include "server.hpp"
#include "session.hpp"
#include "worker.hpp"

namespace ringproxy {

namespace V = ringproxy::counters::vbe;
using ringlog::Tag;

namespace {

// A non-blocking TCP connection to a configured backend, in the worker's epoll set.
class SocketConn final : public BackendConn {
 public:
  SocketConn(Worker& w, Backend& b, int sock) : BackendConn(w, b), fd_(sock) {}
  ~SocketConn() override {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const noexcept override { return fd_; }
  int release_fd() noexcept override {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  int connect_error() noexcept override {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    return err;
  }
  bool send(Buf& b, bool& blocked, std::uint64_t* sent) override { return write_from(fd_, b, blocked, sent); }
  ssize_t recv(Buf& b) override {
    bool drained = false;
    ssize_t n = read_into(fd_, b, kReadChunk, &drained);
    if (drained && !hup) can_read = false;  // the next bytes raise an event (read_into)
    return n;
  }
  void log_open(ringlog::Txn& t, bool reused) override {
    if (!t.enabled(Tag::BackendOpen)) return;
    if (reused) {
      t.record(Tag::BackendOpen, ringlog::Line()
                                     .i(fd_).sp().s(backend.spec.name).sp().s(backend.ip).sp().u(backend.port)
                                     .s(" reused")
                                     .view());
      return;
    }
    SockAddr local = sockaddr_of_fd(fd_, false);
    t.record(Tag::BackendOpen, ringlog::Line()
                                   .i(fd_).sp().s(backend.spec.name).sp().s(backend.ip).sp().u(backend.port).sp()
                                   .s(local.ip()).sp().u(local.port())
                                   .view());
  }
  void log_close(ringlog::Txn& t, bool recycled) override {
    if (t.enabled(Tag::BackendClose))
      t.record(Tag::BackendClose,
               ringlog::Line().i(fd_).sp().s(backend.spec.name).sp().s(recycled ? "recycle" : "close").view());
  }
  void on_event(std::uint32_t ev) override {
    if (retired) return;
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) can_read = true;
    if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) can_write = true;
    if (ev & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) hup = true;
    if (session) {
      session->wake();
    } else if (hup || (ev & EPOLLIN)) {
      // A pooled connection the backend closed (or sent junk on): drop it.
      worker.backends().release(this, false);
    }
  }

 private:
  int fd_;
};

}  // namespace

BackendPool::BackendPool(Worker& w, Server& srv) : w_(w), srv_(srv) { idle_.resize(srv.backends().size()); }

BackendPool::~BackendPool() {
  for (auto& v : idle_)
    for (BackendConn* c : v) delete c;
  free_retired();
}

Backend* BackendPool::pick() noexcept {
  auto& bs = srv_.backends();
  std::size_t n = bs.size();
  if (n == 0) return srv_.demo_origin();
  for (std::size_t i = 0; i < n; ++i) {
    Backend* b = bs[(next_++) % n].get();
    if (b->healthy.load(std::memory_order_relaxed)) return b;
  }
  return nullptr;
}

BackendConn* BackendPool::get(Backend& b, bool& reused) {
  reused = false;
  if (b.kind == Backend::Kind::demo) return new DemoConn(w_, b);
  auto& idle = idle_[b.index];
  while (!idle.empty()) {
    BackendConn* c = idle.back();
    idle.pop_back();
    if (c->hup) {
      delete c;
      b.count(V::conn, std::uint64_t(0) - 1);
      continue;
    }
    reused = true;
    ++c->uses;
    return c;
  }
  int fd = ::socket(b.spec.addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  set_nodelay(fd);
  int r = ::connect(fd, b.spec.addr.sa(), b.spec.addr.len);
  if (r != 0 && errno != EINPROGRESS) {
    int e = errno;
    ::close(fd);
    errno = e;
    return nullptr;
  }
  auto* c = new SocketConn(w_, b, fd);
  c->uses = 1;
  b.count(V::conn);
  w_.add_fd(fd, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
  return c;
}

void BackendPool::release(BackendConn* c, bool reusable) {
  c->session = nullptr;
  int fd = c->fd();
  if (reusable && !c->hup && pooling_ && fd >= 0) {
    if (c->quiet) {  // pooled: epoll watches it again (a close by the backend, junk)
      c->quiet = false;
      w_.mod_fd(fd, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
    }
    c->idle_deadline = w_.now() + srv_.params().ns(backend_idle_timeout);
    idle_[c->backend.index].push_back(c);
    return;
  }
  if (c->backend.kind == Backend::Kind::socket) {
    auto& idle = idle_[c->backend.index];
    idle.erase(std::remove(idle.begin(), idle.end(), c), idle.end());
  }
  if (fd >= 0) {
    w_.del_fd(fd);
    ::close(c->release_fd());
  }
  c->backend.count(V::conn, std::uint64_t(0) - 1);
  retire(c);
}

std::uint64_t BackendPool::sweep(std::uint64_t now) {
  std::uint64_t next = UINT64_MAX;
  for (auto& idle : idle_) {
    for (std::size_t i = 0; i < idle.size();) {
      BackendConn* c = idle[i];
      if (now >= c->idle_deadline) {
        release(c, false);  // erases it from idle
      } else {
        next = std::min(next, c->idle_deadline);
        ++i;
      }
    }
  }
  return next;
}

void BackendPool::close_idle() {
  for (auto& idle : idle_)
    while (!idle.empty()) release(idle.back(), false);
}

void BackendPool::retire(BackendConn* c) {
  if (c->retired) return;
  c->retired = true;
  retired_.push_back(c);
}

void BackendPool::free_retired() {
  for (BackendConn* c : retired_) delete c;
  retired_.clear();
}

// Health probes: every health_interval, each backend gets "HEAD <health_path>"; a
// 2xx/3xx answer within connect_timeout + first_byte_timeout (at most 2 s) is a pass.
// A sick backend (a probe failed, or a worker's connect failed) is used again after
// the next passing probe.
void Server::health_loop() {
  // The first round comes one interval after start; the interval is read every turn,
  // so a param.set applies to the next probe.
  std::uint64_t last = ringlog::monotonic_ns();
  for (;;) {
    std::uint64_t now = ringlog::monotonic_ns();
    std::uint64_t next = last + std::uint64_t(params_.get(health_interval) * 1e9);
    if (now >= next) {
      for (auto& b : backends_) {
        if (stopping()) return;
        probe(*b);
      }
      last = ringlog::monotonic_ns();
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

}  // namespace ringproxy
