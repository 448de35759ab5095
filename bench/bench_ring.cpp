// Ring write throughput: ringlog against a global-mutex byte ring (Varnish 4.0 style) in
// the same run, 1..N writer threads, HAProxy's message mix; plus one writer with and
// without a passive reader in another process. Prints ratios and PASS/FAIL against the
// targets of issue 2; it is a benchmark, so it never fails the process on a missed target.
//
// Each benchmark owns a pool of writer threads for its whole run. One Google Benchmark
// iteration is one time slice: the pool writes until the slice ends, and items are the
// messages the ring accepted from all threads in that slice (drops do not count). Time is wall time of the slice
// (UseRealTime), so throughput is total messages / wall time even when threads outnumber
// cores (Google Benchmark's own ->Threads() averages per-thread times instead, which
// flatters unfair schedules).
//
// Environment:
//   RINGLOG_BENCH_THREADS  writer thread counts, default "1,2,4,8,16,32"
//   RINGLOG_BENCH_QUEUES   ringlog wait queues per process, default 6
//   RINGLOG_BENCH_SLICE_MS length of one iteration, default 50
//   RINGLOG_BENCH_AREA_MB  ring size in MiB (both rings), default 16
//   RINGLOG_BENCH_READER_SLEEP_US  the passive reader, when it has caught up, sleeps
//                          this long instead of calling Reader::wait() (0: wait())
// Flags: Google Benchmark's own, plus --json=FILE (same as --benchmark_out=FILE
// --benchmark_out_format=json).
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "ringlog/format.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

namespace {

using ringlog::test::mix_len;
constexpr std::size_t kPrefixLen = 82;
constexpr std::size_t kMaxBody = 270;
constexpr unsigned kRound = 20;  // messages per round of the mix

// ---------------------------------------------------------------- configuration

std::vector<int> env_list(const char* name, std::vector<int> def) {
  const char* s = std::getenv(name);
  if (!s || !*s) return def;
  std::vector<int> out;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    long v = std::strtol(p, &end, 10);
    if (end == p) {
      ++p;
      continue;
    }
    if (v > 0 && v <= 4096) out.push_back(static_cast<int>(v));
    p = end;
  }
  return out.empty() ? def : out;
}

long env_long(const char* name, long def, long lo, long hi) {
  const char* s = std::getenv(name);
  if (!s || !*s) return def;
  long v = std::strtol(s, nullptr, 10);
  return v < lo || v > hi ? def : v;
}

unsigned g_queues = 6;
long g_slice_ms = 50;
std::uint64_t g_area = 16u << 20;
long g_reader_sleep_us = 0;

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

// ---------------------------------------------------------------- mutex baseline

// A plain byte ring behind one global lock held across reserve and copy, with the same
// framing as ringlog (RC byte, varint length, payload), head advanced over whole
// messages, counters updated under the lock. Written the way a careful C programmer
// would (Varnish's vsl_get keeps pointers): byte offsets wrap by compare and subtract,
// no division on the hot path. Its memory is a shared anonymous mapping, like the
// ring's /dev/shm pages.
class MutexRing {
 public:
  explicit MutexRing(std::uint64_t size) : size_(size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    area_ = static_cast<std::uint8_t*>(p);
    std::memset(area_, 0, size);  // fault every page in before measuring
  }
  ~MutexRing() { ::munmap(area_, size_); }
  MutexRing(const MutexRing&) = delete;
  MutexRing& operator=(const MutexRing&) = delete;

  bool writev(const iovec* parts, std::size_t n) noexcept {
    std::uint64_t len = 0;
    for (std::size_t i = 0; i < n; ++i) len += parts[i].iov_len;
    std::uint64_t word = len << ringlog::format::kKindBits;  // kind 0: data
    std::uint8_t vb[ringlog::format::kVarintMax];
    std::size_t vl = ringlog::format::varint_encode(word, vb);
    std::uint64_t needed = 1 + vl + len;
    if (needed + 2 > size_) return false;
    std::lock_guard lk(mu_);
    std::uint64_t new_tail = tail_ + needed;
    while (new_tail - head_ > size_) {  // reclaim the oldest messages
      std::uint64_t w = 0;
      std::size_t hl = ringlog::format::varint_decode([&](std::size_t i) { return area_[wrap(head_off_ + 1 + i)]; },
                                                     ringlog::format::kVarintMax, w);
      std::uint64_t span = 1 + hl + (w >> ringlog::format::kKindBits);
      head_ += span;
      head_off_ = wrap(head_off_ + span);
    }
    // This message's RC byte is at tail-1 already; the next one's goes at new_tail-1.
    std::uint64_t off = copy_in(tail_off_, vb, vl);
    for (std::size_t i = 0; i < n; ++i) off = copy_in(off, parts[i].iov_base, parts[i].iov_len);
    area_[off] = 0;
    tail_ = new_tail;
    tail_off_ = wrap(off + 1);
    ++msgs_;
    bytes_ += needed;
    return true;
  }

