// The worker loop (Varnish's waiter and pool, HAProxy's run queue): one epoll loop
// per thread with its own SO_REUSEPORT listeners. It accepts connections (each becomes
// a Session: session.cpp), routes epoll events to their Handlers, drives the sessions
// woken by a notification (busy objects, streaming bodies) or by a completion of the
// transport (io_uring sends and receives), frees what was closed after each batch and
// sweeps the timers. It holds no request state and never looks into a request.
// Where a request goes next, in the order of its stages:
//   session.cpp (recv) -> lookup.cpp -> fetch.cpp (backend_pool.cpp, demo_origin.cpp)
//   -> direct_delivery.cpp or cache_delivery.cpp -> session.cpp (done)
// with every head logged through header_log.cpp.
#include "worker.hpp"

#include <malloc.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "fetch.hpp"
#include "io_buf.hpp"
#include "session.hpp"

namespace ringproxy {

namespace M = ringproxy::counters::main;

double now_s() noexcept { return double(ringlog::realtime_ns()) / 1e9; }

namespace {

constexpr std::uint64_t kSweepNs = 20'000'000;  // timeout resolution
// Longest sleep of a loop with no timer due: bounds how late a timeout parameter
// lowered at run time (param.set) is first applied to a timer set before the change.
constexpr std::uint64_t kMaxSleepNs = 1'000'000'000;
// Sessions freed before an idle turn trims the heap while others remain: about one trim
// per wave of connections, not one per client of a trickle coming and going.
constexpr std::size_t kTrimAfterSessions = 64;

}  // namespace

Worker::Worker(Server& srv, unsigned index) : srv_(srv), index_(index), backends_(*this, srv) {
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep_ < 0 || wake_fd_ < 0) throw ConfigError(std::string("epoll/eventfd: ") + std::strerror(errno));
  waker_.w = this;
  add_fd(wake_fd_, &waker_, EPOLLIN);
  if (srv.cache()) {
    try {
      notify_waker_ = std::make_unique<delivery::LoopWaker>();
    } catch (const std::system_error& e) {
      throw ConfigError(std::string("eventfd: ") + e.what());
    }
    notify_handler_.w = this;
    add_fd(notify_waker_->fd(), &notify_handler_, EPOLLIN);
    delivery::TransportOptions to;
    to.kind = srv.config().transport;
    std::string notice;
    // The fallback notice (io_uring refused) is logged once, by the first worker.
    transport_ = delivery::make_transport(to, index == 0 ? &srv.log() : nullptr, &notice);
    completion_handler_.w = this;
    // A transport that drives the loop (io_uring) hands its completions to the loop's
    // wait directly; otherwise its completion fd is one more epoll source.
    if (transport_->completion_fd() >= 0 && !transport_->drives_loop())
      add_fd(transport_->completion_fd(), &completion_handler_, EPOLLIN);
  }
}

Worker::~Worker() {
  for (auto& l : listeners_)
    if (l->fd >= 0) ::close(l->fd);
  free_retired();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (ep_ >= 0) ::close(ep_);
}

void Worker::bind_listeners() {
  const auto& addrs = srv_.config().listen;
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    auto l = std::make_unique<Listener>();
    l->w = this;
    l->addr = addrs[i];
    l->name = "a" + std::to_string(i);
    int fd = ::socket(addrs[i].family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw ConfigError("socket: " + std::string(std::strerror(errno)));
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (::bind(fd, addrs[i].sa(), addrs[i].len) != 0) {
      int e = errno;
      ::close(fd);
      throw ConfigError("cannot listen on " + addrs[i].str() + ": " + std::strerror(e));
    }
    if (::listen(fd, 1024) != 0) {
      int e = errno;
      ::close(fd);
      throw ConfigError("cannot listen on " + addrs[i].str() + ": " + std::strerror(e));
    }
    l->fd = fd;
    add_fd(fd, l.get(), EPOLLIN);
    listeners_.push_back(std::move(l));
  }
}

void Worker::add_fd(int fd, Handler* h, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events | EPOLLET;
  ev.data.ptr = h;
  ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
}

void Worker::del_fd(int fd) { ::epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr); }

void Worker::mod_fd(int fd, Handler* h, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events | EPOLLET;
  ev.data.ptr = h;
  ::epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
}

void Worker::wake() {
  std::uint64_t one = 1;
  ssize_t r = ::write(wake_fd_, &one, sizeof one);
  (void)r;
}

void Worker::Waker::on_event(std::uint32_t) {
  std::uint64_t v;
  while (::read(w->wake_fd_, &v, sizeof v) > 0) {
  }
  if (w->srv_.stopping() && !w->shutting_down_) w->begin_shutdown();
}

void Worker::accept_all(Listener& l) {
  for (;;) {
    SockAddr peer;
    peer.len = sizeof peer.ss;
    int fd = ::accept4(l.fd, reinterpret_cast<sockaddr*>(&peer.ss), &peer.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) main_->add(M::sess_dropped);
      return;
    }
    if (shutting_down_) {
      ::close(fd);
      continue;
    }
    set_nodelay(fd);
    SockAddr local = sockaddr_of_fd(fd, false);
    main_->add(M::sess_conn);
    main_->add(M::sess_active);
    auto* c = new Session(*this, fd, peer, local, l.name);
    sessions_.push_back(c);
    add_fd(fd, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
  }
}

