// bench_ring: messages per second into a ring from 1..N writer threads, ringlog against
// its peers measured in the same run: a global-mutex ring (lock, memcpy, unlock),
// LTTng-UST in a snapshot session of a private lttng-sessiond, and spdlog's async logger
// (overrun_oldest). Also writers in two processes, one writer with and without a
// passive reader in another process, and what one cache line costs between two cores.
//
// Rounds, not repetitions: in each round every peer writes for one slice, in an order
// that rotates from round to round, so a ratio compares neighbours in time on a shared
// machine. It prints medians, spread (min..max) and, per target, in how many rounds it
// held. A program, never a test: it exits 0 whatever it measures (2 on bad arguments).
//
// A slice: every writer thread writes rounds of HAProxy's mix (20 messages, ~213 bytes
// on average, in two parts: an 82-byte prefix and a body) until the slice ends; the
// figure is the messages the peer accepted (ringlog's drops do not count) over the wall
// time from the start signal to the last writer's stop.
//
// --instructions N: instead, one writer writes N messages into each peer, bracketed by
// callgrind's client requests (bench/ring-instructions.sh runs it under callgrind and
// prints instructions per message).
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifdef RINGLOG_BENCH_SPDLOG
#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/null_sink.h>
#endif

#include "bench_util.hpp"
#include "peers/lttng_session.hpp"
#include "peers/mutex_ring.hpp"
#include "ringlog/format.hpp"
#include "ringlog/ring.hpp"
#include "ringlog_cli11.hpp"
#include "test_util.hpp"

#ifndef RINGLOG_BENCH_LTTNG_MODULE
#define RINGLOG_BENCH_LTTNG_MODULE ""
#endif

namespace {

using ringlog::bench::LttngSession;
using ringlog::bench::median;
using ringlog::bench::MutexRing;
using ringlog::test::mix_len;
constexpr std::size_t kPrefixLen = 82;
constexpr std::size_t kMaxBody = 270;
constexpr unsigned kRound = 20;          // messages per round of the mix
constexpr unsigned kMaxWriters = 1024;   // per run, all processes

// ---------------------------------------------------------------- options

struct Options {
  std::vector<int> threads{1, 2, 4, 8, 16};
  std::vector<int> procs2{1, 2, 4, 8};  // threads per process in the 2-process cases
  std::vector<std::string> peers{"ringlog", "mutex", "lttng", "spdlog"};
  unsigned rounds = 5;
  long slice_ms = 1000;
  unsigned queues = 6;
  std::uint64_t area = 16u << 20;
  long reader_sleep_us = 0;
  bool passive = true, handover = true;
  std::string json;
  std::uint64_t instructions = 0;
  std::string lttng_module = RINGLOG_BENCH_LTTNG_MODULE;
  // A writer process started by the 2-process cases (internal).
  std::string child_peer, child_ring;
  int child_threads = 0, child_first = 0, child_ctl = -1, child_mutex = -1;
};
Options g_opt;

// ---------------------------------------------------------------- message mix

// One writer's prefix (like HAProxy's "<134>Nov 29 ... haproxy[pid]: ") and body text.
struct Payload {
  char prefix[kPrefixLen];
  char body[kMaxBody];
  explicit Payload(unsigned writer) {
    char tmp[160];
    int n = std::snprintf(tmp, sizeof tmp, "<134>Nov 29 23:59:59 host haproxy[%u]: 10.0.%u.%u:%u [29/Nov/2026:23:59:59.%03u] ",
                          writer, writer / 256 % 256, writer % 256, 40000 + writer, writer % 1000);
    std::memset(prefix, ' ', kPrefixLen);
    std::memcpy(prefix, tmp, std::min(static_cast<std::size_t>(std::max(n, 0)), kPrefixLen));
    static const char kText[] = "fe_http be_app/srv1 0/0/1/2/3 200 1234 - - ---- 1/1/0/0/0 0/0 \"GET /index.html HTTP/1.1\" ";
    for (std::size_t i = 0; i < kMaxBody; ++i) body[i] = kText[i % (sizeof kText - 1)];
  }
  // The i-th message of the mix as two parts: prefix, then 1..270 bytes of body.
  void parts(std::uint64_t i, iovec (&v)[2]) const {
    v[0] = {const_cast<char*>(prefix), kPrefixLen};
    v[1] = {const_cast<char*>(body), mix_len(i) - kPrefixLen};
  }
};

// ---------------------------------------------------------------- slices across processes

long futex(std::atomic<std::uint32_t>* w, int op, std::uint32_t v, const timespec* ts = nullptr) {
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(w), op, v, ts, nullptr, 0);
}
void wake_all(std::atomic<std::uint32_t>& w) { futex(&w, FUTEX_WAKE, INT_MAX); }

// The start/stop signals and per-thread counts of one peer's writers, in a memfd
// mapping shared with its writer processes (shared futexes, not private ones).
struct Control {
  alignas(64) std::atomic<std::uint32_t> gen{0};  // a new slice starts when it changes
  alignas(64) std::atomic<std::uint32_t> stop{0};
  std::atomic<std::uint32_t> quit{0};
  alignas(64) std::atomic<std::uint32_t> running{0};  // writers still in the slice
  alignas(64) std::atomic<std::uint32_t> ready{0};    // writers started
  std::atomic<std::uint32_t> failed{0};
  char error[256]{};
  struct alignas(64) Count {
    std::atomic<std::uint64_t> n{0};
  };
  Count counts[kMaxWriters];
};

struct SharedControl {
  int fd = -1;
  Control* ctl = nullptr;
  SharedControl() {
    fd = ::memfd_create("ringlog-bench-control", MFD_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, sizeof(Control)) != 0) throw std::runtime_error("memfd for the control block");
    map();
    new (ctl) Control;
  }
  explicit SharedControl(int inherited) : fd(inherited) { map(); }
  void map() {
    void* p = ::mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the control block");
    ctl = static_cast<Control*>(p);
  }
  ~SharedControl() {
    if (ctl) ::munmap(ctl, sizeof(Control));
    if (fd >= 0) ::close(fd);
  }
  SharedControl(const SharedControl&) = delete;
  SharedControl& operator=(const SharedControl&) = delete;
};

