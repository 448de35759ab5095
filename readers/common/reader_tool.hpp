// Shared code of the record reader tools (ringlog, ringlog-ncsa, ringlog-top,
// ringlog-forward): the options every tool spells the same way (-n -t -d -r --pinned,
// -g -T -L, -q -Q -c -b -k -R -C, -i -x -I -X), finding and following the ring
// (waiting for it, reattaching when a writer recreates it, overruns), reading
// ringlog binary files, and the loop that groups records and hands each selected
// group to the tool. It never prints records itself: tools own their output.
// Thread safety: one ReaderLoop per thread; the signal flags are process-wide.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "program.hpp"
#include "values.hpp"
#include "ringlog/format.hpp"
#include "ringlog/group.hpp"
#include "ringlog/query.hpp"
#include "ringlog/record.hpp"
#include "ringlog/regex.hpp"
#include "ringlog/ring.hpp"

namespace CLI {
class App;
}

namespace ringlog::tool {

// varnishlog's record filters (VSL_Match): -i/-x select/suppress tags, -I/-X
// [taglist:]regex select/suppress records; once -i or -I is given, tags not selected
// are hidden. -c/-b hide records of the other side. The regexes are PCRE2's
// (ringlog::Regex), caseless with -C.
class RecordFilter {
 public:
  RecordFilter() = default;
  // Throws UsageError for a bad taglist or regex.
  static RecordFilter build(const std::vector<std::pair<char, std::string>>& filters, bool client, bool backend,
                            bool caseless = false);
  bool empty() const noexcept { return !active_; }
  // Should this record be shown?
  bool show(const Record& r) const;
  // Should this transaction of a grouped display be shown at all (-c: requests,
  // -b: backend fetches; varnishlog hides the others, sessions included)?
  bool show_txn(const Transaction& t) const noexcept;

 private:
  struct RegexFilter {
    TagSet tags;  // empty: every tag
    bool any_tag = true;
    Regex re;
  };
  bool active_ = false;
  bool client_ = false, backend_ = false;
  TagSet select_, suppress_;
  std::vector<RegexFilter> select_re_, suppress_re_;
};

// -R LIMIT[/PERIOD]: at most LIMIT groups per PERIOD (default 1s; "2m", "m", "30s",
// "1h"...), a token bucket.
class RateLimiter {
 public:
  RateLimiter() = default;
  static RateLimiter parse(std::string_view spec);  // throws UsageError
  bool enabled() const noexcept { return per_second_ > 0; }
  bool allow(std::chrono::steady_clock::time_point now) noexcept;

 private:
  double per_second_ = 0, burst_ = 0, tokens_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

// Everything the shared options (reader_options.def) fill in. Raw strings are checked
// by prepare().
struct ReaderOptions {
  // Where to read.
  std::string instance;          // -n: instance name, instance directory or ring path; "" = default
  std::string wait = "0";        // -t SECONDS|off
  bool from_oldest = false;      // -d: start at the oldest message and exit at the end
  bool pinned = false;           // --pinned: lossless (writers drop instead of overwriting us)
  std::string read_file;         // -r FILE|-: read a ringlog binary file instead of a ring
  // Grouping.
  std::string grouping = "vxid";  // -g raw|vxid|request|session
  double txn_timeout = 120;       // -T seconds
  std::size_t max_pending = 1000; // -L transactions
  // Selection.
  std::vector<std::string> queries;      // -q (OR-ed)
  std::vector<std::string> query_files;  // -Q
  bool client = false;                   // -c
  bool backend = false;                  // -b
  std::uint64_t limit = 0;               // -k: stop after this many selected groups (0: no limit)
  std::string rate;                      // -R LIMIT[/PERIOD]
  bool caseless = false;                 // -C: regexes (-q, -I, -X) and eq/ne ignore case
  // -i -x -I -X as given, each on its own...
  std::vector<std::string> tags_in, tags_out, regex_in, regex_out;
  // ...and all of them in command-line order, as they apply: ('i'|'x'|'I'|'X', argument).
  std::vector<std::pair<char, std::string>> record_filters;

