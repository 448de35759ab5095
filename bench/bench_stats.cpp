// Counter increment cost at 1, 2, 8 and 16 threads: ringlog's per-thread slabs against
// Varnish 4.0's WRK_SumStat (each task makes its increments into a thread-local struct,
// then adds the whole struct into a global one under one mutex), and, for reference,
// one shared atomic fetch_add per increment. A task is 20 increments everywhere.
// Prints the ratios its targets are stated in: slabs 2 threads / 1 thread (>= 1.8 where two
// cores are free) and slabs / mutex baseline at 16 threads (>= 10).
// bench-link: ringproxy_counters
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "ringlog/stats.hpp"
#include "ringproxy/counters.hpp"

namespace rs = ringlog::stats;
namespace pc = ringproxy::counters;  // MAIN and VBE, the proxy's groups

namespace {

constexpr int kPerTask = 20;
// The 20 increments of one task: what a request does to MAIN (a mix of counters,
// byte counts and a gauge up and down), the same in every variant.
struct Inc {
  pc::main::Id id;
  std::uint64_t n;
};
constexpr Inc kTask[kPerTask] = {
    {pc::main::sess_conn, 1},        {pc::main::sess_active, 1},      {pc::main::client_req, 1},
    {pc::main::s_req_hdrbytes, 412}, {pc::main::cache_hit, 1},        {pc::main::s_resp_hdrbytes, 280},
    {pc::main::s_resp_bodybytes, 9000}, {pc::main::log_txn, 1},       {pc::main::client_req, 1},
    {pc::main::s_req_hdrbytes, 398}, {pc::main::cache_miss, 1},       {pc::main::backend_req, 1},
    {pc::main::backend_reuse, 1},    {pc::main::fetch_time, 1200000}, {pc::main::s_resp_hdrbytes, 301},
    {pc::main::s_resp_bodybytes, 14000}, {pc::main::req_time, 1500000}, {pc::main::log_txn, 1},
    {pc::main::sess_closed, 1},      {pc::main::sess_active, std::uint64_t(0) - 1},
};

std::unique_ptr<rs::Stats> g_stats;
rs::Group* g_main = nullptr;

// ringlog: every increment goes straight into the thread's own slab in shared memory.
void BM_SlabCounters(benchmark::State& state) {
  const rs::Group& g = *g_main;
  for (auto _ : state) {
    for (const Inc& i : kTask) g.add(i.id, i.n);
  }
  state.SetItemsProcessed(state.iterations() * kPerTask);
}

// ringlog, with the thread's part of the group kept at hand (Group::local()), as a
// worker thread would keep it in its state.
void BM_SlabLocal(benchmark::State& state) {
  const rs::LocalCounters w = g_main->local();
  for (auto _ : state) {
    for (const Inc& i : kTask) w.add(i.id, i.n);
  }
  state.SetItemsProcessed(state.iterations() * kPerTask);
}

// Varnish 4.0: thread-local struct, summed into the global one under a mutex per task.
struct MainStruct {
  std::uint64_t c[pc::main::kCount];
};
std::mutex g_sum_mu;
MainStruct g_sum;
thread_local MainStruct t_wrk;

void BM_MutexSumStat(benchmark::State& state) {
  for (auto _ : state) {
    for (const Inc& i : kTask) t_wrk.c[i.id] += i.n;
    {
      std::lock_guard lk(g_sum_mu);  // WRK_SumStat
      for (unsigned k = 0; k < pc::main::kCount; ++k) g_sum.c[k] += t_wrk.c[k];
    }
    std::memset(&t_wrk, 0, sizeof t_wrk);
  }
  benchmark::DoNotOptimize(g_sum);
  state.SetItemsProcessed(state.iterations() * kPerTask);
}

// For reference: one shared atomic counter array, a locked add per increment.
struct alignas(64) SharedAtomics {
  std::atomic<std::uint64_t> c[pc::main::kCount];
};
SharedAtomics g_atomics;

void BM_SharedAtomicAdd(benchmark::State& state) {
  for (auto _ : state) {
    for (const Inc& i : kTask) g_atomics.c[i.id].fetch_add(i.n, std::memory_order_relaxed);
  }
  state.SetItemsProcessed(state.iterations() * kPerTask);
}

BENCHMARK(BM_SlabCounters)->Threads(1)->Threads(2)->Threads(8)->Threads(16)->UseRealTime();
BENCHMARK(BM_SlabLocal)->Threads(1)->Threads(2)->Threads(8)->Threads(16)->UseRealTime();
BENCHMARK(BM_MutexSumStat)->Threads(1)->Threads(2)->Threads(8)->Threads(16)->UseRealTime();
BENCHMARK(BM_SharedAtomicAdd)->Threads(1)->Threads(2)->Threads(8)->Threads(16)->UseRealTime();

// Keeps items_per_second of every run to print the ratios at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    // With --benchmark_repetitions the median is kept, else the single run.
    for (const Run& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type != Run::RT_Iteration && !median) continue;
      auto it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      const std::string key = r.run_name.str();
      if (median || !medians_.count(key)) {
        rate_[key] = it->second.value;
        cpu_[key] = r.GetAdjustedCPUTime();  // ns of CPU per iteration (one task), all threads
      }
      if (median) medians_.insert(key);
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double rate(const std::string& bench, int threads) const { return get(rate_, bench, threads); }
  double cpu_ns(const std::string& bench, int threads) const { return get(cpu_, bench, threads); }