using WriteFn = bool (*)(void* ctx, const iovec* parts) noexcept;

// Writer threads of this process: they sleep between slices and write rounds of the mix
// during one. Thread i counts into counts[first + i] and uses ringlog thread index i.
class Pool {
 public:
  Pool(Control* c, unsigned n, unsigned first, WriteFn fn, void* ctx) : c_(c), first_(first), fn_(fn), ctx_(ctx) {
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this, i] { run(i); });
  }
  ~Pool() {
    c_->quit.store(1, std::memory_order_seq_cst);
    c_->gen.fetch_add(1, std::memory_order_seq_cst);
    wake_all(c_->gen);
    for (auto& t : threads_) t.join();
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

 private:
  void run(unsigned i) {
    ringlog::set_thread_index(i);
    Payload pl(first_ + i);
    std::uint64_t k = 0;  // position in the mix
    std::uint32_t seen = c_->gen.load(std::memory_order_acquire);
    c_->ready.fetch_add(1, std::memory_order_acq_rel);
    wake_all(c_->ready);
    for (;;) {
      std::uint32_t g;
      while ((g = c_->gen.load(std::memory_order_acquire)) == seen) futex(&c_->gen, FUTEX_WAIT, seen);
      seen = g;
      if (c_->quit.load(std::memory_order_acquire)) return;
      std::uint64_t n = 0;
      while (!c_->stop.load(std::memory_order_relaxed)) {
        for (unsigned j = 0; j < kRound; ++j, ++k) {
          iovec v[2];
          pl.parts(k, v);
          n += fn_(ctx_, v) ? 1 : 0;
        }
      }
      c_->counts[first_ + i].n.fetch_add(n, std::memory_order_release);
      if (c_->running.fetch_sub(1, std::memory_order_acq_rel) == 1) wake_all(c_->running);
    }
  }

  Control* c_;
  unsigned first_;
  WriteFn fn_;
  void* ctx_;
  std::vector<std::thread> threads_;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double self_cpu_s() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

double proc_cpu_s(pid_t pid) {  // utime + stime of another process, from /proc
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto r = s.rfind(')');
  if (r == std::string::npos) return 0;
  std::istringstream in(s.substr(r + 2));
  std::string tok;
  double ut = 0, st = 0;
  for (int field = 3; in >> tok; ++field) {
    if (field == 14) ut = std::stod(tok);
    if (field == 15) {
      st = std::stod(tok);
      break;
    }
  }
  return (ut + st) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// ---------------------------------------------------------------- peers

enum class Peer { ringlog, mutex, lttng, spdlog };
const char* peer_name(Peer p) {
  switch (p) {
    case Peer::ringlog: return "ringlog";
    case Peer::mutex: return "mutex";
    case Peer::lttng: return "lttng";
    case Peer::spdlog: return "spdlog";
  }
  return "?";
}
const char* peer_title(Peer p) {
  switch (p) {
    case Peer::ringlog: return "ringlog";
    case Peer::mutex: return "mutex ring";
    case Peer::lttng: return "LTTng-UST";
    case Peer::spdlog: return "spdlog async";
  }
  return "?";
}
std::optional<Peer> peer_of(const std::string& s) {
  for (Peer p : {Peer::ringlog, Peer::mutex, Peer::lttng, Peer::spdlog})
    if (s == peer_name(p)) return p;
  return std::nullopt;
}

bool written(ringlog::WriteStatus s) {
  return s == ringlog::WriteStatus::ok || s == ringlog::WriteStatus::truncated;
}
bool write_ringlog(void* ctx, const iovec* v) noexcept {
  return written(static_cast<ringlog::Ring*>(ctx)->writev(std::span<const iovec>(v, 2)));
}
bool write_mutex(void* ctx, const iovec* v) noexcept { return static_cast<MutexRing*>(ctx)->writev(v, 2); }
LttngSession::WriteFn g_lttng_write = nullptr;
bool write_lttng(void*, const iovec* v) noexcept {
  g_lttng_write(v[0].iov_base, v[0].iov_len, v[1].iov_base, v[1].iov_len);
  return true;  // overwrite mode: every event is accepted
}

#ifdef RINGLOG_BENCH_SPDLOG
// spdlog's async logger as its users write it: the caller formats "{}{}" into the
// message and queues it (mutex + condition variable); one worker thread hands it to the
// sink. The sink is a null sink: the worker does the least it can.
struct Spdlog {
  std::shared_ptr<spdlog::details::thread_pool> pool;
  std::shared_ptr<spdlog::async_logger> logger;
  explicit Spdlog(std::size_t slots) {
    pool = std::make_shared<spdlog::details::thread_pool>(slots, 1);
    logger = std::make_shared<spdlog::async_logger>("bench", std::make_shared<spdlog::sinks::null_sink_st>(), pool,
                                                    spdlog::async_overflow_policy::overrun_oldest);
  }
  ~Spdlog() {
    logger.reset();
    pool.reset();  // joins the worker
  }
};
bool write_spdlog(void* ctx, const iovec* v) noexcept {
  try {
    static_cast<Spdlog*>(ctx)->logger->info("{}{}", std::string_view(static_cast<const char*>(v[0].iov_base), v[0].iov_len),
                                            std::string_view(static_cast<const char*>(v[1].iov_base), v[1].iov_len));
    return true;
  } catch (...) {
    return false;
  }
}
#endif

// The LTTng session of this run, started on first use, stopped (by pid) at exit.
LttngSession* lttng() {
  static std::unique_ptr<LttngSession> s;
  if (!s) {
    // Per CPU, half of the ringlog area on a 2-CPU machine: the same 16 MiB in all.
    unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    std::uint64_t sub = 1u << 20;
    unsigned n = 2;
    while (sub * n * 2 * cpus <= g_opt.area) n *= 2;
    s = std::make_unique<LttngSession>(g_opt.lttng_module, sub, n);
    if (s->why().empty()) g_lttng_write = s->write();
  }
  return s.get();
}

// Why a peer cannot run in this layout, or "".
std::string unavailable(Peer p, bool two_procs) {
  switch (p) {
    case Peer::ringlog:
    case Peer::mutex: return "";
    case Peer::lttng: return lttng()->why();
    case Peer::spdlog:
#ifdef RINGLOG_BENCH_SPDLOG
      return two_procs ? "in-process logger: no writers in another process" : "";
#else
      return "not built (libspdlog-dev was missing at build time)";
#endif
  }
  return "?";
}

std::string scratch_path(const char* tag) {
  static unsigned n = 0;
  return "/dev/shm/ringlog-bench-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(n++);
}

// Fills the ring once around so that every page is faulted in before measuring.
void prefault(ringlog::Ring& ring) {
  Payload pl(0);
  for (std::uint64_t k = 0; ring.stats().tail < ring.area_size() + 4096; ++k) {
    iovec v[2];
    pl.parts(k, v);
    ring.writev(std::span<const iovec>(v, 2));
  }
}

// ---------------------------------------------------------------- one peer in one layout

struct Slice {
  double msgs = 0, seconds = 0, cpu = 0;
  double batches = 0, lock_waits = 0, dropped = 0;  // ringlog only
  double rate() const { return seconds > 0 ? msgs / seconds : 0; }
};

// A peer's writers for one layout (procs x threads): in this process when procs == 1,
// else in `procs` processes of this program started with --child (fresh processes, so
// that LTTng-UST registers each of them like any application).
class Runner {
 public:
  Runner(Peer peer, unsigned procs, unsigned threads) : peer_(peer), procs_(procs), threads_(threads) {
    Control* c = sc_.ctl;
    void* ctx = nullptr;
    WriteFn fn = nullptr;
    switch (peer) {
      case Peer::ringlog:
        ring_path_ = scratch_path("ring");
        ring_.emplace(ringlog::Ring::create(ring_path_, {.area_size = g_opt.area}, {.queues = g_opt.queues}));
        prefault(*ring_);
        ctx = &*ring_;
        fn = write_ringlog;
        break;
      case Peer::mutex:
        mutex_.emplace(MutexRing::create(g_opt.area, procs > 1));
        ctx = &*mutex_;
        fn = write_mutex;
        break;
      case Peer::lttng: fn = write_lttng; break;
      case Peer::spdlog:
#ifdef RINGLOG_BENCH_SPDLOG
        spdlog_ = std::make_unique<Spdlog>(static_cast<std::size_t>(g_opt.area / 256));
        ctx = spdlog_.get();
        fn = write_spdlog;
#endif
        break;
    }
    if (procs == 1) {
      pool_ = std::make_unique<Pool>(c, threads, 0, fn, ctx);
    } else {
      for (unsigned p = 0; p < procs; ++p) spawn(p);
    }
    // Wait for every writer to be ready (an LTTng process registers first).
    auto deadline = now_s() + 20;
    while (c->ready.load(std::memory_order_acquire) < procs * threads && !c->failed.load() && now_s() < deadline) {
      for (pid_t k : kids_) {
        int st = 0;
        if (::waitpid(k, &st, WNOHANG) == k) {
          c->failed.store(1);
          error_ = c->error[0] ? c->error : "a writer process exited at start";
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (error_.empty() && c->failed.load()) error_ = c->error;
    if (error_.empty() && c->ready.load() < procs * threads) error_ = "writers not ready within 20 s";
  }
  ~Runner() {
    pool_.reset();
    if (!kids_.empty()) {
      Control* c = sc_.ctl;
      c->quit.store(1, std::memory_order_seq_cst);
      c->gen.fetch_add(1, std::memory_order_seq_cst);
      wake_all(c->gen);
      for (pid_t k : kids_) {
        int st = 0;
        ::waitpid(k, &st, 0);
      }
    }
    if (!ring_path_.empty()) {
      ring_.reset();
      ::unlink(ring_path_.c_str());
    }
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  const std::string& error() const { return error_; }

  Slice slice(long ms) {
    Control* c = sc_.ctl;
    Slice s;
    auto total = [c, this] {
      double n = 0;
      for (unsigned i = 0; i < procs_ * threads_; ++i) n += static_cast<double>(c->counts[i].n.load(std::memory_order_acquire));
      return n;
    };
    auto cpu = [this] {
      if (kids_.empty()) return self_cpu_s();
      double t = 0;
      for (pid_t k : kids_) t += proc_cpu_s(k);
      return t;
    };
    std::optional<ringlog::RingStats> before;
    if (ring_) before = ring_->stats();
    double n0 = total(), cpu0 = cpu();
    c->stop.store(0, std::memory_order_seq_cst);
    c->running.store(procs_ * threads_, std::memory_order_seq_cst);
    double t0 = now_s();
    c->gen.fetch_add(1, std::memory_order_seq_cst);
    wake_all(c->gen);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    c->stop.store(1, std::memory_order_seq_cst);
    for (std::uint32_t r; (r = c->running.load(std::memory_order_acquire)) != 0;) futex(&c->running, FUTEX_WAIT, r);
    s.seconds = now_s() - t0;
    s.msgs = total() - n0;
    s.cpu = cpu() - cpu0;
    if (ring_) {
      auto after = ring_->stats();
      s.batches = static_cast<double>(after.batches - before->batches);
      s.lock_waits = static_cast<double>(after.lock_waits - before->lock_waits);
      s.dropped = static_cast<double>(after.msgs_dropped - before->msgs_dropped);
    }
    return s;
  }

 private:
  void spawn(unsigned p) {
    static std::string self = [] {
      char buf[PATH_MAX];
      ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
      return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    }();
    std::vector<std::string> args = {self, "--child", peer_name(peer_), "--child-threads", std::to_string(threads_),
                                     "--child-first", std::to_string(p * threads_), "--child-ctl",
                                     std::to_string(sc_.fd), "--queues", std::to_string(g_opt.queues)};
    if (ring_) args.insert(args.end(), {"--child-ring", ring_path_});
    if (mutex_) args.insert(args.end(), {"--child-mutex", std::to_string(mutex_->fd())});
    if (peer_ == Peer::lttng) args.insert(args.end(), {"--lttng-module", g_opt.lttng_module});
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::fcntl(sc_.fd, F_SETFD, 0);  // inherited across exec
      if (mutex_) ::fcntl(mutex_->fd(), F_SETFD, 0);
      std::vector<char*> v;
      for (auto& a : args) v.push_back(a.data());
      v.push_back(nullptr);
      ::execv(self.c_str(), v.data());
      ::_exit(127);
    }
    if (pid > 0) kids_.push_back(pid);
  }

  Peer peer_;
  unsigned procs_, threads_;
  SharedControl sc_;
  std::string error_, ring_path_;
  std::optional<ringlog::Ring> ring_;
  std::optional<MutexRing> mutex_;
#ifdef RINGLOG_BENCH_SPDLOG
  std::unique_ptr<Spdlog> spdlog_;
#endif
  std::unique_ptr<Pool> pool_;
  std::vector<pid_t> kids_;
};

// A writer process of a 2-process case: opens the peer, starts its threads, reports
// ready, writes when told, exits when told to quit.
int child_main() {
  SharedControl sc(g_opt.child_ctl);
  Control* c = sc.ctl;
  auto fail = [c](const std::string& why) {
    std::snprintf(c->error, sizeof c->error, "%s", why.c_str());
    c->failed.store(1, std::memory_order_release);
    return 1;
  };
  auto peer = peer_of(g_opt.child_peer);
  if (!peer) return fail("unknown peer " + g_opt.child_peer);
  try {
    std::optional<ringlog::Ring> ring;
    std::optional<MutexRing> mutex;
    void* ctx = nullptr;
    WriteFn fn = nullptr;
    if (*peer == Peer::ringlog) {
      ring.emplace(ringlog::Ring::open(g_opt.child_ring, {.queues = g_opt.queues}));
      ctx = &*ring;
      fn = write_ringlog;
    } else if (*peer == Peer::mutex) {
      mutex.emplace(MutexRing::attach(g_opt.child_mutex));
      ctx = &*mutex;
      fn = write_mutex;
    } else if (*peer == Peer::lttng) {
      std::string why = LttngSession::load_module(g_opt.lttng_module, g_lttng_write);
      if (!why.empty()) return fail(why);
      fn = write_lttng;
    } else {
      return fail("no writers in another process for this peer");
    }
    Pool pool(c, static_cast<unsigned>(g_opt.child_threads), static_cast<unsigned>(g_opt.child_first), fn, ctx);
    for (std::uint32_t q; (q = c->quit.load(std::memory_order_acquire)) == 0;) {
      std::uint32_t g = c->gen.load(std::memory_order_acquire);
      if (c->quit.load(std::memory_order_acquire)) break;
      futex(&c->gen, FUTEX_WAIT, g);
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return 0;
}

// ---------------------------------------------------------------- passive reader

// Shared with the reader process (anonymous shared page).
struct ReaderShared {
  std::atomic<int> ready{0};
  std::atomic<int> stop{0};
  std::atomic<std::uint64_t> msgs{0};
  std::atomic<std::uint64_t> lost_bytes{0};
};

[[noreturn]] void reader_child(const std::string& path, ReaderShared* sh) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int rc = 0;
  try {
    auto rd = ringlog::Reader::open(path, {.kind = ringlog::ReaderKind::passive, .start = ringlog::StartAt::tail});
    std::vector<std::byte> buf;
    buf.reserve(4096);
    std::uint64_t msgs = 0, lost = 0;
    sh->ready.store(1, std::memory_order_release);
    while (!sh->stop.load(std::memory_order_relaxed)) {
      auto r = rd.next(buf);
      if (r.status == ringlog::ReadStatus::message)
        ++msgs;
      else if (r.status == ringlog::ReadStatus::lost)
        lost += r.lost;
      else if (g_opt.reader_sleep_us > 0)
        ::usleep(static_cast<useconds_t>(g_opt.reader_sleep_us));  // read in bursts
      else
        rd.wait(std::chrono::milliseconds(10));  // the library's own polling
    }
    sh->msgs.store(msgs, std::memory_order_relaxed);
    sh->lost_bytes.store(lost, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reader: %s\n", e.what());
    rc = 1;
  }
  sh->ready.store(rc ? -1 : 1, std::memory_order_release);
  ::_exit(rc);
}

struct PassiveResult {
  std::vector<double> alone, with, share, lost_mb;
};

// One writer into a ring, alone and with a passive reader in a forked process,
// alternating round by round (the reader is started before and stopped after its slice).
PassiveResult run_passive() {
  PassiveResult res;
  std::string path = scratch_path("passive");
  auto ring = ringlog::Ring::create(path, {.area_size = g_opt.area}, {.queues = g_opt.queues});
  prefault(ring);
  SharedControl sc;
  Pool pool(sc.ctl, 1, 0, write_ringlog, &ring);
  while (sc.ctl->ready.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto slice = [&sc](long ms) {
    Control* c = sc.ctl;
    double n0 = static_cast<double>(c->counts[0].n.load());
    c->stop.store(0);
    c->running.store(1);
    double t0 = now_s();
    c->gen.fetch_add(1);
    wake_all(c->gen);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    c->stop.store(1);
    for (std::uint32_t r; (r = c->running.load()) != 0;) futex(&c->running, FUTEX_WAIT, r);
    Slice s;
    s.seconds = now_s() - t0;
    s.msgs = static_cast<double>(c->counts[0].n.load()) - n0;
    return s;
  };
  for (unsigned r = 0; r < g_opt.rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      bool with = (k + r) % 2 == 1;
      if (!with) {
        res.alone.push_back(slice(g_opt.slice_ms).rate());
        continue;
      }
      void* p = ::mmap(nullptr, sizeof(ReaderShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) continue;
      auto* sh = new (p) ReaderShared;
      std::fflush(nullptr);
      pid_t child = ::fork();
      if (child == 0) reader_child(path, sh);
      while (sh->ready.load(std::memory_order_acquire) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      auto before = ring.stats();
      Slice s = slice(g_opt.slice_ms);
      auto after = ring.stats();
      sh->stop.store(1);
      int st = 0;
      ::waitpid(child, &st, 0);
      double wr = static_cast<double>(after.msgs_written - before.msgs_written);
      res.with.push_back(s.rate());
      res.share.push_back(wr > 0 ? static_cast<double>(sh->msgs.load()) / wr : 0);
      res.lost_mb.push_back(static_cast<double>(sh->lost_bytes.load()) / 1e6);
      ::munmap(p, sizeof(ReaderShared));
    }
  }
  ::unlink(path.c_str());
  return res;
}

// ---------------------------------------------------------------- cache-line hand-over

// What two writers on two cores pay at the least: one cache line handed from one core
// to the other and back. Two threads pinned to CPUs 0 and 1 take turns writing one word;
// returns ns per hand-over (median of the rounds).
void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort: unpinned still measures
}

double run_handover() {
  alignas(64) static std::atomic<std::uint64_t> word{0};
  std::vector<double> ns;
  for (unsigned r = 0; r < g_opt.rounds; ++r) {
    constexpr std::uint64_t kTurns = 200000;
    std::uint64_t base = word.load();
    auto player = [base](std::uint64_t first, int cpu) {
      if (cpu >= 0) pin_to_cpu(cpu);
      for (std::uint64_t i = base + first; i < base + kTurns; i += 2) {
        while (word.load(std::memory_order_acquire) != i) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        }
        word.store(i + 1, std::memory_order_release);
      }
    };
    bool two = std::thread::hardware_concurrency() >= 2;
    double t0 = now_s();
    std::thread a(player, 0, two ? 0 : -1), b(player, 1, two ? 1 : -1);
    a.join();
    b.join();
    ns.push_back((now_s() - t0) * 1e9 / kTurns);
  }
  return median(ns);
}

// ---------------------------------------------------------------- instruction counts

// One writer, n messages per peer, each loop between CALLGRIND_ZERO_STATS and
// CALLGRIND_DUMP_STATS_AT(peer): under callgrind each dump holds that loop's
// instructions, all threads included (spdlog's worker, LTTng-UST's own threads).
int instructions_main() {
  const std::uint64_t n = g_opt.instructions;
  std::printf("one writer, %" PRIu64 " messages per peer, HAProxy mix%s\n", n,
              RUNNING_ON_VALGRIND ? " (under valgrind: wall clock is meaningless)" : "");
  for (const auto& name : g_opt.peers) {
    auto peer = peer_of(name);
    if (!peer) continue;
    if (auto why = unavailable(*peer, false); !why.empty()) {
      std::printf("%-14s unavailable: %s\n", peer_title(*peer), why.c_str());
      continue;
    }
    std::optional<ringlog::Ring> ring;
    std::optional<MutexRing> mutex;
#ifdef RINGLOG_BENCH_SPDLOG
    std::unique_ptr<Spdlog> spd;
#endif
    std::string path;
    void* ctx = nullptr;
    WriteFn fn = nullptr;
    switch (*peer) {
      case Peer::ringlog:
        path = scratch_path("instr");
        ring.emplace(ringlog::Ring::create(path, {.area_size = g_opt.area}, {.queues = g_opt.queues}));
        prefault(*ring);
        ctx = &*ring;
        fn = write_ringlog;
        break;
      case Peer::mutex:
        mutex.emplace(MutexRing::create(g_opt.area, false));
        ctx = &*mutex;
        fn = write_mutex;
        break;
      case Peer::lttng: fn = write_lttng; break;
      case Peer::spdlog:
#ifdef RINGLOG_BENCH_SPDLOG
        spd = std::make_unique<Spdlog>(static_cast<std::size_t>(g_opt.area / 256));
        ctx = spd.get();
        fn = write_spdlog;
#endif
        break;
    }
    Payload pl(0);
    std::uint64_t ok = 0;
    auto loop = [&](std::uint64_t count) {
      for (std::uint64_t k = 0; k < count; ++k) {
        iovec v[2];
        pl.parts(k, v);
        ok += fn(ctx, v) ? 1 : 0;
      }
    };
    loop(n / 4 + kRound);  // warm: caches, lazy set-up (writer slot, LTTng's per-thread state)
    ok = 0;
    CALLGRIND_ZERO_STATS;
    double t0 = now_s();
    loop(n);
    double t = now_s() - t0;
    CALLGRIND_DUMP_STATS_AT(peer_name(*peer));
    std::printf("%-14s %8.1f ns/msg  (%" PRIu64 " of %" PRIu64 " accepted)\n", peer_title(*peer), t * 1e9 / static_cast<double>(n),
                ok, n);
    if (!path.empty()) {
      ring.reset();
      ::unlink(path.c_str());
    }
  }
  return 0;
}

// ---------------------------------------------------------------- the sweep

struct Layout {
  unsigned procs, threads;
  unsigned writers() const { return procs * threads; }
  std::string name() const {
    return procs == 1 ? std::to_string(threads) : std::to_string(procs) + "x" + std::to_string(threads);
  }
};

struct PeerRuns {
  std::string why;  // unavailable
  std::vector<Slice> slices;  // by round
  std::vector<double> rates() const {
    std::vector<double> v;
    for (auto& s : slices) v.push_back(s.rate());
    return v;
  }
};

struct LayoutRuns {
  Layout layout;
  std::map<Peer, PeerRuns> peers;
};

std::vector<Peer> selected_peers() {
  std::vector<Peer> v;
  for (auto& n : g_opt.peers)
    if (auto p = peer_of(n)) v.push_back(*p);
  return v;
}

LayoutRuns run_layout(const Layout& lay) {
  LayoutRuns lr{lay, {}};
  std::vector<Peer> peers = selected_peers();
  std::vector<std::unique_ptr<Runner>> runners(peers.size());
  std::vector<Peer> live;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    std::string why = unavailable(peers[i], lay.procs > 1);
    if (why.empty()) {
      try {
        runners[i] = std::make_unique<Runner>(peers[i], lay.procs, lay.threads);
        why = runners[i]->error();
      } catch (const std::exception& e) {
        why = e.what();
      }
      if (!why.empty()) runners[i].reset();
    }
    lr.peers[peers[i]].why = why;
  }
  for (unsigned r = 0; r < g_opt.rounds; ++r) {
    for (std::size_t k = 0; k < peers.size(); ++k) {
      std::size_t i = (k + r) % peers.size();  // rotate who goes first
      if (!runners[i]) continue;
      lr.peers[peers[i]].slices.push_back(runners[i]->slice(g_opt.slice_ms));
    }
  }
  return lr;
}

// ---------------------------------------------------------------- printing

std::string mega(double v) {
  char b[32];
  if (v >= 1e6)
    std::snprintf(b, sizeof b, "%.2f M", v / 1e6);
  else
    std::snprintf(b, sizeof b, "%.0f k", v / 1e3);
  return b;
}

double load1() {
  double l[3] = {0, 0, 0};
  return ::getloadavg(l, 3) > 0 ? l[0] : -1;
}

std::string autogroup() {
  std::ifstream f("/proc/self/autogroup");
  std::string s;
  std::getline(f, s);
  return s;
}

// Per-round ratios of two peers (same round, neighbouring slices).
std::vector<double> ratios(const PeerRuns& a, const PeerRuns& b) {
  std::vector<double> v;
  for (std::size_t i = 0; i < a.slices.size() && i < b.slices.size(); ++i)
    if (b.slices[i].rate() > 0) v.push_back(a.slices[i].rate() / b.slices[i].rate());
  return v;
}

struct Verdict {
  std::string what;
  double med = 0;
  unsigned held = 0, of = 0;
  double target = 0;
  bool measured = false;
};
std::vector<Verdict> g_verdicts;

void verdict(const std::string& what, const std::vector<double>& r, double target) {
  Verdict v{what, 0, 0, static_cast<unsigned>(r.size()), target, !r.empty()};
  if (!r.empty()) {
    v.med = median(r);
    for (double x : r) v.held += x >= target ? 1 : 0;
  }
  g_verdicts.push_back(v);
}

std::string spread(const std::vector<double>& v, bool rate) {
  if (v.empty()) return "-";
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  char b[64];
  if (rate)
    std::snprintf(b, sizeof b, "%.2f-%.2f", *lo / 1e6, *hi / 1e6);
  else
    std::snprintf(b, sizeof b, "%.2f-%.2f", *lo, *hi);
  return b;
}

void print_layouts(const std::vector<LayoutRuns>& all, const char* title) {
  std::vector<Peer> peers = selected_peers();
  std::printf("\n== %s: msg/s, median of %u rounds (min-max in M) ==\n", title, g_opt.rounds);
  std::printf("%-8s", "writers");
  for (Peer p : peers) std::printf(" %-24s", peer_title(p));
  std::printf("\n");
  for (auto& lr : all) {
    std::printf("%-8s", lr.layout.name().c_str());
    for (Peer p : peers) {
      auto& pr = lr.peers.at(p);
      if (!pr.why.empty() || pr.slices.empty()) {
        std::printf(" %-24s", "n/a");
        continue;
      }
      auto r = pr.rates();
      std::string cell = mega(median(r)) + " [" + spread(r, true) + "]";
      std::printf(" %-24s", cell.c_str());
    }
    std::printf("\n");
  }
  std::printf("%-8s %-22s %-22s %-10s %-10s %-12s %-9s %s\n", "writers", "ringlog/mutex", "ringlog/LTTng", "msgs/batch",
              "waits/msg", "carried/wait", "dropped", "cores used (per peer)");
  for (auto& lr : all) {
    auto& rl = lr.peers.at(Peer::ringlog);
    auto cell = [&](Peer other, double target) -> std::string {
      if (!lr.peers.count(other) || !lr.peers.at(other).why.empty()) return "n/a";
      auto v = ratios(rl, lr.peers.at(other));
      if (v.empty()) return "n/a";
      unsigned held = 0;
      for (double x : v) held += x >= target ? 1 : 0;
      char b[64];
      std::snprintf(b, sizeof b, "%.2f [%s] %u/%zu", median(v), spread(v, false).c_str(), held, v.size());
      return b;
    };
    bool one = lr.layout.writers() == 1;
    double msgs = 0, batches = 0, waits = 0, dropped = 0;
    for (auto& s : rl.slices) {
      msgs += s.msgs;
      batches += s.batches;
      waits += s.lock_waits;
      dropped += s.dropped;
    }
    std::string cores;
    for (Peer p : peers) {
      auto& pr = lr.peers.at(p);
      std::vector<double> c;
      for (auto& s : pr.slices) c.push_back(s.seconds > 0 ? s.cpu / s.seconds : 0);
      char b[32];
      std::snprintf(b, sizeof b, "%s%.2f", cores.empty() ? "" : " / ", c.empty() ? 0.0 : median(c));
      cores += c.empty() ? (cores.empty() ? "-" : " / -") : b;
    }
    // A write that waited is either carried in another writer's batch or commits its own.
    char carried[16] = "-";
    if (waits > 0) std::snprintf(carried, sizeof carried, "%.2f", std::max(0.0, msgs - batches) / waits);
    std::printf("%-8s %-22s %-22s %-10.3f %-10.4f %-12s %-9.0f %s\n", lr.layout.name().c_str(),
                cell(Peer::mutex, one ? 0.8 : 1.0).c_str(), cell(Peer::lttng, one ? 5.0 : 1.0).c_str(),
                batches > 0 ? msgs / batches : 0.0, msgs > 0 ? waits / msgs : 0.0, carried, dropped, cores.c_str());
  }
  for (Peer p : peers) {
    for (auto& lr : all) {
      auto& pr = lr.peers.at(p);
      if (!pr.why.empty()) {
        std::printf("  %s: %s\n", peer_title(p), pr.why.c_str());
        break;
      }
    }
  }
}

void json_write(const std::vector<LayoutRuns>& all, const PassiveResult& pas, double handover, const char* start_date,
                double load_start, double load_end, const std::string& lttng_field) {
  if (g_opt.json.empty()) return;
  std::FILE* f = std::fopen(g_opt.json.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "bench_ring: cannot write %s\n", g_opt.json.c_str());
    return;
  }
  utsname u{};
  ::uname(&u);
  std::fprintf(f, "{\n  \"context\": {\"date\": \"%s\", \"host\": \"%s\", \"kernel\": \"%s\", \"num_cpus\": %u,"
               " \"load_start\": %.2f, \"load_end\": %.2f, \"nice\": %d, \"autogroup\": \"%s\", \"rounds\": %u,"
               " \"slice_ms\": %ld, \"ringlog_queues\": %u, \"area_mb\": %" PRIu64 ", \"lttng_field\": \"%s\"},\n",
               start_date, u.nodename, u.release, std::thread::hardware_concurrency(), load_start, load_end,
               ::getpriority(PRIO_PROCESS, 0), autogroup().c_str(), g_opt.rounds, g_opt.slice_ms, g_opt.queues,
               g_opt.area >> 20, lttng_field.c_str());
  std::fprintf(f, "  \"results\": [\n");
  bool first = true;
  for (auto& lr : all)
    for (auto& [p, pr] : lr.peers) {
      for (std::size_t r = 0; r < pr.slices.size(); ++r) {
        auto& s = pr.slices[r];
        std::fprintf(f, "%s    {\"peer\": \"%s\", \"procs\": %u, \"threads\": %u, \"writers\": %u, \"round\": %zu,"
                     " \"msgs\": %.0f, \"seconds\": %.6f, \"rate\": %.1f, \"cores_used\": %.3f",
                     first ? "" : ",\n", peer_name(p), lr.layout.procs, lr.layout.threads, lr.layout.writers(), r, s.msgs,
                     s.seconds, s.rate(), s.seconds > 0 ? s.cpu / s.seconds : 0.0);
        if (p == Peer::ringlog)
          std::fprintf(f, ", \"msgs_per_batch\": %.4f, \"lock_waits_per_msg\": %.5f, \"dropped\": %.0f",
                       s.batches > 0 ? s.msgs / s.batches : 0.0, s.msgs > 0 ? s.lock_waits / s.msgs : 0.0, s.dropped);
        std::fprintf(f, "}");
        first = false;
      }
    }
  std::fprintf(f, "\n  ],\n  \"unavailable\": {");
  first = true;
  std::map<std::string, std::string> seen;
  for (auto& lr : all)
    for (auto& [p, pr] : lr.peers)
      if (!pr.why.empty()) seen[std::string(peer_name(p)) + (lr.layout.procs > 1 ? "/2proc" : "")] = pr.why;
  for (auto& [k, v] : seen) {
    std::fprintf(f, "%s\"%s\": \"%s\"", first ? "" : ", ", k.c_str(), v.c_str());
    first = false;
  }
  std::fprintf(f, "},\n  \"passive\": {\"alone\": [");
  for (std::size_t i = 0; i < pas.alone.size(); ++i) std::fprintf(f, "%s%.1f", i ? ", " : "", pas.alone[i]);
  std::fprintf(f, "], \"with_reader\": [");
  for (std::size_t i = 0; i < pas.with.size(); ++i) std::fprintf(f, "%s%.1f", i ? ", " : "", pas.with[i]);
  std::fprintf(f, "]},\n  \"handover_ns\": %.1f\n}\n", handover);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ring write throughput: ringlog against a mutex ring, LTTng-UST and spdlog, in the same run"};
  auto list = [](std::vector<int>& out) {
    return [&out](const std::string& s) {
      out.clear();
      std::stringstream in(s);
      for (std::string tok; std::getline(in, tok, ',');)
        if (!tok.empty()) out.push_back(std::stoi(tok));
    };
  };
  std::string threads, procs2, peers;
  std::uint64_t area_mb = 16;
  app.add_option("--threads", threads, "writer thread counts in one process, e.g. 1,2,4,8,16")
      ->envname("RINGLOG_BENCH_THREADS");
  app.add_option("--procs2", procs2, "threads per process for the 2-process cases (\"\" for none), e.g. 1,2,4,8")
      ->envname("RINGLOG_BENCH_PROCS2");
  app.add_option("--peers", peers, "peers to measure, from ringlog,mutex,lttng,spdlog")->envname("RINGLOG_BENCH_PEERS");
  app.add_option("--rounds", g_opt.rounds, "rounds (each peer writes one slice per round)")
      ->envname("RINGLOG_BENCH_ROUNDS")->check(CLI::Range(1u, 1000u));
  app.add_option("--slice-ms", g_opt.slice_ms, "length of one slice")->envname("RINGLOG_BENCH_SLICE_MS")
      ->check(CLI::Range(1L, 60000L));
  app.add_option("--queues", g_opt.queues, "ringlog wait queues per process")->envname("RINGLOG_BENCH_QUEUES")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--area-mb", area_mb, "ring size in MiB (every peer)")->envname("RINGLOG_BENCH_AREA_MB")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--reader-sleep-us", g_opt.reader_sleep_us,
                 "the passive reader, once caught up, sleeps this long instead of Reader::wait()")
      ->envname("RINGLOG_BENCH_READER_SLEEP_US");
  bool no_passive = false, no_handover = false;
  app.add_flag("--no-passive", no_passive, "skip the passive-reader case");
  app.add_flag("--no-handover", no_handover, "skip the cache-line hand-over");
  app.add_option("--json", g_opt.json, "also write every slice to this JSON file (for plot_ring.py)");
  app.add_option("--instructions", g_opt.instructions,
                 "instead: N messages from one writer into each peer, for callgrind (bench/ring-instructions.sh)");
  app.add_option("--lttng-module", g_opt.lttng_module, "the LTTng-UST peer module (built beside bench_ring)")
      ->envname("RINGLOG_BENCH_LTTNG_MODULE");
  auto* child = app.add_option("--child", g_opt.child_peer)->group("");
  app.add_option("--child-threads", g_opt.child_threads)->group("");
  app.add_option("--child-first", g_opt.child_first)->group("");
  app.add_option("--child-ctl", g_opt.child_ctl)->group("");
  app.add_option("--child-ring", g_opt.child_ring)->group("");
  app.add_option("--child-mutex", g_opt.child_mutex)->group("");
  try {
    app.parse(argc, argv);
    if (!threads.empty()) list(g_opt.threads)(threads);
    if (app.count("--procs2") || std::getenv("RINGLOG_BENCH_PROCS2")) list(g_opt.procs2)(procs2);
    if (!peers.empty()) {
      g_opt.peers.clear();
      std::stringstream in(peers);
      for (std::string tok; std::getline(in, tok, ',');) {
        if (!peer_of(tok)) throw CLI::ValidationError("--peers", "unknown peer " + tok);
        g_opt.peers.push_back(tok);
      }
    }
    for (int t : g_opt.threads)
      if (t < 1 || t > static_cast<int>(kMaxWriters)) throw CLI::ValidationError("--threads", "1.." + std::to_string(kMaxWriters));
    for (int t : g_opt.procs2)
      if (t < 1 || 2 * t > static_cast<int>(kMaxWriters)) throw CLI::ValidationError("--procs2", "out of range");
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ring: %s\n", e.what());
    return 2;
  }
  g_opt.area = area_mb << 20;
  g_opt.passive = !no_passive;
  g_opt.handover = !no_handover;
  if (*child) return child_main();
  if (g_opt.instructions) return instructions_main();

  char date[64];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  double load_start = load1();
  std::printf("bench_ring %s: %u CPUs, load %.2f, nice %d, %s, %u rounds of %ld ms slices, %u ringlog queues, %" PRIu64
              " MiB rings\n",
              date, std::thread::hardware_concurrency(), load_start, ::getpriority(PRIO_PROCESS, 0), autogroup().c_str(),
              g_opt.rounds, g_opt.slice_ms, g_opt.queues, g_opt.area >> 20);
  std::fflush(stdout);

  // The passive reader forks: before LTTng-UST is loaded into this process.
  PassiveResult pas;
  if (g_opt.passive) pas = run_passive();
  double handover = g_opt.handover ? run_handover() : 0;

  bool want_lttng = std::find(g_opt.peers.begin(), g_opt.peers.end(), "lttng") != g_opt.peers.end();
  if (want_lttng) {
    auto* s = lttng();
    if (s->why().empty())
      std::printf("LTTng-UST: private lttng-sessiond (LTTNG_HOME %s), snapshot session, %s; event fields: %s\n",
                  s->home().c_str(), s->channel_desc().c_str(), s->field_type().c_str());
    else
      std::printf("LTTng-UST unavailable: %s\n", s->why().c_str());
  }

  std::vector<LayoutRuns> one, two;
  for (int t : g_opt.threads) {
    one.push_back(run_layout({1, static_cast<unsigned>(t)}));
    std::printf("  done: %s writer(s) in one process (load %.2f)\n", one.back().layout.name().c_str(), load1());
    std::fflush(stdout);
  }
  for (int t : g_opt.procs2) {
    two.push_back(run_layout({2, static_cast<unsigned>(t)}));
    std::printf("  done: 2 processes x %d writer(s) (load %.2f)\n", t, load1());
    std::fflush(stdout);
  }
  long long snap = want_lttng ? lttng()->snapshot_bytes() : -1;
  double load_end = load1();

  if (!one.empty()) print_layouts(one, "writer threads in one process");
  if (!two.empty()) print_layouts(two, "2 processes x N writer threads (\"2xN\": 2N writers)");
  if (snap >= 0) std::printf("LTTng-UST snapshot at the end: %.1f MB recorded\n", static_cast<double>(snap) / 1e6);

  // ringlog in 2 processes against ringlog in one, same number of writers.
  for (auto& t2 : two)
    for (auto& t1 : one)
      if (t1.layout.writers() == t2.layout.writers()) {
        auto v = ratios(t2.peers.at(Peer::ringlog), t1.peers.at(Peer::ringlog));
        if (!v.empty())
          std::printf("ringlog %s / ringlog %u writers in one process: %.2f [%s]\n", t2.layout.name().c_str(),
                      t1.layout.writers(), median(v), spread(v, false).c_str());
      }
  if (!pas.alone.empty() && !pas.with.empty()) {
    std::printf("1 writer alone %s msg/s, with a passive reader in another process %s msg/s: %.2fx (reader got %.1f %%, "
                "lost %.1f MB)\n",
                mega(median(pas.alone)).c_str(), mega(median(pas.with)).c_str(), median(pas.with) / median(pas.alone),
                100 * median(pas.share), median(pas.lost_mb));
  }
  if (handover > 0) {
    std::printf("one cache line handed between two cores: %.0f ns", handover);
    for (auto& lr : one)
      if (lr.layout.writers() == 2 && !lr.peers.at(Peer::ringlog).slices.empty()) {
        double r2 = median(lr.peers.at(Peer::ringlog).rates());
        std::printf("; ringlog at 2 writers: %.0f ns per message per writer = %.1f hand-overs", 2e9 / r2,
                    (2e9 / r2) / handover);
      }
    std::printf("\n");
  }

  // Targets: per layout, ringlog against the mutex ring and LTTng-UST, round by round.
  for (auto* set : {&one, &two})
    for (auto& lr : *set) {
      auto& rl = lr.peers.at(Peer::ringlog);
      bool single = lr.layout.writers() == 1;
      std::string w = lr.layout.procs == 1 ? std::to_string(lr.layout.threads) + " writer" + (single ? "" : "s")
                                           : lr.layout.name() + " writers";
      if (lr.peers.count(Peer::mutex)) verdict(w + ": ringlog / mutex ring", ratios(rl, lr.peers.at(Peer::mutex)), single ? 0.8 : 1.0);
      if (lr.peers.count(Peer::lttng)) verdict(w + ": ringlog / LTTng-UST", ratios(rl, lr.peers.at(Peer::lttng)), single ? 5.0 : 1.0);
    }
  if (!pas.alone.empty() && pas.alone.size() == pas.with.size()) {
    std::vector<double> v;
    for (std::size_t i = 0; i < pas.alone.size(); ++i) v.push_back(pas.with[i] / pas.alone[i]);
    verdict("1 writer: with a passive reader / alone", v, 0.9);
  }
  std::printf("\n== targets (median of the per-round ratios; rounds in which it held) ==\n");
  int missed = 0;
  for (auto& v : g_verdicts) {
    if (!v.measured) {
      std::printf("  n/a   %-44s (not measured)\n", v.what.c_str());
      continue;
    }
    bool ok = v.med >= v.target;
    missed += ok ? 0 : 1;
    std::printf("  %-5s %-44s %6.2f (>= %.1f; held in %u of %u rounds)\n", ok ? "PASS" : "FAIL", v.what.c_str(), v.med,
                v.target, v.held, v.of);
  }
  std::printf("  %d target(s) missed; load %.2f at the start, %.2f at the end\n", missed, load_start, load_end);
  json_write(one.empty() ? two : [&] {
    auto v = one;
    v.insert(v.end(), two.begin(), two.end());
    return v;
  }(), pas, handover, date, load_start, load_end, want_lttng && lttng()->why().empty() ? lttng()->field_type() : "");
  return 0;
}