  // Filled by prepare(): the checked and compiled forms.
  double wait_seconds = 0;  // -1: forever
  Grouping mode = Grouping::vxid;
  QuerySet query_set;
  RecordFilter filter;
  RateLimiter rate_limiter;
};

// Which option groups a tool registers.
enum OptionGroups : unsigned {
  kSourceOptions = 1,    // -n -t -d -r --pinned
  kGroupingOptions = 2,  // -g -T -L
  kSelectOptions = 4,    // -q -Q -c -b -k -R (and -C)
  kRecordFilterOptions = 8,  // -i -x -I -X (and -C)
  kAllOptions = 15,
};

// Registers the shared options of these groups on app, as reader_options.def declares
// them (their --help lines too). Call prepare() after
// app.parse(): it collects -i/-x/-I/-X in command-line order, checks every value,
// compiles queries, filters and -R, and throws UsageError (or RuntimeError for an
// unreadable -Q file).
void add_reader_options(CLI::App& app, ReaderOptions& o, unsigned groups = kAllOptions);
void prepare(CLI::App& app, ReaderOptions& o);

// A reader tool's start-up: cli.parse(), then adjust (may be empty: what the tool
// changes in o before the checks), then prepare(). Returns the code to exit with when
// the program is done already (--help or --version printed, a usage error or an
// unreadable -Q file said), else nullopt.
std::optional<int> parse_reader_command_line(Cli& cli, ReaderOptions& o, int argc, char** argv,
                                             const std::function<void()>& adjust = {});

// Stop/reopen requests from signals (SIGINT/SIGTERM stop, SIGHUP reopen): set by
// install_signal_handlers(), read by the loop and the tools.
void install_signal_handlers();
// Installs handler for these signals (sigaction, no flags, nothing blocked).
void on_signals(std::initializer_list<int> signals, void (*handler)(int));
bool stop_requested() noexcept;
void request_stop() noexcept;
bool take_hup() noexcept;  // true once per SIGHUP received

struct LoopStats {
  std::uint64_t messages = 0;        // data messages read
  std::uint64_t groups = 0;          // groups formed
  std::uint64_t selected = 0;        // groups handed to the tool
  std::uint64_t rate_limited = 0;    // selected but suppressed by -R
  std::uint64_t lost_bytes = 0;      // overruns
  std::uint64_t reattaches = 0;
};

// The reading loop. Source: the -r file, else the ring (waiting -t for it). Tails from
// now, or with -d from the oldest message and stops at the end. Overruns print
// "Log overrun: N bytes lost" on stderr; a recreated ring is reattached with a notice.
class ReaderLoop {
 public:
  using GroupFn = std::function<void(const Group&)>;
  // A raw message (record batch) before grouping.
  using RawFn = std::function<void(std::span<const std::byte>)>;

  // Throws UsageError (bad query file) — options must have gone through prepare().
  ReaderLoop(const ReaderOptions& o, std::string tool_name);
  ~ReaderLoop();

  // Called with each selected group (after -q, -c/-b transaction selection in vxid and
  // raw modes, -R; -k counts these).
  void on_group(GroupFn fn) { on_group_ = std::move(fn); }
  // Optional fast path for -g raw without -q: batches are handed over without grouping
  // (the tool decodes them with BatchDecoder and applies filter().show() to each
  // record). -c/-b skip batches of the other side; -k and -R count batches.
  void on_raw(RawFn fn) { on_raw_ = std::move(fn); }
  // Called when the input is drained for now (before waiting): tools flush output.
  void on_idle(std::function<void()> fn) { on_idle_ = std::move(fn); }
  // Called about every 100 ms while running (screen refresh, SIGHUP handling...).
  void on_tick(std::function<void()> fn) { on_tick_ = std::move(fn); }

