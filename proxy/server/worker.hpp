// A worker thread: one epoll loop with its own SO_REUSEPORT listener(s), serving its
// client sessions and their backend connections, non-blocking, no thread per
// connection. Everything a worker owns (sessions, backend pool, counters' slab) is
// touched by its thread only; other threads talk to it through wake(). The loop
// (worker.cpp) accepts, dispatches events, notifications and completions, and sweeps
// timers; what a request does is the Session's (session.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend.hpp"
#include "ringlog/clock.hpp"
#include "handler.hpp"
#include "ringlog/stats.hpp"
#include "ringproxy/delivery/transport.hpp"
#include "server.hpp"

namespace ringproxy {

class Session;

class Worker {
 public:
  Worker(Server& srv, unsigned index);
  ~Worker();
  // Opens this worker's listeners (one per listen address, SO_REUSEPORT). Throws ConfigError.
  void bind_listeners();
  void run();   // the thread body; returns after stop() once every session has ended
  // Makes the calling thread this worker's (its counters' slab, its clock); run() does
  // it first. A test that drives sessions without the loop calls it on its own thread.
  void bind_thread();
  void wake();  // any thread: makes the loop look at the stop flag (eventfd)

  // epoll registration for this worker's thread (edge-triggered).
  void add_fd(int fd, Handler* h, std::uint32_t events);
  void del_fd(int fd);
  void mod_fd(int fd, Handler* h, std::uint32_t events);
  std::uint64_t now() const noexcept { return now_ns_; }  // CLOCK_MONOTONIC at loop start
  unsigned index() const noexcept { return index_; }
  Server& server() noexcept { return srv_; }
  const ringlog::stats::LocalCounters& counters() const noexcept { return *main_; }

  // This worker's backends and their idle connections.
  BackendPool& backends() noexcept { return backends_; }

  // The cache path's delivery: the transport every cached response goes out through,
  // and the notifications (busy objects, streaming bodies) that wake this loop.
  delivery::Transport& transport() noexcept { return *transport_; }
  // The transport drives the loop and receives fetch bodies itself (io_uring).
  bool uring() const noexcept { return transport_ && transport_->drives_loop(); }
  delivery::LoopWaker* notify_waker() noexcept { return notify_waker_.get(); }
  void watch(Session* c);    // c has a notification armed or a Sender running
  void unwatch(Session* c);
  // A closed session's Sender still in the kernel's hands (io_uring): kept, with what it
  // points into, until its completion is reaped.
  void orphan(std::unique_ptr<delivery::Sender> s, std::unique_ptr<delivery::Chain> c,
              std::unique_ptr<delivery::ReadyNotify> n, delivery::ObjRef o);
  void orphan(std::unique_ptr<delivery::RecvOp> r, delivery::ObjRef o);

  // Deferred deletion: objects closed while handling events are freed after the batch.
  void retire(Session* c);
  void schedule(Session* c);  // drive it again on the loop's next turn

 private:
  struct Listener : Handler {
    Worker* w = nullptr;
    int fd = -1;
    std::string name;  // "a0", "a1" (SessOpen / ReqStart)
    SockAddr addr;
    void on_event(std::uint32_t) override { w->accept_all(*this); }
  };
  struct Waker : Handler {
    Worker* w = nullptr;
    void on_event(std::uint32_t) override;
  };
  struct NotifyHandler : Handler {
    Worker* w = nullptr;
    void on_event(std::uint32_t) override;
    void scan();  // drives every watching session whose notification fired
  };
  struct CompletionHandler : Handler {
    Worker* w = nullptr;
    void on_event(std::uint32_t) override;
    void completed();  // drives the sessions of the senders in reaped_, frees orphans done
  };
  struct Orphan {
    std::unique_ptr<delivery::RecvOp> recv;  // a receive the kernel still writes into obj
    std::unique_ptr<delivery::ReadyNotify> notify;
    delivery::ObjRef obj;
    std::unique_ptr<delivery::Chain> chain;
    std::unique_ptr<delivery::Sender> sender;  // destroyed first (gives back to chain)
  };
  void accept_all(Listener& l);
  std::uint64_t sweep();  // returns when to sweep next
  void begin_shutdown();
  void free_retired();
  void trim_heap();  // an idle turn after many sessions closed: freed heap back to the system

  Server& srv_;
  unsigned index_;
  int ep_ = -1;
  Waker waker_;
  int wake_fd_ = -1;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<Session*> sessions_;  // live sessions (swept for timeouts)
  std::vector<Session*> retired_sessions_;  // closed, freed after the batch
  std::size_t freed_since_trim_ = 0;         // sessions freed since the heap was last trimmed
  std::vector<Session*> ready_;  // sessions to drive again without waiting for an event
  std::unique_ptr<ringlog::stats::LocalCounters> main_;
  std::unique_ptr<delivery::Transport> transport_;
  std::unique_ptr<delivery::LoopWaker> notify_waker_;
  NotifyHandler notify_handler_;
  CompletionHandler completion_handler_;
  std::vector<Session*> watchers_;
  std::vector<Orphan> orphans_;
  std::vector<delivery::Sender*> reaped_;
  std::vector<delivery::RecvOp*> recvs_;
  std::uint64_t syscalls_seen_ = 0, zc_seen_ = 0;  // transport tallies already counted
  std::uint64_t now_ns_ = 0;
  std::uint64_t next_sweep_ = 0;
  std::uint64_t shutdown_deadline_ = 0;
  bool shutting_down_ = false;
  BackendPool backends_;
};

double now_s() noexcept;  // the realtime clock in seconds (the cache's clock)

}  // namespace ringproxy
