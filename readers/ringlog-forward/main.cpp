// ringlog-forward: a pinned reader that ships transactions (NCSA lines, JSON or raw
// records) to syslog collectors, the way HAProxy's ring `server` lines do: RFC 5424
// over TCP (RFC 6587 octet counting or LF framing) or UDP, to several destinations at
// once. It must never lose a message silently: what it cannot deliver is counted
// (FORWARD.<dest>.lost) and said on stderr.
//
// Exit codes (the shared set of program.hpp, documented in ringlog-forward(1)):
//   0 success (stopped by a signal, -k or -d/-r end, everything delivered),
//   1 runtime error (no ring, unreadable file, messages left undelivered at exit),
//   2 bad command line, 3 ring unusable (permission denied, not a ringlog ring).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ringlog_cli11.hpp"

#include "forwarder.hpp"
#include "reader_tool.hpp"
#include "ringlog/clock.hpp"
#include "ringlog/json.hpp"
#include "ringlog/ncsa.hpp"
#include "ringlog/printer.hpp"
#include "ringlog/ring.hpp"
#include "ringlog/stats.hpp"
#include "syslog.hpp"

namespace {

namespace fw = ringlog::forward;
namespace tool = ringlog::tool;
using namespace std::chrono_literals;

constexpr const char* kTool = "ringlog-forward";

enum class Output { ncsa, json, raw };

void say(const std::string& msg) { std::cerr << kTool << ": " << msg << "\n"; }

std::string hostname_or_dash() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "-";
  return buf;
}

// Where this process's pinned reader (the loop's) stands in the ring, for the stall
// policy and the drain at SIGTERM; nullopt while no ring is open.
std::optional<ringlog::ReaderProgress> pin_progress(const tool::ReaderLoop& loop) {
  const ringlog::Reader* r = loop.reader();
  if (!r) return std::nullopt;
  return r->progress();
}
double pin_fill(const tool::ReaderLoop& loop) {
  auto p = pin_progress(loop);
  return p ? p->fill() : 0;
}

// SIGTERM/SIGINT: the first one asks for a drain (read what the ring holds up to
// that moment, deliver it, then exit, all within --flush-timeout); a second one, or
// one that comes before the reader is attached, stops at once.
volatile std::sig_atomic_t g_term_signals = 0;
volatile std::sig_atomic_t g_term_signo = 0;
volatile std::sig_atomic_t g_attached = 0;

extern "C" void on_term_signal(int sig) {
  g_term_signo = sig;
  if (g_term_signals > 0 || !g_attached) tool::request_stop();
  g_term_signals = g_term_signals + 1;
}

}  // namespace

