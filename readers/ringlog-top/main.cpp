// ringlog-top: the most frequent (tag, payload) pairs of a ringlog instance, with
// decaying counts, like varnishtop: a live curses list, or -1 to count once (from the
// oldest message to the end) and print. -f counts first fields only, -p sets the
// averaging period; the record filters and queries are the other tools'.
// It only reads the ring.
//
// Exit codes (the shared set of program.hpp, documented in ringlog-top(1)):
//   0 success, 1 runtime failure (no ring, unreadable file, write error),
//   2 bad command line (flag, value or query), 3 ring unusable, 4 no usable terminal.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "ringlog_cli11.hpp"

#include "reader_tool.hpp"
#include "ringlog/record.hpp"
#include "ringlog/ring.hpp"
#include "ringlog/top.hpp"
#include "screen.hpp"

namespace {

namespace tool = ringlog::tool;
constexpr const char* kName = "ringlog-top";

}  // namespace

int main(int argc, char** argv) {
  tool::Cli cli(kName, "ringlog-top - the most frequent records of a ringlog instance (like varnishtop)");
  CLI::App& app = cli.app();
  tool::ReaderOptions ro;
  tool::add_reader_options(app, ro, tool::kAllOptions);
  bool once = false, first_field = false;
  unsigned period = 60;
  app.add_flag("-1", once, "Count from the oldest message to the end, print the list once and exit (implies -d)");
  app.add_flag("-f", first_field, "Count only the first field of each record (up to the first ':' or space)");
  app.add_option("-p", period, "Average over PERIOD seconds: a count settles near rate * PERIOD (default 60)")
      ->type_name("PERIOD");
  cli.footer("Screen keys: q quits, ^L redraws. Without -1 standard output must be a terminal.",
             {{tool::kExitOk, "ok"},
              {tool::kExitFailure, "runtime failure (no ring, unreadable file, write error)"},
              {tool::kExitUsage, "bad command line (flag, value or query)"},
              {tool::kExitUnusable, "ring unusable (permission denied, not a ringlog ring)"},
              {tool::kExitTerminal, "no usable terminal"}});

  if (auto rc = tool::parse_reader_command_line(cli, ro, argc, argv)) return *rc;
  auto usage_error = [&cli](const std::string& msg) { return cli.usage_error(msg); };
  if (period < 1 || period > 86400) return usage_error("-p: expected a period of 1 to 86400 seconds");
  if (once) ro.from_oldest = true;  // varnishtop -1 implies -d
  if (!once && !::isatty(STDOUT_FILENO))
    return cli.fail("the live list needs a terminal on standard output; use -1 to print the counts once",
                    tool::kExitTerminal);

  // -g raw with -q/-k/-R: one record at a time, as varnishtop (see RawSelect).
  tool::RawSelect raw(ro);

  ringlog::TopCounter counter(first_field);
  int rc = tool::kExitOk;
  try {
    tool::ReaderLoop loop(ro, kName);
    const tool::RecordFilter& filter = loop.filter();
    loop.on_group([&](const ringlog::Group& g) {
      if (raw.active()) {
        auto none = [](const ringlog::Transaction&) {};
        raw.select(
            g, loop, none, [&](const ringlog::Record& r) { return filter.show(r); },
            [&](const ringlog::Transaction&, std::size_t, const ringlog::Record& r) { counter.add(r.tag, r.payload); },
            none);
        return;
      }
      for (const ringlog::Transaction* t : g.txns) {
        if (!filter.show_txn(*t)) continue;
        for (std::size_t i = 0; i < t->records.size(); ++i) {
          ringlog::Record r = t->record(i);
          if (filter.show(r)) counter.add(r.tag, r.payload);
        }
      }
    });
    if (!raw.active()) loop.on_raw([&](std::span<const std::byte> msg) {
      ringlog::BatchDecoder d(msg);
      ringlog::Record r;
      while (d.next(r))
        if (filter.show(r)) counter.add(r.tag, r.payload);
    });
    tool::install_signal_handlers();
    if (once) {
      rc = loop.run();
      if (rc == tool::kExitOk) {
        std::string out = counter.dump();
        std::fwrite(out.data(), 1, out.size(), stdout);
        if (std::fflush(stdout) != 0) rc = cli.fail(std::string("write: ") + std::strerror(errno));
      }
      return rc;
    }

    std::string name = !ro.read_file.empty() ? ro.read_file
                                             : ringlog::resolve_ring_path(ro.instance);
    ringlog::top_tool::Screen screen(counter, name, period);
    if (!screen.start()) {
      const char* term = std::getenv("TERM");
      return cli.fail(std::string("cannot use the terminal (TERM=") + (term ? term : "") + ")", tool::kExitTerminal);
    }
    bool user_quit = false;
    auto tick = [&] {
      if (!screen.tick(false)) {
        user_quit = true;
        loop.stop();
        tool::request_stop();
      }
    };
    loop.on_tick(tick);
    loop.on_idle(tick);
    rc = loop.run();
    // At the end of the input (-d, -r, -k) the list stays up, frozen, until q.
    if (rc == tool::kExitOk && !user_quit && !tool::stop_requested()) {
      while (screen.tick(true) && !tool::stop_requested()) screen.wait_key(200);
    }
    screen.stop();
  } catch (const tool::UsageError& e) {
    return usage_error(e.what());
  } catch (const tool::RuntimeError& e) {
    return cli.fail(e);
  }
  return rc;
}
