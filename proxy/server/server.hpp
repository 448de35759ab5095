// ringproxy's shared state: configuration, run-time parameters, the log and counters,
// the backends and their health, and the workers. One Server per process; workers
// read it lock-free (params are atomics, backends are fixed after start-up).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "config.hpp"
#include "params.hpp"
#include "ringlog/log.hpp"
#include "ringlog/stats.hpp"
#include "ringproxy/counters.hpp"
#include "ringproxy/cache/cache.hpp"
#include "ringproxy/delivery/storage.hpp"

namespace ringproxy {

class Worker;

// Handed to the tunnel module when a request becomes a tunnel (see Worker's comment on
// the tunnel hook). The hook takes ownership of the fds (already removed from the
// worker's epoll set) and of the request transaction; it returns false to decline, in
// which case the fds are still closed by the hook's caller.
struct TunnelHandoff {
  Worker* worker = nullptr;
  int client_fd = -1;
  int backend_fd = -1;              // -1 for CONNECT: the hook connects to `target`
  std::string target;               // CONNECT authority ("host:port"); empty for Upgrade
  std::string client_pending;       // bytes read from the client, not yet sent on
  std::string backend_pending;      // bytes read from the backend after its 101 head
  ringlog::Txn* req = nullptr;      // the request transaction (ReqAcct/PipeAcct go there)
};
using TunnelHook = std::function<bool(TunnelHandoff&)>;

class Server {
 public:
  explicit Server(Config cfg);
  ~Server();

  // Binds every listener (exit-2 class errors throw ConfigError), starts the workers,
  // the health checker and the admin socket.
  void start();
  // Stop accepting, let in-flight requests finish for up to shutdown_grace, join.
  void stop();

  const Config& config() const noexcept { return cfg_; }
  Params& params() noexcept { return params_; }
  ringlog::Log& log() noexcept { return *log_; }
  const ringlog::stats::Group& main_stats() const noexcept { return main_; }
  std::vector<std::unique_ptr<Backend>>& backends() noexcept { return backends_; }
  // The built-in demo origin, the only backend when none is configured (else null).
  Backend* demo_origin() noexcept { return demo_origin_.get(); }
  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  bool trusted(const SockAddr& a) const noexcept;
  // The cache; null when the cache is off (--cache off).
  cache::Cache* cache() noexcept { return cache_.get(); }
  // Set once before start() by the tunnel module; empty: CONNECT gets 501, Upgrade is dropped.
  TunnelHook tunnel_hook;
  // Set once before start() by the tunnel module: a request whose URL it matches is piped
  // (its raw head and everything after it go to a backend through a tunnel).
  std::function<bool(std::string_view url)> pipe_match;

  // Admin commands (admin.cpp): returns the reply; ok=false for an error reply.
  std::string admin_command(const std::vector<std::string>& argv, bool& ok);
  std::string stats_file() const;

 private:
  void health_loop();
  void probe(Backend& b);
  void admin_loop();

  Config cfg_;
  Params params_;
  std::unique_ptr<ringlog::Log> log_;
  std::unique_ptr<ringlog::stats::Stats> stats_;
  ringlog::stats::Group main_;
  std::unique_ptr<delivery::Store> store_;
  std::unique_ptr<cache::Cache> cache_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<Backend> demo_origin_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
  std::thread health_thread_, admin_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> done_{false};
  int admin_fd_ = -1;
  int wake_fd_ = -1;  // wakes the health and admin threads at stop
  std::string admin_path_;
};

}  // namespace ringproxy