 private:
  std::uint64_t wrap(std::uint64_t off) const noexcept { return off >= size_ ? off - size_ : off; }
  // Copies n bytes at offset off, wrapping once if needed; returns the offset after.
  std::uint64_t copy_in(std::uint64_t off, const void* src, std::size_t n) noexcept {
    std::size_t first = static_cast<std::size_t>(std::min<std::uint64_t>(n, size_ - off));
    std::memcpy(area_ + off, src, first);
    if (first < n) std::memcpy(area_, static_cast<const std::uint8_t*>(src) + first, n - first);
    return wrap(off + n);
  }

  std::mutex mu_;
  std::uint8_t* area_;
  std::uint64_t size_;
  std::uint64_t head_ = 0, tail_ = 1;          // absolute; one RC byte at 0
  std::uint64_t head_off_ = 0, tail_off_ = 1;  // the same, as offsets in the area
  std::uint64_t msgs_ = 0, bytes_ = 0;
};

// ---------------------------------------------------------------- writer pool

// N writer threads that write rounds of the mix during each slice. Only messages that
// went into the ring count (a dropped write is cheap and must not inflate msg/s).
class Pool {
 public:
  using WriteFn = std::function<bool(unsigned thread, const iovec* parts)>;

  Pool(unsigned n, WriteFn fn) : counts_(n), fn_(std::move(fn)) {
    threads_.reserve(n);
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this, i] { run(i); });
  }
  ~Pool() {
    quit_.store(true, std::memory_order_relaxed);
    gen_.fetch_add(1, std::memory_order_seq_cst);
    gen_.notify_all();
    for (auto& t : threads_) t.join();
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // One slice: all threads write for `ms`; returns the messages written meanwhile.
  std::uint64_t slice(long ms) {
    std::uint64_t before = total();
    stop_.store(false, std::memory_order_seq_cst);
    running_.store(static_cast<std::uint32_t>(threads_.size()), std::memory_order_seq_cst);
    gen_.fetch_add(1, std::memory_order_seq_cst);
    gen_.notify_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    stop_.store(true, std::memory_order_seq_cst);
    for (std::uint32_t r; (r = running_.load(std::memory_order_acquire)) != 0;) running_.wait(r);
    return total() - before;
  }

 private:
  struct alignas(64) Count {
    std::atomic<std::uint64_t> n{0};
  };

  std::uint64_t total() const {
    std::uint64_t s = 0;
    for (auto& c : counts_) s += c.n.load(std::memory_order_acquire);
    return s;
  }

  void run(unsigned i) {
    ringlog::set_thread_index(i);
    Payload pl(i);
    std::uint64_t k = 0;  // position in the mix
    std::uint32_t seen = 0;
    for (;;) {
      gen_.wait(seen, std::memory_order_acquire);
      seen = gen_.load(std::memory_order_acquire);
      if (quit_.load(std::memory_order_relaxed)) return;
      std::uint64_t n = 0;
      while (!stop_.load(std::memory_order_relaxed)) {
        for (unsigned j = 0; j < kRound; ++j, ++k) {
          iovec v[2];
          pl.parts(k, v);
          n += fn_(i, v) ? 1 : 0;
        }
      }
      counts_[i].n.fetch_add(n, std::memory_order_release);
      if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1) running_.notify_all();
    }
  }

  std::vector<Count> counts_;
  WriteFn fn_;
  std::vector<std::thread> threads_;
  alignas(64) std::atomic<std::uint32_t> gen_{0};
  alignas(64) std::atomic<bool> stop_{false};
  std::atomic<bool> quit_{false};
  alignas(64) std::atomic<std::uint32_t> running_{0};
};

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// Runs the timed slices of one benchmark over a pool, and reports messages as items.
// cores_used: CPU time of this process over wall time, i.e. how much of the machine
// the writers actually got (on a shared machine, much less than the thread count).
void run_slices(benchmark::State& state, Pool& pool) {
  std::uint64_t items = 0;
  double cpu0 = cpu_seconds();
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) items += pool.slice(g_slice_ms);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.SetItemsProcessed(static_cast<std::int64_t>(items));
  state.counters["cores_used"] = wall > 0 ? (cpu_seconds() - cpu0) / wall : 0.0;
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

