// Shared by the bench_* programs: a console reporter that also keeps every
// iteration's items/s by benchmark name, so that a program can print ratios between
// benchmarks of the same run (never absolute times as pass/fail).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace ringlog::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;
  void ReportRuns(const std::vector<Run>& reports) override {
    for (const auto& r : reports) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      auto it = r.counters.find("items_per_second");
      if (it != r.counters.end()) rates[r.run_name.function_name].push_back(it->second.value);
    }
    ConsoleReporter::ReportRuns(reports);
  }
  // Median items/s of a benchmark over its repetitions; 0 if it did not run.
  double median(const std::string& name) const {
    auto it = rates.find(name);
    return it == rates.end() ? 0.0 : bench::median(it->second);
  }
  std::map<std::string, std::vector<double>> rates;
};

}  // namespace ringlog::bench