  // Runs to the end (-d, -r, -k reached, stop requested). Returns an exit code;
  // RuntimeError is reported as a message on stderr and its exit code.
  int run();
  // Makes run() return after the current group (from a callback or another thread).
  void stop() noexcept { stop_ = true; }
  // On SIGTERM/SIGINT, hand over the transactions still incomplete in the grouping
  // (closed with a synthetic record saying so) before run() returns, instead of
  // dropping them as varnishlog does. For tools that must not lose what they read.
  void flush_on_stop(bool on) noexcept { flush_on_stop_ = on; }

  const LoopStats& stats() const noexcept { return stats_; }
  const QuerySet& queries() const noexcept { return queries_; }
  const RecordFilter& filter() const noexcept { return filter_; }
  // The ring path being read ("" with -r).
  const std::string& ring_path() const noexcept { return ring_path_; }
  // The reader of the ring while run() reads one (from the callbacks: its position,
  // pinned slot, the tail); nullptr before the ring is open, while it is reopened after
  // a recreation, with -r, and once run() has returned.
  const Reader* reader() const noexcept { return reader_; }

 private:
  struct Impl;
  void deliver(const Group& g);
  void deliver_raw(std::span<const std::byte> msg);
  bool select_group(const Group& g);
  int run_ring();
  int run_file();

  ReaderOptions opts_;
  std::string tool_;
  std::string ring_path_;
  QuerySet queries_;
  RecordFilter filter_;
  RateLimiter rate_;
  LoopStats stats_;
  GroupFn on_group_;
  RawFn on_raw_;
  std::function<void()> on_idle_, on_tick_;
  bool stop_ = false;
  bool flush_on_stop_ = false;
  const Reader* reader_ = nullptr;
};

// -g raw with -q, -k or -R. varnishlog and varnishtop treat every record as a
// transaction of its own there: -q tests each record, -k and -R count records. The
// loop hands over a ring batch (the records one transaction wrote at once) as one raw
// group, so with any of these three RawSelect takes them (and -c/-b, which the loop
// would judge per batch) out of the loop's options and selects record by record.
// Copies a transaction's identity and Begin/End state, not its records.
void copy_txn_fields(Transaction& to, const Transaction& from);

class RawSelect {
 public:
  // Call after prepare() and before the ReaderLoop is made from o.
  explicit RawSelect(ReaderOptions& o);
  bool active() const noexcept { return active_; }
  bool done() const noexcept { return done_; }
  // -c/-b for one record: the side of its vxid (records of no transaction pass).
  bool side_ok(const Record& r) const noexcept;

  // For each transaction t of g: begin(t), then emit(t, i, r) for each record i that
  // -q selects (the record alone), accept(r) takes and -R lets through, then end(t).
  // Once -k records were emitted it stops the loop and hands over nothing more.
  template <class Begin, class Accept, class Emit, class End>
  void select(const Group& g, ReaderLoop& loop, Begin&& begin, Accept&& accept, Emit&& emit, End&& end) {
    for (const Transaction* t : g.txns) {
      if (done_) return;
      begin(*t);
      for (std::size_t i = 0; i < t->records.size() && !done_; ++i) {
        if (!queries_.empty() && !query_one(*t, i)) continue;
        const Record r = t->record(i);
        if (!accept(r)) continue;
        if (rate_.enabled() && !rate_.allow(std::chrono::steady_clock::now())) continue;
        emit(*t, i, r);
        if (limit_ && ++taken_ >= limit_) {
          done_ = true;
          loop.stop();
        }
      }
      end(*t);
    }
  }

 private:
  bool query_one(const Transaction& t, std::size_t i);

  bool active_ = false, done_ = false;
  bool client_ = false, backend_ = false;
  QuerySet queries_;
  std::uint64_t limit_ = 0, taken_ = 0;
  RateLimiter rate_;
  Transaction one_;  // the record a query looks at, as a transaction of its own
};

// Where a tool looked for the ring, for error messages: "no ring at PATH (instance
// 'NAME'); name another with -n NAME or a ring path, or wait for it with -t SECONDS".
std::string missing_ring_message(const std::string& instance, const std::string& path);

}  // namespace ringlog::tool
