// Where a fetch gets its response: a Backend (a configured host:port, or the built-in
// demo origin) and a BackendConn to it. A fetch talks to every kind the same way (send
// the request's bytes, receive the response's bytes), so the kinds differ here and in
// their own files only (backend_pool.cpp: sockets; demo_origin.cpp: the demo origin).
// Connections are made, pooled and closed by the worker's BackendPool; the health
// probes of the configured backends run on the server's health thread (also in
// backend_pool.cpp).
// Nothing here logs a request's records except BackendOpen/BackendClose.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "config.hpp"
#include "handler.hpp"
#include "io_buf.hpp"
#include "ringlog/stats.hpp"
#include "ringlog/txn.hpp"
#include "ringproxy/counters.hpp"

namespace ringproxy {

class Server;
class Worker;
class Session;

struct Backend {
  enum class Kind : std::uint8_t { socket, demo };
  Kind kind = Kind::socket;
  BackendSpec spec;
  std::string ip;        // spec.addr's address and port, formatted once (BackendOpen)
  unsigned port = 0;
  unsigned index = 0;
  ringlog::stats::Group stats;                 // VBE.<name>.* (the demo origin has none)
  std::atomic<bool> healthy{true};             // skipped by round-robin while false
  std::atomic<std::uint64_t> happy{0};         // probe history, newest in bit 0
  std::atomic<std::uint64_t> probes{0}, probe_failures{0};
  std::atomic<std::uint64_t> last_change_ns{0};
  std::mutex probe_mu;                         // guards last_probe (health thread writes, admin reads)
  std::string last_probe;
  // Adds to one of its VBE counters (none for the demo origin).
  void count(std::uint32_t idx, std::uint64_t n = 1) const noexcept {
    if (stats) stats.add(idx, n);
  }
  // A worker's connect failed (refused, timed out): counted, and the backend is skipped
  // until a probe passes.
  void connect_failed() noexcept {
    count(counters::vbe::fail);
    if (healthy.exchange(false)) count(counters::vbe::sick);
  }
};

// One connection to a backend, used by one fetch at a time (the session that owns the
// fetch is `session`) or idle in the worker's pool.
class BackendConn : public Handler {
 public:
  BackendConn(Worker& w, Backend& b) : worker(w), backend(b) {}
  ~BackendConn() override = default;
  BackendConn(const BackendConn&) = delete;
  BackendConn& operator=(const BackendConn&) = delete;

  // The socket; -1 for an origin without one (the demo origin), which epoll, io_uring
  // and tunnels never see.
  virtual int fd() const noexcept = 0;
  // Hands the socket over (to a tunnel): fd() is -1 from here on.
  virtual int release_fd() noexcept = 0;
  // Once writable: 0 if the connect succeeded, else its errno.
  virtual int connect_error() noexcept = 0;
  // Sends what b holds: false on a hard error (errno set); `blocked` when it would block.
  virtual bool send(Buf& b, bool& blocked, std::uint64_t* sent) = 0;
  // Receives into b: bytes, 0 at EOF, -1 with errno (EAGAIN: nothing now).
  virtual ssize_t recv(Buf& b) = 0;
  // BackendOpen when the fetch starts using it (connected, or taken from the pool), and
  // BackendClose when the fetch lets go of it.
  virtual void log_open(ringlog::Txn& bereq, bool reused) = 0;
  virtual void log_close(ringlog::Txn& bereq, bool recycled) = 0;
  // Its bytes come without an epoll event: a fetch waiting on it drives itself again.
  virtual bool self_driven() const noexcept { return false; }

  Worker& worker;
  Backend& backend;
  Session* session = nullptr;  // whose fetch uses it; nullptr while pooled
  bool can_read = false, can_write = false, hup = false, connected = false;
  bool quiet = false;  // EPOLLIN off: the transport receives the body (io_uring)
  std::uint64_t idle_deadline = 0;
  unsigned uses = 0;
  bool retired = false;
};

// A worker's backends: round-robin over the healthy ones, idle connections per backend
// kept for reuse until backend_idle_timeout, retired connections freed after the loop's
// batch. Touched by the worker's thread only.
class BackendPool {
 public:
  BackendPool(Worker& w, Server& srv);
  ~BackendPool();
  BackendPool(const BackendPool&) = delete;
  BackendPool& operator=(const BackendPool&) = delete;

  // The next healthy backend (the demo origin when none is configured), or nullptr.
  Backend* pick() noexcept;
  // An idle pooled connection to b, or a new one (nullptr and errno set if socket()
  // or connect() failed at once).
  BackendConn* get(Backend& b, bool& reused);
  // The fetch is done with c: pooled when reusable, else closed and retired.
  void release(BackendConn* c, bool reusable);
  // Closes the idle connections past their deadline; returns the earliest deadline left.
  std::uint64_t sweep(std::uint64_t now);
  // The worker is stopping: nothing is pooled any more, the idle ones are closed.
  void close_idle();
  void stop_pooling() noexcept { pooling_ = false; }
  void free_retired();

 private:
  void retire(BackendConn* c);
  Worker& w_;
  Server& srv_;
  std::vector<std::vector<BackendConn*>> idle_;  // per configured backend
  std::vector<BackendConn*> retired_;
  bool pooling_ = true;
  unsigned next_ = 0;  // round-robin position
};

}  // namespace ringproxy