std::string scratch_path(const char* tag) {
  static unsigned n = 0;
  return "/dev/shm/ringlog-bench-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(n++);
}

bool written(ringlog::WriteStatus s) {
  return s == ringlog::WriteStatus::ok || s == ringlog::WriteStatus::truncated;
}

// Per-run ring counters: batching, lock contention, and drops. Without readers a drop
// means a writer was descheduled in the middle of its copy long enough for the others
// to lap the ring (its 0xFF readers-count byte stops them): see bench/README.md.
void add_ring_counters(benchmark::State& state, const ringlog::RingStats& before, const ringlog::RingStats& after) {
  double msgs = static_cast<double>(after.msgs_written - before.msgs_written);
  double batches = static_cast<double>(after.batches - before.batches);
  state.counters["msgs_per_batch"] = batches > 0 ? msgs / batches : 0.0;
  state.counters["lock_waits_per_msg"] = msgs > 0 ? static_cast<double>(after.lock_waits - before.lock_waits) / msgs : 0.0;
  state.counters["dropped"] = static_cast<double>(after.msgs_dropped - before.msgs_dropped);
}

// ---------------------------------------------------------------- benchmarks

// A fresh, prefaulted ring in /dev/shm; on failure the benchmark is skipped with why.
std::optional<ringlog::Ring> make_ring(benchmark::State& state, const std::string& path) {
  try {
    auto ring = ringlog::Ring::create(path, {.area_size = g_area}, {.queues = g_queues});
    prefault(ring);
    return ring;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return std::nullopt;
  }
}

void bm_ringlog(benchmark::State& state, unsigned threads) {
  std::string path = scratch_path("ring");
  auto made = make_ring(state, path);
  if (!made) return;
  ringlog::Ring& ring = *made;
  auto before = ring.stats();
  {
    Pool pool(threads, [&ring](unsigned, const iovec* v) { return written(ring.writev(std::span<const iovec>(v, 2))); });
    run_slices(state, pool);
  }
  add_ring_counters(state, before, ring.stats());
  ::unlink(path.c_str());
}

void bm_mutex(benchmark::State& state, unsigned threads) {
  MutexRing ring(g_area);
  {
    Pool pool(threads, [&ring](unsigned, const iovec* v) { return ring.writev(v, 2); });
    run_slices(state, pool);
  }
}

// Shared with the reader process (anonymous shared page).
struct ReaderShared {
  std::atomic<int> ready{0};
  std::atomic<int> stop{0};
  std::atomic<std::uint64_t> msgs{0};
  std::atomic<std::uint64_t> lost_bytes{0};
  std::atomic<std::uint64_t> lost_events{0};
};

[[noreturn]] void reader_child(const std::string& path, ReaderShared* sh) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int rc = 0;
  try {
    auto rd = ringlog::Reader::open(path, {.kind = ringlog::ReaderKind::passive, .start = ringlog::StartAt::tail});
    std::vector<std::byte> buf;
    buf.reserve(4096);
    std::uint64_t msgs = 0, lost = 0, lost_ev = 0;
    sh->ready.store(1, std::memory_order_release);
    for (unsigned k = 0; !sh->stop.load(std::memory_order_relaxed); ++k) {
      auto r = rd.next(buf);
      if (r.status == ringlog::ReadStatus::message) {
        ++msgs;
      } else if (r.status == ringlog::ReadStatus::lost) {
        lost += r.lost;
        ++lost_ev;
      } else if (g_reader_sleep_us > 0) {
        ::usleep(static_cast<useconds_t>(g_reader_sleep_us));  // read in bursts
      } else {
        rd.wait(std::chrono::milliseconds(10));  // the library's own polling
      }
      if ((k & 1023) == 0) {
        sh->msgs.store(msgs, std::memory_order_relaxed);
        sh->lost_bytes.store(lost, std::memory_order_relaxed);
        sh->lost_events.store(lost_ev, std::memory_order_relaxed);
      }
    }
    sh->msgs.store(msgs, std::memory_order_relaxed);
    sh->lost_bytes.store(lost, std::memory_order_relaxed);
    sh->lost_events.store(lost_ev, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reader: %s\n", e.what());
    rc = 1;
  }
  sh->ready.store(rc ? -1 : 1, std::memory_order_release);
  ::_exit(rc);
}