void Worker::NotifyHandler::on_event(std::uint32_t) {
  if (!w->notify_waker_->drain()) return;
  scan();
}

void Worker::NotifyHandler::scan() {
  // Every session with an armed notification or a running Sender: the fired ones move.
  std::vector<Session*> ws = w->watchers_;
  for (Session* c : ws)
    if (c->notified()) c->wake();
}

void Worker::CompletionHandler::on_event(std::uint32_t) {
  w->reaped_.clear();
  w->transport_->reap(w->reaped_);
  completed();
}

void Worker::CompletionHandler::completed() {
  for (delivery::Sender* s : w->reaped_)
    if (s->user) static_cast<Session*>(s->user)->wake();
  w->recvs_.clear();
  w->transport_->take_recvs(w->recvs_);
  for (delivery::RecvOp* r : w->recvs_)
    if (r->user) static_cast<Session*>(r->user)->wake();
  // Orphans whose last completion came in are freed.
  auto& o = w->orphans_;
  o.erase(std::remove_if(o.begin(), o.end(),
                         [](const Orphan& x) {
                           return !(x.sender && x.sender->inflight()) && !(x.recv && x.recv->inflight);
                         }),
          o.end());
}

void Worker::watch(Session* c) { watchers_.push_back(c); }

void Worker::unwatch(Session* c) {
  watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), c), watchers_.end());
}

void Worker::orphan(std::unique_ptr<delivery::Sender> s, std::unique_ptr<delivery::Chain> c,
                    std::unique_ptr<delivery::ReadyNotify> n, delivery::ObjRef o) {
  Orphan x;
  x.notify = std::move(n);
  x.obj = std::move(o);
  x.chain = std::move(c);
  x.sender = std::move(s);
  orphans_.push_back(std::move(x));
}

void Worker::orphan(std::unique_ptr<delivery::RecvOp> r, delivery::ObjRef o) {
  Orphan x;
  x.obj = std::move(o);
  x.recv = std::move(r);
  orphans_.push_back(std::move(x));
}

void Worker::retire(Session* c) { retired_sessions_.push_back(c); }

void Worker::schedule(Session* c) { ready_.push_back(c); }

void Worker::free_retired() {
  if (!retired_sessions_.empty()) {
    for (Session* c : retired_sessions_) {
      sessions_.erase(std::remove(sessions_.begin(), sessions_.end(), c), sessions_.end());
      ready_.erase(std::remove(ready_.begin(), ready_.end(), c), ready_.end());
      delete c;
    }
    freed_since_trim_ += retired_sessions_.size();
    retired_sessions_.clear();
  }
  backends_.free_retired();
}

// Under AddressSanitizer or ThreadSanitizer their allocator serves every malloc and
// glibc's heap is never set up; glibc's malloc_trim() then sets it up lazily, and two
// workers trimming at once raced on that (one walked bins not yet initialised: a SEGV in
// mtrim). There is nothing of glibc's to trim then, so it is not called.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RINGPROXY_SANITIZER_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define RINGPROXY_SANITIZER_MALLOC 1
#endif
#endif
#ifndef RINGPROXY_SANITIZER_MALLOC
#define RINGPROXY_SANITIZER_MALLOC 0
#endif

// glibc keeps what a wave of sessions freed in this thread's arena, in free chunks all
// over it; the next wave is placed elsewhere in them and touches pages the last one left
// resident, so RSS crept up wave after wave with almost nothing in use. malloc_trim()
// hands the free pages back, those in the middle of every arena included (HAProxy's
// pool_gc() does the same). Called on a turn that found nothing to do: no request waits.
void Worker::trim_heap() {
  if (freed_since_trim_ == 0 || (freed_since_trim_ < kTrimAfterSessions && !sessions_.empty())) return;
  buf_pool::drain();
  fetch_pool::drain();
  ringlog::trim_txn_buffers();
#if defined(__GLIBC__) && !RINGPROXY_SANITIZER_MALLOC
  ::malloc_trim(0);
#endif
  main_->add(M::mem_trims);
  main_->add(M::mem_trimmed_sess, freed_since_trim_);
  freed_since_trim_ = 0;
}

// Acts on the timers that are due and returns when the next sweep must run: the
// earliest timer still pending, or sooner, the shortest timeout a timer set from now on
// can have (every timer is "now + a timeout parameter"). An idle loop therefore sleeps
// seconds, not kSweepNs, and a loop with work wakes for its events only.
std::uint64_t Worker::sweep() {
  std::uint64_t next = UINT64_MAX;
  for (std::size_t i = 0; i < sessions_.size(); ++i) {
    sessions_[i]->check_timeouts(now_ns_);
    next = std::min(next, sessions_[i]->next_deadline());
  }
  next = std::min(next, backends_.sweep(now_ns_));
  Params& p = srv_.params();
  std::uint64_t shortest = kMaxSleepNs;
  for (std::uint64_t t : {p.ns(timeout_header), p.ns(timeout_idle), p.ns(timeout_send), p.ns(connect_timeout),
                          p.ns(first_byte_timeout), p.ns(between_bytes_timeout), p.ns(backend_idle_timeout)})
    shortest = std::min(shortest, t);
  next = std::min(next, now_ns_ + shortest);
  return std::max(next, now_ns_ + kSweepNs);
}

