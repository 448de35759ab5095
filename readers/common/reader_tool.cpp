// Shared reader-tool code: options, filters, finding and following the ring, -r
// files, and the grouping loop (see reader_tool.hpp). Errors become UsageError or
// RuntimeError with a complete message; nothing here exits the process.
#include "reader_tool.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <type_traits>
#include <vector>

#include "ringlog_cli11.hpp"

#include "ringlog/logfile.hpp"
#include "ringlog/ring.hpp"

namespace ringlog::tool {

namespace {

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_hup = 0;

void on_stop_signal(int) { g_stop = 1; }
void on_hup_signal(int) { g_hup = 1; }

Regex compile_regex(const std::string& text, const std::string& what, bool caseless) {
  try {
    return Regex::compile(text, RegexOptions{.caseless = caseless});
  } catch (const RegexError& e) {
    // PCRE2's message and where in the pattern it stopped.
    throw UsageError(what + ": bad regular expression '" + text + "': " + e.what());
  }
}

// "2m" -> 120, "m" -> 60, "30" -> 30 (seconds); nullopt when malformed.
std::optional<double> parse_period(std::string_view s) {
  if (s.empty()) return std::nullopt;
  double mult = 1;
  char unit = s.back();
  if (unit == 's' || unit == 'm' || unit == 'h' || unit == 'd' || unit == 'w' || unit == 'y') {
    mult = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : unit == 'w' ? 604800 : 31536000;
    s.remove_suffix(1);
    if (!s.empty() && s.back() == 'm' && unit == 's') {  // "ms"
      mult = 0.001;
      s.remove_suffix(1);
    }
    if (s.empty()) return mult;
  }
  try {
    std::size_t used = 0;
    std::string t(s);
    double v = std::stod(t, &used);
    if (used != t.size() || !(v > 0) || !std::isfinite(v)) return std::nullopt;
    return v * mult;
  } catch (...) {
    return std::nullopt;
  }
}

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string ring_path_for(const std::string& instance) {
  std::string p = resolve_ring_path(instance);
  if (is_directory(p)) p += "/" + std::string(kRingFileName);
  return p;
}

bool side_ok(VxidKind k, std::uint64_t vxid, bool client, bool backend) {
  if (!client && !backend) return true;
  if (vxid == 0) return true;
  if (client && (k == VxidKind::client || k == VxidKind::session)) return true;
  if (backend && k == VxidKind::backend) return true;
  return false;
}

}  // namespace

// ---------------------------------------------------------------- small parsers

void copy_txn_fields(Transaction& to, const Transaction& from) {
  to.vxid = from.vxid;
  to.kind = from.kind;
  to.type = from.type;
  to.parent = from.parent;
  to.reason = from.reason;
  to.level = from.level;
  to.begun = from.begun;
  to.ended = from.ended;
}

RawSelect::RawSelect(ReaderOptions& o) {
  if (o.mode != Grouping::raw || (o.query_set.empty() && !o.limit && !o.rate_limiter.enabled())) return;
  active_ = true;
  queries_ = std::move(o.query_set);
  o.query_set = QuerySet();
  limit_ = o.limit;
  o.limit = 0;
  rate_ = o.rate_limiter;
  o.rate_limiter = RateLimiter();
  // The record filter, already built by prepare(), keeps -c/-b for each record it shows.
  client_ = o.client;
  backend_ = o.backend;
  o.client = o.backend = false;
}

bool RawSelect::side_ok(const Record& r) const noexcept {
  if ((!client_ && !backend_) || r.vxid == 0) return true;
  if (client_) return r.kind == VxidKind::client || r.kind == VxidKind::session;
  return r.kind == VxidKind::backend;
}

bool RawSelect::query_one(const Transaction& t, std::size_t i) {
  copy_txn_fields(one_, t);
  one_.clear_records();
  one_.add(t.record(i));
  const Group g{Grouping::raw, {&one_}};
  return queries_.matches(g);
}

std::string missing_ring_message(const std::string& instance, const std::string& path) {
  std::string who = instance.empty() ? "the default instance" : "'" + instance + "'";
  return "no ring at " + path + " (looked for " + who +
         "; instances live under $RINGLOG_DIR, default /dev/shm/ringlog).\n"
         "Name another with -n NAME or -n PATH, or wait for it with -t SECONDS (-t off: forever).";
}

// ---------------------------------------------------------------- record filters

RecordFilter RecordFilter::build(const std::vector<std::pair<char, std::string>>& filters, bool client,
                                 bool backend, bool caseless) {
  RecordFilter f;
  f.client_ = client;
  f.backend_ = backend;
  f.active_ = client || backend || !filters.empty();
  bool seen = false;
  for (const auto& [opt, arg] : filters) {
    std::string name = std::string("-") + opt;
    if ((opt == 'i' || opt == 'I') && !seen) f.suppress_ = TagSet::all();  // first -i/-I: hide the rest
    seen = true;
    if (opt == 'i' || opt == 'x') {
      TagSet s;
      try {
        s = TagSet::parse(arg);
      } catch (const std::invalid_argument& e) {
        throw UsageError(name + ": " + e.what());
      }
      for (unsigned t = 1; t < 255; ++t) {
        Tag tag = static_cast<Tag>(t);
        if (!s.contains(tag)) continue;
        if (opt == 'i') {
          f.select_.add(tag);
          // -i clears the suppression (Varnish's bitmap): rebuild without it.
          TagSet nsup;
          for (unsigned u = 1; u < 255; ++u)
            if (u != t && f.suppress_.contains(static_cast<Tag>(u))) nsup.add(static_cast<Tag>(u));
          f.suppress_ = nsup;
        } else {
          f.suppress_.add(tag);
          TagSet nsel;
          for (unsigned u = 1; u < 255; ++u)
            if (u != t && f.select_.contains(static_cast<Tag>(u))) nsel.add(static_cast<Tag>(u));
          f.select_ = nsel;
        }
      }
      continue;
    }
    // -I / -X: [taglist:]regex
    RegexFilter rf;
    std::string re = arg;
    if (auto colon = arg.find(':'); colon != std::string::npos) {
      try {
        rf.tags = TagSet::parse(std::string_view(arg).substr(0, colon));
      } catch (const std::invalid_argument& e) {
        throw UsageError(name + ": " + e.what());
      }
      rf.any_tag = false;
      re = arg.substr(colon + 1);
    }
    rf.re = compile_regex(re, name, caseless);
    (opt == 'I' ? f.select_re_ : f.suppress_re_).push_back(std::move(rf));
  }
  return f;
}

bool RecordFilter::show(const Record& r) const {
  if (!active_) return true;
  if (!side_ok(r.kind, r.vxid, client_, backend_)) return false;
  auto match = [&](const std::vector<RegexFilter>& v) {
    for (const RegexFilter& f : v) {
      if (!f.any_tag && !f.tags.contains(r.tag)) continue;
      // As varnishlog: only a definite match selects (a search stopped by a PCRE2 limit does not).
      if (f.re.matches(r.payload)) return true;
    }
    return false;
  };
  if (!select_re_.empty() && match(select_re_)) return true;
  if (select_.contains(r.tag)) return true;
  if (!suppress_re_.empty() && match(suppress_re_)) return false;
  if (suppress_.contains(r.tag)) return false;
  return true;
}

bool RecordFilter::show_txn(const Transaction& t) const noexcept {
  if (!client_ && !backend_) return true;
  if (t.vxid == 0) return true;
  if (client_ && (t.type == TxnType::req || (t.type == TxnType::unknown && t.kind == VxidKind::client))) return true;
  if (backend_ && (t.type == TxnType::bereq || (t.type == TxnType::unknown && t.kind == VxidKind::backend)))
    return true;
  return false;
}

// ---------------------------------------------------------------- rate limit

RateLimiter RateLimiter::parse(std::string_view spec) {
  RateLimiter r;
  std::string_view num = spec, per;
  if (auto slash = spec.find('/'); slash != std::string_view::npos) {
    num = spec.substr(0, slash);
    per = spec.substr(slash + 1);
  }
  double limit = 0;
  try {
    std::string t(num);
    std::size_t used = 0;
    limit = std::stod(t, &used);
    if (used != t.size()) limit = 0;
  } catch (...) {
    limit = 0;
  }
  if (!(limit >= 1) || limit > 1e9 || std::floor(limit) != limit)
    throw UsageError("-R: expected LIMIT[/PERIOD] with LIMIT a whole number >= 1, got '" + std::string(spec) + "'");
  double period = 1;
  if (!per.empty()) {
    auto p = parse_period(per);
    if (!p) throw UsageError("-R: bad period '" + std::string(per) + "' (e.g. 10/2m, 5/m, 100/s)");
    period = *p;
  }
  r.per_second_ = limit / period;
  r.burst_ = limit;
  r.tokens_ = limit;
  return r;
}

bool RateLimiter::allow(std::chrono::steady_clock::time_point now) noexcept {
  if (!enabled()) return true;
  if (last_ != std::chrono::steady_clock::time_point{}) {
    double dt = std::chrono::duration<double>(now - last_).count();
    if (dt > 0) tokens_ = std::min(burst_, tokens_ + dt * per_second_);
  }
  last_ = now;
  if (tokens_ >= 1) {
    tokens_ -= 1;
    return true;
  }
  return false;
}

// ---------------------------------------------------------------- options

namespace {

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

// One entry of reader_options.def, by the type of the field it fills.
template <class T>
void add_reader_option(CLI::App& app, const char* name, T& field, const char* type, const char* help) {
  if constexpr (std::is_same_v<T, bool>) {
    app.add_flag(name, field, help);
  } else {
    CLI::Option* opt = app.add_option(name, field, help)->type_name(type);
    if constexpr (is_vector<T>::value)  // repeatable, as in varnishlog; one value each
      opt->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    if constexpr (std::is_unsigned_v<T>) opt->check(CLI::NonNegativeNumber);
  }
}

}  // namespace

void add_reader_options(CLI::App& app, ReaderOptions& o, unsigned groups) {
#define READER_OPTION(GROUP, NAME, FIELD, TYPE, HELP, MAN) \
  if (groups & (GROUP)) add_reader_option(app, NAME, o.FIELD, TYPE, HELP);
#include "reader_options.def"
#undef READER_OPTION
}

void prepare(CLI::App& app, ReaderOptions& o) {
  // -i/-x/-I/-X in command-line order (Varnish applies them in order).
  o.record_filters.clear();
  std::map<const CLI::Option*, std::size_t> used;
  for (const CLI::Option* opt : app.parse_order()) {
    std::string n = opt->get_name();
    if (n != "-i" && n != "-x" && n != "-I" && n != "-X") continue;
    const auto& res = opt->results();
    std::size_t& k = used[opt];
    if (k < res.size()) o.record_filters.emplace_back(n[1], res[k++]);
  }
  auto wait = parse_wait(o.wait);
  if (!wait) throw UsageError("-t: expected a number of seconds or 'off', got '" + o.wait + "'");
  o.wait_seconds = *wait;
  auto g = grouping_by_name(o.grouping);
  if (!g) throw UsageError("-g: expected raw, vxid, request or session, got '" + o.grouping + "'");
  o.mode = *g;
  if (!(o.txn_timeout > 0) || o.txn_timeout > 1e7) throw UsageError("-T: expected a number of seconds > 0");
  if (o.max_pending < 1 || o.max_pending > 100'000'000) throw UsageError("-L: expected a limit of at least 1");
  if (o.client && o.backend) throw UsageError("-c and -b exclude each other");
  if (!o.read_file.empty() && (!o.instance.empty() || o.pinned))
    throw UsageError("-r reads a file: -n and --pinned do not apply");
  o.query_set = QuerySet(QueryOptions{.caseless = o.caseless});
  for (std::size_t i = 0; i < o.queries.size(); ++i) {
    try {
      o.query_set.add(o.queries[i]);
    } catch (const QueryParseError& e) {
      throw UsageError("-q: " + e.describe(o.queries[i]));
    }
  }
  for (const std::string& f : o.query_files) {
    if (is_directory(f)) throw RuntimeError("-Q: cannot read " + f + ": it is a directory");
    std::ifstream in(f, std::ios::binary);
    if (!in) throw RuntimeError("-Q: cannot read " + f + ": " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      o.query_set.add_file_text(ss.str());
    } catch (const QueryParseError& e) {
      throw UsageError("-Q " + f + ": query error at position " + std::to_string(e.pos()) + " of " + e.message());
    }
  }
  o.filter = RecordFilter::build(o.record_filters, o.client, o.backend, o.caseless);
  o.rate_limiter = o.rate.empty() ? RateLimiter() : RateLimiter::parse(o.rate);
}

std::optional<int> parse_reader_command_line(Cli& cli, ReaderOptions& o, int argc, char** argv,
                                             const std::function<void()>& adjust) {
  if (auto rc = cli.parse(argc, argv)) return rc;
  if (adjust) adjust();
  try {
    prepare(cli.app(), o);
  } catch (const UsageError& e) {
    return cli.usage_error(e.what());
  } catch (const RuntimeError& e) {  // an unreadable -Q file
    return cli.fail(e);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- signals

void on_signals(std::initializer_list<int> signals, void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (int s : signals) ::sigaction(s, &sa, nullptr);
}

void install_signal_handlers() {
  on_signals({SIGINT, SIGTERM}, on_stop_signal);
  on_signals({SIGHUP}, on_hup_signal);
}
bool stop_requested() noexcept { return g_stop != 0; }
void request_stop() noexcept { g_stop = 1; }
bool take_hup() noexcept {
  if (!g_hup) return false;
  g_hup = 0;
  return true;
}

// ---------------------------------------------------------------- the loop

ReaderLoop::ReaderLoop(const ReaderOptions& o, std::string tool_name)
    : opts_(o), tool_(std::move(tool_name)), queries_(o.query_set), filter_(o.filter), rate_(o.rate_limiter) {}

ReaderLoop::~ReaderLoop() = default;

bool ReaderLoop::select_group(const Group& g) {
  if (opts_.client || opts_.backend) {
    bool any = false;
    for (const Transaction* t : g.txns)
      if (filter_.show_txn(*t)) {
        any = true;
        break;
      }
    if (!any) return false;
  }
  return queries_.matches(g);
}

void ReaderLoop::deliver(const Group& g) {
  if (stop_) return;
  ++stats_.groups;
  if (!select_group(g)) return;
  if (rate_.enabled() && !rate_.allow(std::chrono::steady_clock::now())) {
    ++stats_.rate_limited;
    return;
  }
  ++stats_.selected;
  if (on_group_) on_group_(g);
  if (opts_.limit && stats_.selected >= opts_.limit) stop_ = true;
}

int ReaderLoop::run() {
  try {
    return opts_.read_file.empty() ? run_ring() : run_file();
  } catch (const RuntimeError& e) {
    say_error(tool_, e.what());
    return e.exit_code();
  } catch (const std::system_error& e) {
    say_error(tool_, e.what());
    return kExitFailure;
  }
}

int ReaderLoop::run_file() {
  LogFileReader in = LogFileReader::open(opts_.read_file);
  GroupOptions go{opts_.mode, std::chrono::milliseconds(std::int64_t(opts_.txn_timeout * 1000)), opts_.max_pending};
  Grouper grouper(go, [this](const Group& g) { deliver(g); });
  const bool fast_raw = on_raw_ && opts_.mode == Grouping::raw && queries_.empty();
  std::vector<std::byte> buf;
  format::MsgKind kind{};
  int rc = kExitOk;
  auto now = Grouper::Clock::now();
  for (std::uint64_t n = 0;; ++n) {
    if (stop_ || stop_requested()) return kExitOk;
    LogFileStatus st = in.next(buf, kind);
    if (st == LogFileStatus::end) break;
    if (st != LogFileStatus::message) {
      say_error(tool_, opts_.read_file + ": " + to_string(st) + " at offset " + std::to_string(in.offset()));
      rc = kExitFailure;
      break;
    }
    if ((n & 1023) == 0) now = Grouper::Clock::now();
    if (kind == format::MsgKind::notice) {
      grouper.notice(std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()), now);
      continue;
    }
    if (kind != format::MsgKind::data) continue;
    ++stats_.messages;
    if (fast_raw) {
      deliver_raw(buf);
    } else {
      grouper.feed(buf, now);
    }
  }
  if (!stop_) grouper.flush();
  if (on_idle_) on_idle_();
  return rc;
}

void ReaderLoop::deliver_raw(std::span<const std::byte> msg) {
  if (stop_) return;
  if (opts_.client || opts_.backend) {
    BatchDecoder d(msg);
    if (d.valid() && !side_ok(d.header().kind, d.header().vxid, opts_.client, opts_.backend)) return;
  }
  ++stats_.groups;
  if (rate_.enabled() && !rate_.allow(std::chrono::steady_clock::now())) {
    ++stats_.rate_limited;
    return;
  }
  ++stats_.selected;
  on_raw_(msg);
  if (opts_.limit && stats_.selected >= opts_.limit) stop_ = true;
}

int ReaderLoop::run_ring() {
  using namespace std::chrono;
  ring_path_ = ring_path_for(opts_.instance);
  const ReaderKind kind = opts_.pinned ? ReaderKind::pinned : ReaderKind::passive;

  // Attach, waiting up to -t for the ring to appear.
  auto open_ring = [&](StartAt start) -> std::optional<Reader> {
    try {
      return Reader::open(ring_path_, {.kind = kind, .start = start});
    } catch (const Error& e) {
      if (e.code() == Errc::not_found) return std::nullopt;
      if (e.code() == Errc::permission)
        throw RuntimeError("cannot open " + ring_path_ + ": permission denied" +
                               (opts_.pinned ? " (--pinned needs write access to the ring)" : ""),
                           kExitUnusable);
      if (e.code() == Errc::bad_format)
        throw RuntimeError(ring_path_ + ": not a usable ringlog ring: " + e.what(), kExitUnusable);
      throw RuntimeError(std::string(e.what()));
    }
  };
  const StartAt first_start = opts_.from_oldest ? StartAt::oldest : StartAt::tail;
  struct Unset {  // reader() is null again once run_ring returns, whichever way
    const Reader*& r;
    ~Unset() { r = nullptr; }
  } unset{reader_};
  std::optional<Reader> rd = open_ring(first_start);
  if (!rd) {
    auto deadline = steady_clock::now() + duration_cast<steady_clock::duration>(duration<double>(
                                              opts_.wait_seconds < 0 ? 0 : opts_.wait_seconds));
    while (!rd) {
      if (opts_.wait_seconds >= 0 && steady_clock::now() >= deadline)
        throw RuntimeError(missing_ring_message(opts_.instance, ring_path_));
      if (stop_requested()) return kExitOk;
      std::this_thread::sleep_for(milliseconds(100));
      rd = open_ring(first_start);
    }
  }
  std::uint64_t instance_id = rd->header().instance_id;
  reader_ = &*rd;

  GroupOptions go{opts_.mode, milliseconds(std::int64_t(opts_.txn_timeout * 1000)), opts_.max_pending};
  Grouper grouper(go, [this](const Group& g) { deliver(g); });
  const bool fast_raw = on_raw_ && opts_.mode == Grouping::raw && queries_.empty();
  std::vector<std::byte> buf;
  buf.reserve(64 * 1024);
  auto now = Grouper::Clock::now();
  auto last_tick = now, last_stale_check = now;
  std::uint64_t n = 0;
  for (;;) {
    if (stop_ || stop_requested()) {
      if (!stop_ && flush_on_stop_) {
        grouper.flush();
        if (on_idle_) on_idle_();
      }
      return kExitOk;
    }
    ReadResult r = rd->next(buf);
    if (r.status == ReadStatus::message) {
      if ((++n & 255) == 0) {
        now = Grouper::Clock::now();
        if (now - last_tick >= milliseconds(100)) {
          last_tick = now;
          grouper.tick(now);
          if (on_tick_) on_tick_();
        }
      }
      if (r.kind == format::MsgKind::data) {
        ++stats_.messages;
        if (fast_raw) deliver_raw(buf);
        else grouper.feed(buf, now);
      } else if (r.kind == format::MsgKind::notice) {
        grouper.notice(std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()), now);
      }
      continue;
    }
    now = Grouper::Clock::now();
    if (r.status == ReadStatus::lost) {
      stats_.lost_bytes += r.lost;
      if (on_idle_) on_idle_();  // keep stdout and stderr in order
      if (messages_in_syslog()) say_notice(tool_, "Log overrun: " + std::to_string(r.lost) + " bytes lost");
      else std::fprintf(stderr, "Log overrun: %" PRIu64 " bytes lost\n", r.lost);  // varnishlog's words
      grouper.lost(r.lost, now);
      continue;
    }
    // Empty: the end for -d, else wait for more.
    if (opts_.from_oldest) {
      grouper.flush();
      if (on_idle_) on_idle_();
      return kExitOk;
    }
    if (on_idle_) on_idle_();
    if (now - last_tick >= milliseconds(100)) {
      last_tick = now;
      grouper.tick(now);
      if (on_tick_) on_tick_();
    }
    if (now - last_stale_check >= milliseconds(250)) {
      last_stale_check = now;
      if (rd->stale()) {
        // The writer recreated (or removed) the ring: finish what we hold and follow it.
        grouper.flush();
        if (on_idle_) on_idle_();
        say_notice(tool_, "the ring at " + ring_path_ + " was recreated or removed; reattaching");
        reader_ = nullptr;
        std::optional<Reader> nr;
        bool said_waiting = false;
        for (;;) {
          if (stop_ || stop_requested()) return kExitOk;
          nr = open_ring(StartAt::oldest);
          if (nr && nr->header().instance_id != instance_id) break;
          if (nr && !nr->stale()) break;  // same id but a fresh mapping of the file
          if (!said_waiting) {
            say_notice(tool_, "waiting for " + ring_path_ + " to reappear");
            said_waiting = true;
          }
          std::this_thread::sleep_for(milliseconds(100));
          if (on_tick_) on_tick_();
        }
        rd = std::move(nr);
        reader_ = &*rd;
        instance_id = rd->header().instance_id;
        ++stats_.reattaches;
        char id[24];
        std::snprintf(id, sizeof id, "%" PRIx64, instance_id);
        say_notice(tool_, "reattached to " + ring_path_ + " (instance id " + id + ")");
        continue;
      }
    }
    rd->wait(milliseconds(50));
  }
}

}  // namespace ringlog::tool
