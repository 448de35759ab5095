// Records through the Txn API into the ring, against the baselines that matter,
// measured in the same run (the machine is shared: ratios, not absolute figures):
//   txn/threads:N        transactions of 15 short records (Begin, 13, End), one ring
//                        write per transaction
//   per_record/threads:N the same 15 records, each its own ring message (an unbatched
//                        logger: one tail acquisition per record)
//   no_trace / trace_off a loop step without and with a disabled trace point
//   no_record / masked   a loop step without and with a masked record
// Targets (for a 2-core machine): >= 30 M records/s at 1 thread; 2 threads
// >= 1.7x one; batching >= 1.5x per-record at 2 threads; a disabled trace point within
// 1 ns of none; a masked record within 2 ns.
// Environment: RINGLOG_BENCH_REPS (repetitions, default 3; medians are reported).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "ringlog/log.hpp"

namespace {

using namespace ringlog;

std::unique_ptr<Log> g_log;
constexpr int kStepsPerIter = 1000;

// 13 short records of a typical request, between Begin and End.
constexpr std::pair<Tag, std::string_view> kRecords[13] = {
    {Tag::ReqStart, "10.0.0.1 51234 a0"},  {Tag::ReqMethod, "GET"},
    {Tag::ReqURL, "/index.html"},          {Tag::ReqProtocol, "HTTP/1.1"},
    {Tag::ReqHeader, "Host: example.com"}, {Tag::ReqHeader, "Accept: */*"},
    {Tag::ReqHeader, "User-Agent: b/1.0"}, {Tag::Hit, "32770 119.9 10 0"},
    {Tag::RespProtocol, "HTTP/1.1"},       {Tag::RespStatus, "200"},
    {Tag::RespReason, "OK"},               {Tag::RespHeader, "Content-Length: 12"},
    {Tag::ReqAcct, "80 0 80 200 12 212"},
};
constexpr int kRecordsPerTxn = 15;  // with Begin and End

void bm_txn(benchmark::State& state) {
  Log& log = *g_log;
  for (auto _ : state) {
    Txn t = log.begin(TxnType::req, "rxreq", 1);
    for (const auto& [tag, text] : kRecords) t.record(tag, text);
    t.end();
  }
  state.SetItemsProcessed(state.iterations() * kRecordsPerTxn);
}

void bm_per_record(benchmark::State& state) {
  Log& log = *g_log;
  for (auto _ : state) {
    log.record(Tag::Begin, "req 1 rxreq");
    for (const auto& [tag, text] : kRecords) log.record(tag, text);
    log.record(Tag::End, "");
  }
  state.SetItemsProcessed(state.iterations() * kRecordsPerTxn);
}

// The trace and mask pairs: the same loop step, with and without the point under test.
template <int kWhat>
void bm_point(benchmark::State& state) {
  Log& log = *g_log;
  Txn t = log.begin(TxnType::req, "rxreq", 1);
  const std::size_t begun = t.buffered();  // the Begin record
  std::uint64_t x = 0;
  for (auto _ : state) {
    for (int i = 0; i < kStepsPerIter; ++i) {
      x += static_cast<std::uint64_t>(i);
      benchmark::DoNotOptimize(x);
      if constexpr (kWhat == 1) t.trace("step");
      if constexpr (kWhat == 2) t.record(Tag::Debug, "masked");
    }
  }
  if (t.buffered() != begun) state.SkipWithError("a disabled point wrote something");
  state.SetItemsProcessed(state.iterations() * kStepsPerIter);
}

using ringlog::bench::CollectingReporter;

void summary(const CollectingReporter& rep) {
  double txn1 = rep.median("txn/threads:1"), txn2 = rep.median("txn/threads:2");
  double per1 = rep.median("per_record/threads:1"), per2 = rep.median("per_record/threads:2");
  auto ns = [&](const char* n) { double r = rep.median(n); return r > 0 ? 1e9 / r : 0.0; };
  double no_trace = ns("no_trace"), trace_off = ns("trace_off"), no_rec = ns("no_record"), masked = ns("masked");
  std::printf("\n== records (medians) ==\n");
  std::printf("  txn        1 thread %8.2f M records/s   2 threads %8.2f M records/s\n", txn1 / 1e6, txn2 / 1e6);
  std::printf("  per-record 1 thread %8.2f M records/s   2 threads %8.2f M records/s\n", per1 / 1e6, per2 / 1e6);
  std::printf("  loop step %.3f ns, with a disabled trace point %.3f ns, with a masked record %.3f ns (step %.3f ns)\n",
              no_trace, trace_off, masked, no_rec);
  std::printf("\n== records targets (defined for a 2-core machine; this one has %u) ==\n",
              std::thread::hardware_concurrency());
  int fails = 0;
  auto check = [&](const char* what, bool ok, double v, const char* target) {
    if (!ok) ++fails;
    std::printf("  %-5s %-44s %8.2f  (target %s)\n", ok ? "PASS" : "FAIL", what, v, target);
  };
  check("txn records/s at 1 thread (M)", txn1 >= 30e6, txn1 / 1e6, ">= 30");
  check("txn 2 threads / 1 thread", txn1 > 0 && txn2 / txn1 >= 1.7, txn1 > 0 ? txn2 / txn1 : 0, ">= 1.7");
  check("2 threads: txn / per-record", per2 > 0 && txn2 / per2 >= 1.5, per2 > 0 ? txn2 / per2 : 0, ">= 1.5");
  check("1 thread: txn / per-record (info)", true, per1 > 0 ? txn1 / per1 : 0, "none");
  check("disabled trace point cost (ns)", trace_off - no_trace <= 1.0, trace_off - no_trace, "<= 1");
  check("masked record cost (ns)", masked - no_rec <= 2.0, masked - no_rec, "<= 2");
  std::printf("  %d target(s) missed; load average at the end: ", fails);
  double la[1];
  if (getloadavg(la, 1) == 1) std::printf("%.2f\n", la[0]);
  else std::printf("?\n");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const char* reps_env = std::getenv("RINGLOG_BENCH_REPS");
  int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 3;

  std::string path = "/dev/shm/ringlog-bench-records-" + std::to_string(::getpid());
  g_log = std::make_unique<Log>(Log::create(path, {.area_size = 64u << 20}));
  ::unlink(path.c_str());  // the mapping stays; nothing is left behind

  // Batched and per-record alternate at each thread count, so both see the same load.
  for (int t : {1, 2}) {
    for (int r = 0; r < reps; ++r) {
      benchmark::RegisterBenchmark(("txn/threads:" + std::to_string(t)).c_str(), bm_txn)
          ->Threads(t)->UseRealTime()->MinTime(0.3);
      benchmark::RegisterBenchmark(("per_record/threads:" + std::to_string(t)).c_str(), bm_per_record)
          ->Threads(t)->UseRealTime()->MinTime(0.3);
    }
  }
  for (int r = 0; r < reps; ++r) {
    benchmark::RegisterBenchmark("no_trace", bm_point<0>)->MinTime(0.2);
    benchmark::RegisterBenchmark("trace_off", bm_point<1>)->MinTime(0.2);
    benchmark::RegisterBenchmark("no_record", bm_point<0>)->MinTime(0.2);
    benchmark::RegisterBenchmark("masked", bm_point<2>)->MinTime(0.2);
  }
  CollectingReporter rep(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&rep);
  summary(rep);
  benchmark::Shutdown();
  g_log.reset();
  return 0;
}