// One writer thread; with_reader: a passive reader in a forked process tails the ring.
void bm_passive(benchmark::State& state, bool with_reader) {
  std::string path = scratch_path("passive");
  auto made = make_ring(state, path);
  if (!made) return;
  ringlog::Ring& ring = *made;
  ReaderShared* sh = nullptr;
  pid_t child = -1;
  if (with_reader) {
    void* p = ::mmap(nullptr, sizeof(ReaderShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      return;
    }
    sh = new (p) ReaderShared;
    std::fflush(nullptr);
    child = ::fork();
    if (child == 0) reader_child(path, sh);
    while (sh->ready.load(std::memory_order_acquire) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (sh->ready.load(std::memory_order_acquire) < 0) state.SkipWithError("reader process failed to open the ring");
  }
  auto before = ring.stats();
  std::uint64_t read0 = sh ? sh->msgs.load(std::memory_order_relaxed) : 0;
  {
    Pool pool(1, [&ring](unsigned, const iovec* v) { return written(ring.writev(std::span<const iovec>(v, 2))); });
    run_slices(state, pool);
  }
  auto after = ring.stats();
  add_ring_counters(state, before, after);
  if (sh) {
    sh->stop.store(1, std::memory_order_relaxed);
    int st = 0;
    ::waitpid(child, &st, 0);
    double written = static_cast<double>(after.msgs_written - before.msgs_written);
    double read = static_cast<double>(sh->msgs.load(std::memory_order_relaxed) - read0);
    state.counters["reader_share"] = written > 0 ? read / written : 0.0;
    state.counters["reader_lost_MB"] = static_cast<double>(sh->lost_bytes.load(std::memory_order_relaxed)) / 1e6;
    ::munmap(sh, sizeof(ReaderShared));
  }
  ::unlink(path.c_str());
}

// ---------------------------------------------------------------- cache-line hand-over

// What two writers on two cores pay at the least: one cache line handed from one core
// to the other and back. Two threads take turns writing one word (each waits for the
// other's value); items are hand-overs. Every shared-ring write at 2 threads moves at
// least the tail's line (and the line where the previous message ended), so this
// bounds what any lock or lock-free ring can do with two writers on this machine.
void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort: unpinned still measures
}

void bm_handover(benchmark::State& state) {
  alignas(64) static std::atomic<std::uint64_t> word{0};
  std::uint64_t items = 0;
  for (auto _ : state) {
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
    std::thread a(player, 0, two ? 0 : -1), b(player, 1, two ? 1 : -1);
    a.join();
    b.join();
    items += kTurns;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(items));
}

// ---------------------------------------------------------------- summary

using ringlog::bench::CollectingReporter;


void summary(const CollectingReporter& rep, const std::vector<int>& threads) {
  auto get = [&](const std::string& name) { return rep.median(name); };
  unsigned cores = std::thread::hardware_concurrency();
  std::size_t reps = 0;
  for (auto& [name, v] : rep.rates) reps = std::max(reps, v.size());
  std::printf("\n== ringlog ring vs global-mutex ring (msg/s, median of %zu run(s)) ==\n", reps);
  std::printf("%8s %14s %14s %10s %12s\n", "threads", "ringlog", "mutex", "ring/mutex", "ring/ring@2");
  double r2 = get("ringlog/threads:2");
  for (int n : threads) {
    double r = get("ringlog/threads:" + std::to_string(n));
    double m = get("mutex/threads:" + std::to_string(n));
    if (r == 0 && m == 0) continue;
    std::printf("%8d %14.0f %14.0f %10.2f", n, r, m, m > 0 ? r / m : 0.0);
    if (r2 > 0) std::printf(" %12.2f", r / r2);
    std::printf("\n");
  }
  double alone = get("passive/reader:0"), with = get("passive/reader:1");
  if (alone > 0 && with > 0)
    std::printf("1 writer alone %.0f msg/s, with a passive reader in another process %.0f msg/s: %.2fx\n", alone,
                with, with / alone);

  if (double ho = get("handover"); ho > 0 && r2 > 0)
    std::printf("one cache line handed between two cores: %.0f ns; ringlog at 2 threads: %.0f ns per message per thread"
                " = %.1f hand-overs\n",
                1e9 / ho, 2e9 / r2, (2e9 / r2) / (1e9 / ho));
  std::printf("\n== targets (issue 2, defined for a 2-core machine; this one has %u) ==\n", cores);
  int fails = 0;
  auto check = [&](const std::string& what, double num, double den, double target) {
    if (num <= 0 || den <= 0) {
      std::printf("  n/a   %-46s (not measured)\n", what.c_str());
      return;
    }
    double ratio = num / den;
    bool ok = ratio >= target;
    if (!ok) ++fails;
    std::printf("  %-5s %-46s %.2f (target >= %.2f)\n", ok ? "PASS" : "FAIL", what.c_str(), ratio, target);
  };
  check("1 thread: ringlog / mutex", get("ringlog/threads:1"), get("mutex/threads:1"), 0.8);
  check("2 threads: ringlog / mutex", r2, get("mutex/threads:2"), 1.2);
  for (int n : {16, 32}) {
    std::string rn = "ringlog/threads:" + std::to_string(n);
    check(std::to_string(n) + " threads: ringlog / mutex", get(rn), get("mutex/threads:" + std::to_string(n)), 3.0);
    check(std::to_string(n) + " threads: ringlog / ringlog at 2 threads", get(rn), r2, 0.7);
  }
  check("1 writer: with passive reader / alone", with, alone, 0.9);
  std::printf("  %d target(s) missed%s\n", fails,
              cores == 2 ? "" : " (informational: targets are defined for 2 cores)");
}

}  // namespace

