// ringlog-stat: shows the counters of a ringlog instance, like varnishstat: one-shot
// lines (-1), JSON (-j), a Prometheus exposition (--prometheus, or served to Prometheus
// with --listen), a field list (-l), or a live curses screen (the default on a
// terminal). It only reads: the files are mapped read-only.
//
// Exit codes (the shared set of program.hpp, documented in ringlog-stat(1)):
//   0 success, 1 no such instance (after -t), a write error or --listen cannot serve,
//   2 bad command line,
//   3 the instance cannot be read (permission, damaged or incompatible file),
//   4 the terminal cannot be used for the curses screen.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ringlog_cli11.hpp"

#include "exporter.hpp"
#include "program.hpp"
#include "values.hpp"

#include "ringlog/stats.hpp"
#include "ringlog/stats_output.hpp"
#include "screen.hpp"

namespace {

namespace rs = ringlog::stats;

namespace tool = ringlog::tool;

// Opens the instance, retrying every 0.25 s while it does not exist and time is left.
rs::InstanceReader open_waiting(const std::string& name, double timeout) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    try {
      rs::InstanceReader r = rs::InstanceReader::open(name);
      // An instance being created may show its ring a moment before its stats file:
      // when waiting anyway, give the writer up to a second to add it.
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      for (int i = 0; i < 10 && timeout != 0 && !r.has_stats() && (timeout < 0 || waited + i * 0.1 < timeout); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (r.stale()) r = rs::InstanceReader::open(name);
      }
      return r;
    } catch (const ringlog::Error& e) {
      if (e.code() != ringlog::Errc::not_found) throw;
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (timeout >= 0 && waited >= timeout) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

}  // namespace

int main(int argc, char** argv) {
  tool::Cli cli("ringlog-stat", "ringlog-stat - show the counters of a ringlog instance (like varnishstat)");
  CLI::App& app = cli.app();
  bool once = false, json = false, prometheus = false, list = false;
  std::vector<std::string> globs;
  std::vector<std::string> instances;
  std::string listen;
  std::string timeout_arg = "0";
  double interval = 1.0;
  app.add_flag("-1", once, "Print the counters once, one per line: name, value, rate, description");
  app.add_flag("-j", json, "Print the counters once as JSON (the varnishstat -j shape)");
  app.add_flag("--prometheus", prometheus, "Print the counters once in the Prometheus text format");
  app.add_option("--listen", listen, "Serve the counters at http://ADDR:PORT/metrics for Prometheus to scrape")
      ->type_name("ADDR:PORT");
  app.add_flag("-l", list, "List the counter names with their descriptions and exit");
  app.add_option("-f", globs, "Field inclusion glob; a glob starting with ^ excludes (repeatable)")
      ->type_name("GLOB")->allow_extra_args(false);
  app.add_option("-n", instances,
                 "Instance name (under $RINGLOG_DIR or /dev/shm/ringlog), directory, or its stats or ring file;\n"
                 "repeatable with --prometheus and --listen")
      ->type_name("NAME")->allow_extra_args(false);
  app.add_option("-t", timeout_arg, "Wait up to SECONDS for a missing instance; 'off' waits forever (default 0)")
      ->type_name("SECONDS|off");
  app.add_option("--interval", interval, "Curses screen refresh interval in seconds (default 1)")
      ->type_name("SECONDS");
  cli.footer(
      "Without -1, -j, --prometheus, --listen or -l, shows a live screen when stdout is a terminal\n"
      "(keys: q quit, arrows/PgUp/PgDn move, + - refresh interval, v level, d zero counters,\n"
      "/ search) and prints like -1 otherwise.",
      {{tool::kExitOk, "ok"},
       {tool::kExitFailure, "no such instance, a write error or cannot listen"},
       {tool::kExitUsage, "bad command line"},
       {tool::kExitUnusable, "instance unreadable"},
       {tool::kExitTerminal, "terminal unusable"}});

  if (auto rc = cli.parse(argc, argv)) return *rc;
  auto usage_error = [&cli](const std::string& msg) { return cli.usage_error(msg); };
  const bool listening = app.count("--listen") > 0;
  if (int(once) + int(json) + int(prometheus) + int(list) + int(listening) > 1)
    return usage_error("-1, -j, --prometheus, --listen and -l exclude each other");
  if (instances.size() > 1 && !prometheus && !listening)
    return usage_error("-n: several instances only with --prometheus or --listen");
  std::set<std::string> labels;
  for (const auto& n : instances)
    if (!labels.insert(ringlog::stat_tool::InstanceSet::label_of(n)).second)
      return usage_error("-n: instance '" + ringlog::stat_tool::InstanceSet::label_of(n) + "' given twice");
  if (instances.empty()) instances.emplace_back();  // the default instance
  if (!(interval >= 0.1 && interval <= 3600)) return usage_error("--interval: expected 0.1 to 3600 seconds");
  std::optional<double> timeout = tool::parse_wait(timeout_arg);
  if (!timeout) return usage_error("-t: expected a number of seconds or 'off', got '" + timeout_arg + "'");
  if (listening) {
    if (app.count("-t")) return usage_error("-t: not with --listen, which reports a missing instance as down");
    auto addr = ringlog::stat_tool::parse_listen(listen);
    if (!addr)
      return usage_error("--listen: expected ADDR:PORT (127.0.0.1:9123, [::1]:9123, :9123), got '" + listen + "'");
    ringlog::stat_tool::ListenOptions lo;
    lo.address = *addr;
    lo.listen_arg = listen;
    lo.instances = instances;
    lo.globs = globs;
    return ringlog::stat_tool::run_exporter(lo);
  }

  const bool batch = once || json || prometheus || list || !::isatty(STDOUT_FILENO);
  try {
    if (!batch) {
      // The screen waits and reattaches by itself; -t only bounds the first attach.
      rs::InstanceReader first = open_waiting(instances[0], *timeout);
      (void)first;
      ringlog::stat_tool::ScreenOptions so;
      so.instance = instances[0];
      so.globs = globs;
      so.interval = interval;
      return ringlog::stat_tool::run_screen(so);
    }
    rs::Filter filter(globs);
    std::string out;
    if (prometheus) {
      // The exposition --listen serves, taken once; every instance must exist (after -t).
      std::vector<rs::Snapshot> snaps;
      for (const auto& n : instances) snaps.push_back(open_waiting(n, *timeout).snapshot());
      std::vector<std::string> names;
      for (const auto& n : instances) names.push_back(ringlog::stat_tool::InstanceSet::label_of(n));
      std::vector<rs::PrometheusInstance> in;
      for (std::size_t i = 0; i < snaps.size(); ++i) in.push_back({names[i], &snaps[i]});
      out = rs::format_prometheus(in, filter);
    } else {
      rs::InstanceReader reader = open_waiting(instances[0], *timeout);
      rs::Snapshot snap = reader.snapshot();
      if (json) out = rs::format_json(snap, filter);
      else if (list) out = rs::format_list(snap, filter);
      else out = rs::format_once(snap, filter);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (std::fflush(stdout) != 0) return cli.fail(std::string("write: ") + std::strerror(errno));
    return tool::kExitOk;
  } catch (const ringlog::Error& e) {
    if (e.code() == ringlog::Errc::not_found)
      return cli.fail(std::string(e.what()) +
                      "\nIs the writer running? Use -n NAME to pick an instance, -t SECONDS to wait for it.");
    return cli.fail(e.what(), tool::kExitUnusable);
  } catch (const std::exception& e) {
    return cli.fail(e.what(), tool::kExitUnusable);
  }
}