void Worker::begin_shutdown() {
  shutting_down_ = true;
  backends_.stop_pooling();
  shutdown_deadline_ = now_ns_ + srv_.params().ns(shutdown_grace);
  for (auto& l : listeners_) {
    if (l->fd >= 0) {
      del_fd(l->fd);
      ::close(l->fd);
      l->fd = -1;
    }
  }
  std::vector<Session*> cs = sessions_;
  for (Session* c : cs) c->shutdown_begin();
}

void Worker::bind_thread() {
  ringlog::set_thread_index(index_);
  main_ = std::make_unique<ringlog::stats::LocalCounters>(srv_.main_stats().local());
  now_ns_ = ringlog::monotonic_ns();
  if (notify_waker_) notify_waker_->bind_to_this_thread();
  fetch_pool::open();
}

void Worker::run() {
  bind_thread();
  main_->add(M::threads);
  epoll_event evs[256];
  if (srv_.stopping()) begin_shutdown();
  const bool uring_loop = transport_ && transport_->drives_loop();
  bool epoll_more = false;  // the last epoll_wait filled its array: more may be ready
  for (;;) {
    bool local = notify_waker_ && notify_waker_->local_pending();
    int wait_ms = 0;
    if (ready_.empty() && !local)
      wait_ms = shutting_down_ ? int(kSweepNs / 1'000'000)
                               : int((std::max(next_sweep_, now_ns_ + 1'000'000) - now_ns_ + 999'999) / 1'000'000);
    int n = 0;
    if (uring_loop) {
      // One system call: this turn's sends go in, the loop sleeps until a completion,
      // an epoll event or the timer. epoll_wait runs only when epoll has events.
      reaped_.clear();
      bool ev = transport_->wait(ep_, epoll_more ? 0 : wait_ms, reaped_) || epoll_more;
      if (ev) n = ::epoll_wait(ep_, evs, 256, 0);
      epoll_more = n == 256;
      now_ns_ = ringlog::monotonic_ns();
      if (wait_ms > 0 && !ev && reaped_.empty()) trim_heap();  // the wait ran out: idle
      completion_handler_.completed();
    } else {
      n = ::epoll_wait(ep_, evs, 256, wait_ms);
      now_ns_ = ringlog::monotonic_ns();
      if (wait_ms > 0 && n == 0) trim_heap();  // the wait ran out: idle
    }
    for (int i = 0; i < n; ++i) static_cast<Handler*>(evs[i].data.ptr)->on_event(evs[i].events);
    if (!ready_.empty()) {
      std::vector<Session*> batch;
      batch.swap(ready_);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        // A session closed meanwhile is retired, not freed, until free_retired().
        if ((!batch[i]->closed() || batch[i]->detached()) && batch[i]->scheduled_) batch[i]->resume();
      }
    }
    // Notifications this thread raised itself (no eventfd write): served now.
    for (int i = 0; i < 8 && notify_waker_ && notify_waker_->take_local(); ++i) notify_handler_.scan();
    free_retired();
    if (transport_) {
      if (!uring_loop) transport_->flush();  // io_uring: this turn's sends, one submission
      // The transport's own tallies, published as counters once per loop turn.
      std::uint64_t sc = transport_->syscalls(), zc = transport_->zc_sends();
      if (sc != syscalls_seen_) main_->add(M::delivery_syscalls, sc - syscalls_seen_), syscalls_seen_ = sc;
      if (zc != zc_seen_) main_->add(M::delivery_zc_sends, zc - zc_seen_), zc_seen_ = zc;
    }
    if (now_ns_ >= next_sweep_) {
      next_sweep_ = sweep();
      free_retired();
    }
    if (shutting_down_) {
      bool any = false;
      for (Session* c : sessions_)
        if (!c->closed()) any = true;
      if (!any) break;
      if (now_ns_ >= shutdown_deadline_) {
        std::vector<Session*> cs = sessions_;
        for (Session* c : cs) c->close_session("SHUTDOWN");
        free_retired();
        break;
      }
    }
  }
  backends_.close_idle();
  free_retired();
  // Sends still in the kernel (io_uring; their sockets were shut down): wait for their
  // completions so nothing the kernel points into is freed before it is done.
  for (int i = 0; i < 200 && !orphans_.empty() && transport_ && transport_->completion_fd() >= 0; ++i) {
    transport_->flush();
    pollfd p{transport_->completion_fd(), POLLIN, 0};
    ::poll(&p, 1, 10);
    completion_handler_.on_event(EPOLLIN);
  }
  fetch_pool::close();
  main_->sub(M::threads);
}

}  // namespace ringproxy
