// ringlog-stat: shows the counters of a ringlog instance, like varnishstat: one-shot
// lines (-1), JSON (-j), a Prometheus exposition, a field list (-l), or a live curses
// screen (the default on a terminal). It only reads: the files are mapped read-only.
//
// Exit codes (the shared set of program.hpp, documented in ringlog-stat(1)):
//   0 success, 1 no such instance (after -t) or a write error, 2 bad command line,
//   3 the instance cannot be read (permission, damaged or incompatible file),
//   4 the terminal cannot be used for the curses screen.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ringlog_cli11.hpp"

#include "program.hpp"

#include "ringlog/stats.hpp"
#include "ringlog/stats_output.hpp"
#include "screen.hpp"

namespace {

namespace rs = ringlog::stats;

namespace tool = ringlog::tool;

// -t: "off" waits forever (-1), else a number of seconds >= 0.
std::optional<double> parse_timeout(const std::string& s) {
  if (s == "off") return -1.0;
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used != s.size() || !(v >= 0) || v > 1e9) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

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
  std::string instance;
  std::string timeout_arg = "0";
  double interval = 1.0;
  app.add_flag("-1", once, "Print the counters once, one per line: name, value, rate, description");
  app.add_flag("-j", json, "Print the counters once as JSON (the varnishstat -j shape)");
  app.add_flag("--prometheus", prometheus, "Print the counters once in the Prometheus text format");
  app.add_flag("-l", list, "List the counter names with their descriptions and exit");
  app.add_option("-f", globs, "Field inclusion glob; a glob starting with ^ excludes (repeatable)")
      ->type_name("GLOB")->allow_extra_args(false);
  app.add_option("-n", instance, "Instance name (under $RINGLOG_DIR or /dev/shm/ringlog), directory, or its stats or ring file")
      ->type_name("NAME");
  app.add_option("-t", timeout_arg, "Wait up to SECONDS for a missing instance; 'off' waits forever (default 0)")
      ->type_name("SECONDS|off");
  app.add_option("--interval", interval, "Curses screen refresh interval in seconds (default 1)")
      ->type_name("SECONDS");
  cli.footer(
      "Without -1, -j, --prometheus or -l, shows a live screen when stdout is a terminal\n"
      "(keys: q quit, arrows/PgUp/PgDn move, + - refresh interval, v level, d zero counters,\n"
      "/ search) and prints like -1 otherwise.",
      {{tool::kExitOk, "ok"},
       {tool::kExitFailure, "no such instance or a write error"},
       {tool::kExitUsage, "bad command line"},
       {tool::kExitUnusable, "instance unreadable"},
       {tool::kExitTerminal, "terminal unusable"}});

  if (auto rc = cli.parse(argc, argv)) return *rc;
  auto usage_error = [&cli](const std::string& msg) { return cli.usage_error(msg); };
  if (int(once) + int(json) + int(prometheus) + int(list) > 1)
    return usage_error("-1, -j, --prometheus and -l exclude each other");
  if (!(interval >= 0.1 && interval <= 3600)) return usage_error("--interval: expected 0.1 to 3600 seconds");
  std::optional<double> timeout = parse_timeout(timeout_arg);
  if (!timeout) return usage_error("-t: expected a number of seconds or 'off', got '" + timeout_arg + "'");

  const bool batch = once || json || prometheus || list || !::isatty(STDOUT_FILENO);
  try {
    if (!batch) {
      // The screen waits and reattaches by itself; -t only bounds the first attach.
      rs::InstanceReader first = open_waiting(instance, *timeout);
      (void)first;
      ringlog::stat_tool::ScreenOptions so;
      so.instance = instance;
      so.globs = globs;
      so.interval = interval;
      return ringlog::stat_tool::run_screen(so);
    }
    rs::InstanceReader reader = open_waiting(instance, *timeout);
    rs::Snapshot snap = reader.snapshot();
    rs::Filter filter(globs);
    std::string out;
    if (json) out = rs::format_json(snap, filter);
    else if (prometheus) out = rs::format_prometheus(snap, filter);
    else if (list) out = rs::format_list(snap, filter);
    else out = rs::format_once(snap, filter);
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