 private:
  static double get(const std::map<std::string, double>& m, const std::string& bench, int threads) {
    auto it = m.find(bench + "/real_time/threads:" + std::to_string(threads));
    return it == m.end() ? 0 : it->second;
  }
  std::map<std::string, double> rate_, cpu_;
  std::set<std::string> medians_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const std::string path = (std::filesystem::exists("/dev/shm") ? std::string("/dev/shm") : std::string("/tmp")) +
                           "/ringlog-bench-stats-" + std::to_string(::getpid());
  g_stats = std::make_unique<rs::Stats>(rs::Stats::create(path));
  rs::Group main_group = g_stats->add_group(pc::main::kKind, "", pc::main::kDefs);
  g_main = &main_group;

  RatioReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);

  // Sanity: the slabs really counted (a reader in this process sums them).
  rs::Snapshot s = rs::StatsReader::open(path).snapshot();
  const rs::CounterValue* req = s.find("MAIN.client_req");
  const rs::CounterValue* act = s.find("MAIN.sess_active");
  std::printf("\nslab counters after the run: MAIN.client_req=%llu MAIN.sess_active=%lld (must be 0)\n",
              req ? static_cast<unsigned long long>(req->raw) : 0ull,
              act ? static_cast<long long>(act->as_signed()) : -1ll);

  std::printf("\nincrements per second (millions), ratios:\n");
  std::printf("%8s %10s %10s %10s %10s %12s %12s %12s\n", "threads", "slabs", "local", "mutex-sum", "atomic",
              "slabs/mutex", "local/mutex", "slabs/atomic");
  for (int t : {1, 2, 8, 16}) {
    double a = rep.rate("BM_SlabCounters", t), l = rep.rate("BM_SlabLocal", t), b = rep.rate("BM_MutexSumStat", t),
           c = rep.rate("BM_SharedAtomicAdd", t);
    if (a == 0) continue;
    std::printf("%8d %10.1f %10.1f %10.1f %10.1f %12.2f %12.2f %12.2f\n", t, a / 1e6, l / 1e6, b / 1e6, c / 1e6,
                b > 0 ? a / b : 0, b > 0 ? l / b : 0, c > 0 ? a / c : 0);
  }
  // CPU per increment does not depend on how busy the machine is; real-time rates do.
  std::printf("\nCPU ns per increment (task CPU time / %d):\n%8s %10s %10s %10s %10s\n", kPerTask, "threads", "slabs",
              "local", "mutex-sum", "atomic");
  for (int t : {1, 2, 8, 16}) {
    std::printf("%8d %10.2f %10.2f %10.2f %10.2f\n", t, rep.cpu_ns("BM_SlabCounters", t) / kPerTask,
                rep.cpu_ns("BM_SlabLocal", t) / kPerTask, rep.cpu_ns("BM_MutexSumStat", t) / kPerTask,
                rep.cpu_ns("BM_SharedAtomicAdd", t) / kPerTask);
  }
  std::printf("\n");
  for (const char* b : {"BM_SlabCounters", "BM_SlabLocal"}) {
    double s1 = rep.rate(b, 1), s2 = rep.rate(b, 2), s16 = rep.rate(b, 16), m16 = rep.rate("BM_MutexSumStat", 16);
    if (s1 > 0 && s2 > 0)
      std::printf("%s 2 threads / 1 thread: %.2fx (target >= 1.8 on 2 free cores; %ld cores online)\n", b, s2 / s1,
                  ::sysconf(_SC_NPROCESSORS_ONLN));
    if (s16 > 0 && m16 > 0) std::printf("%s / mutex baseline at 16 threads: %.2fx (target >= 10)\n", b, s16 / m16);
  }

  main_group.remove();
  g_main = nullptr;
  g_stats.reset();
  std::filesystem::remove(path);
  benchmark::Shutdown();
  return 0;
}