int main(int argc, char** argv) {
  tool::Cli cli(kTool, "ringlog-forward - ship ringlog transactions to syslog collectors (RFC 5424 over TCP or UDP)");
  CLI::App& app = cli.app();
  tool::ReaderOptions ro;
  std::vector<std::string> destinations;
  std::string output_arg = "ncsa", framing_arg = "octet-counting", facility_arg = "local0", severity_arg = "info";
  std::string hostname = hostname_or_dash(), app_name = "ringlog", msgid_arg;
  std::string format_arg, format_file, buffer_arg = "8M", send_buffer_arg = "256k", udp_max_arg = "8192";
  std::string on_stall_arg = "drop-oldest", stats_path;
  bool no_stats = false;
  std::size_t replay = 0;
  double stall_fill = 90, retry_min = 0.2, retry_max = 30, flush_timeout = 10;

  app.add_option("destination", destinations,
                 "Where to send: [NAME=]tcp://HOST:PORT or [NAME=]udp://HOST:PORT (one or more; each gets "
                 "every message; NAME names its counters)")
      ->required()->type_name("DEST");
  tool::add_reader_options(app, ro, tool::kAllOptions);
  if (CLI::Option* p = app.get_option_no_throw("--pinned")) app.remove_option(p);  // always pinned
  app.add_option("--output", output_arg, "What each message carries: ncsa (a line per request, default), "
                                          "json (a transaction group, as ringlog -j) or raw (a record)")
      ->type_name("ncsa|json|raw");
  app.add_option("-F", format_arg, "NCSA format (ringlog-ncsa's formatters; default the combined format)")
      ->type_name("FORMAT");
  app.add_option("-f", format_file, "Read the NCSA format from FILE")->type_name("FILE");
  app.add_option("--framing", framing_arg, "TCP framing: octet-counting (RFC 6587, default) or lf")
      ->type_name("octet-counting|lf");
  app.add_option("--facility", facility_arg, "Syslog facility (default local0)")->type_name("NAME");
  app.add_option("--severity", severity_arg, "Syslog severity (default info)")->type_name("NAME");
  app.add_option("--hostname", hostname, "HOSTNAME field (default this host's name)")->type_name("NAME");
  app.add_option("--app-name", app_name, "APP-NAME field (default ringlog)")->type_name("NAME");
  app.add_option("--msgid", msgid_arg, "MSGID field (default the output: ncsa, json or raw)")->type_name("ID");
  app.add_option("--buffer", buffer_arg, "Messages held for the destinations before the ring is left to fill "
                                          "(default 8M)")
      ->type_name("BYTES");
  app.add_option("--send-buffer", send_buffer_arg, "Framed bytes staged per TCP destination (default 256k)")
      ->type_name("BYTES");
  app.add_option("--replay", replay, "Delivered messages sent again after a TCP reconnect, for collectors "
                                      "killed with messages in hand (default 0)")
      ->type_name("N");
  app.add_option("--udp-max", udp_max_arg, "Longest UDP datagram; longer messages are cut (default 8192)")
      ->type_name("BYTES");
  app.add_option("--retry-min", retry_min, "First reconnect delay in seconds, doubled per failure (default 0.2)")
      ->type_name("SECONDS");
  app.add_option("--retry-max", retry_max, "Longest reconnect delay in seconds (default 30)")->type_name("SECONDS");
  app.add_option("--on-stall", on_stall_arg, "When a destination stays down until the ring is nearly full: "
                                              "drop-oldest (default) or block-writers")
      ->type_name("drop-oldest|block-writers");
  app.add_option("--stall-fill", stall_fill, "Ring fill (percent) behind the forwarder that counts as a stall "
                                              "(default 90)")
      ->type_name("PERCENT");
  app.add_option("--flush-timeout", flush_timeout,
                 "On SIGTERM, how long to read what the ring held and deliver it (default 10)")
      ->type_name("SECONDS");
  app.add_option("--stats", stats_path, "Counters file (default forward.stats in the instance directory)")
      ->type_name("FILE");
  app.add_flag("--no-stats", no_stats, "Keep no counters file");
  cli.footer(
      "Always a pinned reader: nothing is overwritten in the ring before it is in the forwarder's buffer,\n"
      "and a message leaves the buffer only once every destination delivered it.\n"
      "SIGTERM/SIGINT: read what the ring held at the signal, deliver it all, exit (within --flush-timeout).",
      {{tool::kExitOk, "ok"},
       {tool::kExitFailure, "runtime error (no ring, messages left undelivered)"},
       {tool::kExitUsage, "bad command line"},
       {tool::kExitUnusable, "ring unusable (permission denied, not a ringlog ring)"}});

  if (auto rc = tool::parse_reader_command_line(cli, ro, argc, argv, [&ro] { ro.pinned = true; })) return *rc;
  auto usage_error = [&cli](const std::string& msg) { return cli.usage_error(msg); };

  // Check every value before touching anything.
  Output output;
  if (output_arg == "ncsa") output = Output::ncsa;
  else if (output_arg == "json") output = Output::json;
  else if (output_arg == "raw") output = Output::raw;
  else return usage_error("--output: expected ncsa, json or raw, got '" + output_arg + "'");
  if ((!format_arg.empty() || !format_file.empty()) && output != Output::ncsa)
    return usage_error("-F and -f apply to --output ncsa only");
  if (!format_arg.empty() && !format_file.empty()) return usage_error("-F and -f exclude each other");
  if (output == Output::ncsa && ro.mode == ringlog::Grouping::raw)
    return usage_error("--output ncsa needs transactions: -g vxid, request or session");
  if (output == Output::ncsa && !ro.record_filters.empty())
    return usage_error(std::string("-") + ro.record_filters.front().first +
                       ": -i, -x, -I and -X choose the records of --output json and raw; "
                       "NCSA lines are chosen with -q, -c and -b");
  fw::ForwarderOptions fo;
  auto framing = fw::framing_by_name(framing_arg);
  if (!framing) return usage_error("--framing: expected octet-counting or lf, got '" + framing_arg + "'");
  fo.framing = *framing;
  fw::HeaderFields hdr;
  auto fac = fw::facility_by_name(facility_arg);
  if (!fac) return usage_error("--facility: unknown facility '" + facility_arg + "' (kern, user, ..., local0..local7)");
  auto sev = fw::severity_by_name(severity_arg);
  if (!sev) return usage_error("--severity: unknown severity '" + severity_arg + "' (emerg ... debug)");
  hdr.facility = *fac;
  hdr.severity = *sev;
  hdr.hostname = fw::sanitize_field(hostname, 255);
  hdr.app_name = fw::sanitize_field(app_name, 48);
  std::string msgid = fw::sanitize_field(msgid_arg.empty() ? output_arg : msgid_arg, 32);
  auto buf = tool::parse_size(buffer_arg, std::uint64_t(1) << 40);
  if (!buf || *buf < 4096) return usage_error("--buffer: expected a size from 4k to 1T (e.g. 8M), got '" + buffer_arg + "'");
  fo.queue_bytes = *buf;
  auto sbuf = tool::parse_size(send_buffer_arg, std::uint64_t(1) << 40);
  if (!sbuf || *sbuf < 1024) return usage_error("--send-buffer: expected a size from 1k to 1T, got '" + send_buffer_arg + "'");
  fo.send_buffer = *sbuf;
  auto umax = tool::parse_size(udp_max_arg, std::uint64_t(1) << 40);
  if (!umax || *umax < 480 || *umax > 65507) return usage_error("--udp-max: expected 480 to 65507 bytes, got '" + udp_max_arg + "'");
  fo.udp_max = *umax;
  fo.replay = replay;
  if (!(retry_min >= 0.001 && retry_min <= 3600) || !(retry_max >= retry_min && retry_max <= 86400))
    return usage_error("--retry-min/--retry-max: expected 0.001 <= min <= max <= 86400 seconds");
  fo.backoff_min = std::chrono::milliseconds(static_cast<long long>(retry_min * 1000));
  fo.backoff_max = std::chrono::milliseconds(static_cast<long long>(retry_max * 1000));
  bool drop_oldest;
  if (on_stall_arg == "drop-oldest") drop_oldest = true;
  else if (on_stall_arg == "block-writers") drop_oldest = false;
  else return usage_error("--on-stall: expected drop-oldest or block-writers, got '" + on_stall_arg + "'");
  if (!(stall_fill >= 10 && stall_fill <= 100)) return usage_error("--stall-fill: expected 10 to 100 percent");
  if (!(flush_timeout >= 0 && flush_timeout <= 86400)) return usage_error("--flush-timeout: expected 0 to 86400 seconds");
  if (no_stats && !stats_path.empty()) return usage_error("--stats and --no-stats exclude each other");
  std::vector<fw::Endpoint> endpoints;
  for (const auto& d : destinations) {
    std::string err;
    auto ep = fw::parse_endpoint(d, err);
    if (!ep) return usage_error(err);
    for (const auto& e : endpoints)
      if (e.name == ep->name) return usage_error("two destinations are named '" + ep->name + "'; name them NAME=URL");
    endpoints.push_back(std::move(*ep));
  }
  std::optional<ringlog::NcsaFormatter> ncsa;
  if (output == Output::ncsa) {
    std::string fmt(ringlog::kNcsaDefaultFormat);
    if (!format_arg.empty()) fmt = format_arg;
    if (!format_file.empty()) {
      std::ifstream in(format_file);
      if (!in) return cli.fail("-f " + format_file + ": cannot read the file");
      std::ostringstream ss;
      ss << in.rdbuf();
      fmt = ss.str();
      while (!fmt.empty() && (fmt.back() == '\n' || fmt.back() == '\r')) fmt.pop_back();
    }
    try {
      ncsa.emplace(ringlog::NcsaFormatter::compile(fmt));
    } catch (const ringlog::NcsaFormatError& e) {
      return usage_error("format: " + std::string(e.what()) + " (at byte " + std::to_string(e.pos()) + ")");
    }
  }

  // The counters file: the forwarder's own (a stats file has one writer process).
  std::optional<ringlog::stats::Stats> stats;
  if (!no_stats && (ro.read_file.empty() || !stats_path.empty())) {
    std::string path = stats_path;
    if (path.empty()) {
      std::string ring = ringlog::resolve_ring_path(ro.instance);
      auto slash = ring.rfind('/');
      path = (slash == std::string::npos ? std::string(".") : ring.substr(0, slash)) + "/forward.stats";
    }
    // A stats file has one writer: replacing the file of a running forwarder would hide
    // its counters (it would go on counting in a file nobody can open).
    try {
      ringlog::stats::Snapshot snap = ringlog::stats::StatsReader::open(path).snapshot();
      if (snap.writer_alive && snap.writer_pid != ::getpid()) {
        say("the counters file " + path + " belongs to a running process (pid " + std::to_string(snap.writer_pid) +
            ", another ringlog-forward?); give this one its own with --stats FILE, or use --no-stats");
        return tool::kExitFailure;
      }
    } catch (const std::exception&) {
      // No file, or not a readable stats file: create() replaces it.
    }
    try {
      stats.emplace(ringlog::stats::Stats::create(path));
    } catch (const std::exception& e) {
      say("cannot create the counters file " + path + ": " + e.what() + "; carrying on without counters");
    }
  }

  try {
    tool::install_signal_handlers();
    tool::on_signals({SIGINT, SIGTERM}, on_term_signal);
    fw::Forwarder fwd(fo, endpoints, say, stats ? &*stats : nullptr);
    tool::ReaderLoop loop(ro, kTool);
    bool stalled = false;
    const auto flush_for = std::chrono::milliseconds(static_cast<long long>(flush_timeout * 1000));

    // The drain after SIGTERM/SIGINT: what writers put in the ring before the signal
    // is read (our pin kept it for us), then delivered; --flush-timeout bounds both.
    bool draining = false;
    fw::Clock::time_point drain_deadline{};
    std::optional<ringlog::ReaderProgress> drain_target;  // the ring's tail at the signal
    std::uint64_t left_unread = 0;                    // bytes of it not read at the stop
    bool unread_noted = false;
    auto note_unread = [&] {
      if (unread_noted) return;
      unread_noted = true;
      auto p = pin_progress(loop);
      if (p && drain_target && p->instance_id == drain_target->instance_id && p->pos + 1 < drain_target->tail)
        left_unread = drain_target->tail - (p->pos + 1);
    };
    auto drain_check = [&](bool ring_empty) {
      if (!g_term_signals) return;
      if (tool::stop_requested()) {  // stopping (a second signal, or the drain is over)
        if (draining) note_unread();
        return;
      }
      const auto now = fw::Clock::now();
      if (!draining) {
        draining = true;
        drain_deadline = now + flush_for;
        drain_target = pin_progress(loop);
        say(std::string(g_term_signo == SIGINT ? "SIGINT" : "SIGTERM") + ": reading the " +
            std::to_string(drain_target ? drain_target->unread() : 0) +
            " bytes left in the ring and delivering everything read, for up to --flush-timeout (" +
            std::to_string(flush_for.count()) + " ms); a second signal stops at once");
      }
      if (ring_empty) {
        unread_noted = true;
        tool::request_stop();
        return;
      }
      auto p = pin_progress(loop);
      // The ring was removed or recreated: the old one was read to its end.
      if (!p || !drain_target || p->instance_id != drain_target->instance_id) {
        tool::request_stop();
        return;
      }
      if (p->pos + 1 >= drain_target->tail) {
        unread_noted = true;
        tool::request_stop();
        return;
      }
      if (now >= drain_deadline) {
        note_unread();
        tool::request_stop();
      }
    };
    std::uint64_t since_poll = 0;
    std::string text;

    auto push_line = [&](std::string_view line) {
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
      const std::uint64_t now_ns = ringlog::realtime_ns();
      std::string m;
      m.reserve(line.size() + 96);
      fw::append_rfc5424(m, hdr, msgid, now_ns, line);
      fwd.push(std::move(m));
    };
    // drop-oldest reports: the first at once, then at most one line a second.
    std::uint64_t dropped_unsaid = 0, dropped_in_stall = 0;
    fw::Clock::time_point last_drop_say{};
    auto say_drops = [&](bool now_anyway) {
      if (!dropped_unsaid) return;
      const auto now = fw::Clock::now();
      if (!now_anyway && now - last_drop_say < 1s) return;
      say("drop-oldest: gave up " + std::to_string(dropped_unsaid) + " messages (" + std::to_string(dropped_in_stall) +
          " in this stall; counted in FORWARD.*.lost)");
      dropped_unsaid = 0;
      last_drop_say = now;
    };
    // The end of a stall is said once the ring behind the pin is below half of
    // --stall-fill and the buffer has room (checked while reading and when idle); half,
    // so that drop-oldest hovering at the threshold is one stall, not many.
    auto check_stall_over = [&] {
      say_drops(false);
      if (!stalled || fwd.full()) return;
      double fill = pin_fill(loop) * 100;
      if (fill >= stall_fill / 2) return;
      say_drops(true);
      stalled = false;
      dropped_in_stall = 0;
      say("stall over: the ring is " + std::to_string(static_cast<int>(fill)) + "% full behind the forwarder");
    };
    // Backpressure: while the buffer is full, the pinned reader stays where it is and
    // the ring fills behind it; past --stall-fill the policy decides.
    auto make_room = [&] {
      while (fwd.full()) {
        double fill = pin_fill(loop) * 100;
        if (fill >= stall_fill) {
          if (!stalled) {
            stalled = true;
            say(std::string("stalled: the ring is ") + std::to_string(static_cast<int>(fill)) +
                "% full behind the forwarder and its buffer is full; " +
                (drop_oldest ? "dropping the oldest messages of the destinations that hold them (--on-stall drop-oldest)"
                             : "keeping the pin: writers will drop new messages (--on-stall block-writers)"));
          }
          if (drop_oldest) {
            std::size_t n = fwd.drop_oldest(fo.queue_bytes * 3 / 4);
            dropped_unsaid += n;
            dropped_in_stall += n;
            say_drops(false);
            break;
          }
        }
        fwd.poll(20ms);
        drain_check(false);
        if (tool::stop_requested()) break;
      }
    };
    loop.on_group([&](const ringlog::Group& g) {
      g_attached = 1;
      text.clear();
      const tool::RecordFilter& filter = loop.filter();
      if (output == Output::ncsa) {
        ringlog::NcsaSides sides;
        sides.backend = ro.backend;
        sides.client = ro.client || !ro.backend;
        ncsa->format_group(g, sides, text);
        std::size_t start = 0;
        while (start < text.size()) {
          std::size_t nl = text.find('\n', start);
          if (nl == std::string::npos) nl = text.size();
          push_line(std::string_view(text).substr(start, nl - start));
          start = nl + 1;
        }
      } else if (output == Output::json) {
        ringlog::JsonFilter jf;
        if (!filter.empty()) {
          jf.txn_filter = [&](const ringlog::Transaction& t) { return filter.show_txn(t); };
          jf.record_filter = [&](const ringlog::Transaction&, const ringlog::Record& r) { return filter.show(r); };
        }
        ringlog::append_json(text, g, jf);
        push_line(text);
      } else {
        for (const ringlog::Transaction* t : g.txns) {
          if (!filter.show_txn(*t)) continue;
          for (std::size_t i = 0; i < t->records.size(); ++i) {
            ringlog::Record r = t->record(i);
            if (!filter.show(r)) continue;
            text.clear();
            ringlog::print_raw(text, r);
            push_line(text);
          }
        }
      }
      if (fwd.full()) make_room();
      else if (++since_poll >= 256) {
        since_poll = 0;
        fwd.poll(0ms);
      }
    });
    // on_idle: the ring is read to its end (or the loop stops or reattaches).
    loop.on_idle([&] {
      g_attached = 1;
      since_poll = 0;
      fwd.poll(fwd.busy() ? 5ms : 0ms);
      check_stall_over();
      drain_check(true);
    });
    loop.on_tick([&] {
      g_attached = 1;
      fwd.poll(0ms);
      check_stall_over();
      drain_check(false);
    });

    loop.flush_on_stop(true);  // incomplete transactions are shipped too, marked as such
    int rc = loop.run();

    // Deliver what was taken from the ring, within --flush-timeout (counted from the
    // signal when there was one; a second signal gives up at once).
    if (g_term_signals && !draining) {
      draining = true;
      drain_deadline = fw::Clock::now() + flush_for;
    }
    auto deadline = draining ? drain_deadline : fw::Clock::now() + flush_for;
    while (!fwd.drained() && fw::Clock::now() < deadline && g_term_signals < 2) fwd.poll(20ms);
    say_drops(true);
    if (left_unread) {
      say(std::to_string(left_unread) +
          " bytes of messages written to the ring before the signal were left unread (" +
          (g_term_signals >= 2 ? "second signal" : "--flush-timeout") + ")");
      if (rc == tool::kExitOk) rc = tool::kExitFailure;
    }
    if (!fwd.drained()) {
      for (std::size_t i = 0; i < fwd.size(); ++i)
        if (fwd.pending(i))
          say(fwd.endpoint(i).url + ": " + std::to_string(fwd.pending(i)) +
              " messages not delivered before --flush-timeout" + (g_term_signals >= 2 ? " (second signal)" : "") +
              "; counted as lost");
      fwd.abandon();
      if (rc == tool::kExitOk) rc = tool::kExitFailure;
    }
    fwd.keep_counters();
    return rc;
  } catch (const tool::UsageError& e) {
    return usage_error(e.what());
  } catch (const tool::RuntimeError& e) {
    return cli.fail(e);
  } catch (const std::exception& e) {
    return cli.fail(e.what());
  }
}
