// ringlog-stat --listen: the scrape endpoint (see exporter.hpp). HTTP is cpp-httplib's;
// here are what is served, how instances are followed, and how connections are given
// threads: each connection has a worker of its own (started on demand, up to
// kMaxWorkers), so a client that sends nothing or reads slowly ties up only its own.
// Scrapes take turns on one mutex for the instance files; never across network I/O.
#include "exporter.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <system_error>
#include <thread>
#include <utility>

#include <httplib.h>

#include "program.hpp"
#include "ringlog/ring.hpp"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGLOG_STAT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(RINGLOG_STAT_TSAN)
// ThreadSanitizer builds: libcpp-httplib is Debian's uninstrumented library. Its
// function-local statics (std::regex objects) are initialised under a guard whose
// inline fast path TSan cannot see, so two connections' workers reading one look like
// a race with the first one's initialisation. Races with a frame in that library are
// not reported; this file's code (workers, instance set, handlers) is still checked.
extern "C" const char* __tsan_default_suppressions() { return "race:libcpp-httplib.so\n"; }
#endif

namespace ringlog::stat_tool {

namespace {

namespace rs = ringlog::stats;
namespace tool = ringlog::tool;

constexpr std::size_t kMaxWorkers = 128;   // connections served at once; more wait their turn
constexpr time_t kRequestTimeout = 5;      // seconds a connection may stay silent before or within a request
constexpr time_t kWriteTimeout = 5;        // seconds a client may take before it accepts more response bytes
constexpr std::size_t kKeepAliveMax = 100; // requests per connection
constexpr std::size_t kMaxBody = 8192;     // request body bytes read (then 413): nothing here takes a body
constexpr std::chrono::seconds kStopGrace{1};  // after SIGTERM, for the connections being served
constexpr const char* kExpositionType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kTextType = "text/plain; charset=utf-8";
constexpr const char* kAllow = "GET, HEAD, OPTIONS";

// httplib's task queue: one worker per connection being served. A worker is started
// when a connection comes and none is idle, and stays for later connections; past
// kMaxWorkers connections queue until a worker is free.
class ConnectionWorkers : public httplib::TaskQueue {
 public:
  explicit ConnectionWorkers(std::size_t max) : max_(max) {}
  ~ConnectionWorkers() override = default;

  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(fn));
    // More jobs waiting than workers waiting for one: the new one would wait.
    if (jobs_.size() > idle_ && threads_.size() < max_) {
      try {
        threads_.emplace_back([this] { work(); });
        return;
      } catch (const std::system_error&) {
        // No thread to be had now (a process limit): a running worker takes the job.
      }
    }
    cv_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();  // no enqueue() after shutdown(): threads_ is stable
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return !jobs_.empty() || shutdown_; });
      --idle_;
      if (jobs_.empty()) return;  // shut down, nothing left
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();  // serves one connection to its end, then closes it
      lock.lock();
    }
  }

  const std::size_t max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  std::vector<std::thread> threads_;        // guarded by mu_
  std::size_t idle_ = 0;                    // workers waiting in cv_; guarded by mu_
  bool shutdown_ = false;                   // guarded by mu_
};

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::string url_host(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace

std::optional<ListenAddress> parse_listen(std::string_view s) {
  std::string_view host, port;
  if (s.starts_with('[')) {
    std::size_t close = s.find(']');
    if (close == std::string_view::npos || close < 2 || close + 1 >= s.size() || s[close + 1] != ':')
      return std::nullopt;
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    std::size_t colon = s.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return std::nullopt;  // IPv6 needs [brackets]
  }
  if (!all_digits(port) || port.size() > 5) return std::nullopt;
  int p = std::stoi(std::string(port));
  if (p > 65535) return std::nullopt;
  return ListenAddress{host.empty() ? std::string("0.0.0.0") : std::string(host), p};
}

// ---- InstanceSet -------------------------------------------------------------------------

std::string InstanceSet::label_of(const std::string& arg) {
  return arg.empty() ? std::string(ringlog::kDefaultInstance) : arg;
}

InstanceSet::InstanceSet(std::vector<std::string> args) {
  for (auto& a : args) {
    Entry e;
    e.label = label_of(a);
    e.arg = std::move(a);
    entries_.push_back(std::move(e));
  }
}

void InstanceSet::tell(Entry& e, const std::string& state, const std::string& note) {
  if (state == e.state && note.empty()) return;
  e.state = state;
  if (state == "up")
    std::fprintf(stderr, "ringlog-stat: instance '%s' is up%s%s%s\n", e.label.c_str(), note.empty() ? "" : " (",
                 note.c_str(), note.empty() ? "" : ")");
  else
    std::fprintf(stderr, "ringlog-stat: instance '%s' is down: %s\n", e.label.c_str(), state.c_str());
}

std::string InstanceSet::scrape(const rs::Filter& f) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<rs::Snapshot> snaps(entries_.size());  // sized once: in[] points into it
  std::vector<rs::PrometheusInstance> in;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    in.push_back({e.label, nullptr});
    std::string reopened;
    try {
      // A writer that restarts replaces the files (new inodes): follow the new ones.
      if (e.reader && e.reader->stale()) {
        e.reader.reset();
        reopened = "reopened: its files were replaced or added";
      }
      if (!e.reader) e.reader.emplace(rs::InstanceReader::open(e.arg));
      snaps[i] = e.reader->snapshot();
    } catch (const std::exception& ex) {
      // Absent (between a writer's exit and its restart), unreadable, or damaged: down
      // for this scrape, and tried again at the next.
      e.reader.reset();
      tell(e, ex.what(), "");
      continue;
    }
    tell(e, "up", reopened);
    in.back().snapshot = &snaps[i];
  }
  return rs::format_prometheus(in, f);
}