int main(int argc, char** argv) {
  // --json=FILE is shorthand for Google Benchmark's JSON file output.
  std::vector<std::string> extra;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--json=", 7) == 0) {
      extra.push_back(std::string("--benchmark_out=") + (argv[i] + 7));
      extra.push_back("--benchmark_out_format=json");
    } else {
      args.push_back(argv[i]);
    }
  }
  for (auto& e : extra) args.push_back(e.data());
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);

  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;

  std::vector<int> threads = env_list("RINGLOG_BENCH_THREADS", {1, 2, 4, 8, 16, 32});
  g_queues = static_cast<unsigned>(env_long("RINGLOG_BENCH_QUEUES", 6, 1, 1024));
  g_slice_ms = env_long("RINGLOG_BENCH_SLICE_MS", 50, 1, 10000);
  g_area = static_cast<std::uint64_t>(env_long("RINGLOG_BENCH_AREA_MB", 16, 1, 1 << 16)) << 20;
  g_reader_sleep_us = env_long("RINGLOG_BENCH_READER_SLEEP_US", 0, 0, 1000000);
  benchmark::AddCustomContext("ringlog_queues", std::to_string(g_queues));
  benchmark::AddCustomContext("ringlog_area_mb", std::to_string(g_area >> 20));
  benchmark::AddCustomContext("slice_ms", std::to_string(g_slice_ms));
  benchmark::AddCustomContext("reader_sleep_us", std::to_string(g_reader_sleep_us));

  // ringlog and the baseline alternate at each thread count, so that both see the same
  // machine load; the ratios are what matters on a shared machine.
  for (int t : threads) {
    auto u = static_cast<unsigned>(t);
    benchmark::RegisterBenchmark(("ringlog/threads:" + std::to_string(t)).c_str(),
                                 [u](benchmark::State& s) { bm_ringlog(s, u); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("mutex/threads:" + std::to_string(t)).c_str(),
                                 [u](benchmark::State& s) { bm_mutex(s, u); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("handover", bm_handover)->UseRealTime()->Unit(benchmark::kMillisecond);
  for (bool r : {false, true})
    benchmark::RegisterBenchmark(r ? "passive/reader:1" : "passive/reader:0",
                                 [r](benchmark::State& s) { bm_passive(s, r); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);

  CollectingReporter rep(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&rep);
  summary(rep, threads);
  benchmark::Shutdown();
  return 0;
}