// ---- the server --------------------------------------------------------------------------

int run_exporter(const ListenOptions& o) {
  InstanceSet instances(o.instances);
  const rs::Filter filter(o.globs);

  httplib::Server svr;
  svr.new_task_queue = [] { return new ConnectionWorkers(kMaxWorkers); };
  // SO_REUSEADDR only: a restarted ringlog-stat binds at once, but a second one on the
  // same port fails (httplib's default adds SO_REUSEPORT, which would share the port).
  svr.set_socket_options([](socket_t sock) {
    int one = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  });
  svr.set_tcp_nodelay(true);
  svr.set_keep_alive_timeout(kRequestTimeout);
  svr.set_keep_alive_max_count(kKeepAliveMax);
  svr.set_read_timeout(kRequestTimeout, 0);
  svr.set_write_timeout(kWriteTimeout, 0);
  svr.set_payload_max_length(kMaxBody);

  // GET (and HEAD, which httplib answers from GET without the body) /metrics.
  svr.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(instances.scrape(filter), kExpositionType);
  });
  auto not_allowed = [](const httplib::Request& req, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", kAllow);
    res.set_content("405 Method Not Allowed: " + req.method + " /metrics; use GET\n", kTextType);
  };
  svr.Post("/metrics", not_allowed);
  svr.Put("/metrics", not_allowed);
  svr.Patch("/metrics", not_allowed);
  svr.Delete("/metrics", not_allowed);
  svr.Options("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Allow", kAllow);
  });
  // Every other path is 404; httplib's own errors (400 for a malformed request, 413,
  // 414...) get a one-line body too.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const char* what = res.status == 404   ? " Not Found: ringlog-stat serves GET /metrics only"
                       : res.status == 400 ? " Bad Request"
                       : res.status == 413 ? " Payload Too Large"
                       : res.status == 414 ? " URI Too Long"
                                           : "";
    res.set_content(std::to_string(res.status) + what + "\n", kTextType);
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content("500 Internal Server Error: " + what + "\n", kTextType);
  });

  errno = 0;
  int port = o.address.port;
  if (port == 0) port = svr.bind_to_any_port(o.address.host);
  else if (!svr.bind_to_port(o.address.host, port)) port = -1;
  if (port < 0) {
    int err = errno;
    std::fprintf(stderr, "ringlog-stat: --listen %s: cannot listen there: %s\n", o.listen_arg.c_str(),
                 err ? std::strerror(err) : "the address does not resolve to one of this host's");
    return tool::kExitFailure;
  }

  // Signals: SIGTERM/SIGINT are taken by sigwait() below, in this thread only (blocked
  // before any thread starts, so every thread inherits the mask); a client that closes
  // early must give EPIPE, not kill the process.
  sigset_t stop_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGTERM);
  sigaddset(&stop_set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // Tell each instance's state (up, or down and why) once at start.
  (void)instances.scrape(filter);

  std::atomic<bool> stopping{false}, failed{false}, done{false};
  std::promise<void> finished;
  std::future<void> finished_f = finished.get_future();
  const pthread_t main_thread = pthread_self();
  std::thread listener([&] {
    svr.listen_after_bind();  // returns once stopped and every worker has ended
    if (!stopping.load(std::memory_order_acquire)) {
      failed.store(true, std::memory_order_release);
      pthread_kill(main_thread, SIGTERM);  // wakes sigwait(): the server has stopped on its own
    }
    done.store(true, std::memory_order_release);
    finished.set_value();
  });
  // stop() only stops a server that runs: wait for the accept loop to start (or fail).
  while (!svr.is_running() && !done.load(std::memory_order_acquire))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::fprintf(stderr, "ringlog-stat: serving http://%s:%d/metrics (%zu instance%s)\n", url_host(o.address.host).c_str(),
               port, o.instances.size(), o.instances.size() == 1 ? "" : "s");

  int sig = 0;
  sigwait(&stop_set, &sig);
  stopping.store(true, std::memory_order_release);
  svr.stop();
  int rc = tool::kExitOk;
  if (failed.load(std::memory_order_acquire)) {
    std::fprintf(stderr, "ringlog-stat: the server on %s stopped accepting connections\n", o.listen_arg.c_str());
    rc = tool::kExitFailure;
  }
  // Connections being served get kStopGrace to end (a scrape in progress completes); a
  // worker still waiting on a silent client then is not waited for: nothing here needs
  // flushing (the instance files are mapped read-only), so the process ends at once.
  if (finished_f.wait_for(kStopGrace) != std::future_status::ready) {
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  listener.join();
  return rc;
}

}  // namespace ringlog::stat_tool
