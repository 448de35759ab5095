// The curses screen of ringlog-stat, after varnishstat's: an uptime and hit-rate header,
// then one line per counter with CURRENT, CHANGE (per second over the last interval),
// AVERAGE (value / uptime) and AVG_10/100/1000 (moving averages of CHANGE over that
// many samples). It must survive resizes, writer restarts and a vanished instance.
#include <curses.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "program.hpp"
#include "ringlog/stats.hpp"
#include "ringlog/stats_output.hpp"
#include "screen.hpp"

namespace ringlog::stat_tool {

namespace {

namespace rs = ringlog::stats;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// varnishstat's moving average: a plain mean until nmax samples, then exponential.
struct MovingAvg {
  unsigned nmax;
  unsigned n = 0;
  double acc = 0;
  void update(double v) {
    if (n < nmax) ++n;
    acc += (v - acc) / n;
  }
};

struct History {
  std::uint64_t last_raw = 0;
  bool have_last = false;
  bool seen = false;  // has been non-zero
  double change = 0;  // per second, last interval
  MovingAvg ma10{10}, ma100{100}, ma1000{1000};
};

constexpr double kIntervals[] = {0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60};
constexpr int kColW = 13;  // one space + 12 digits
const char* const kCols[] = {"CURRENT", "CHANGE", "AVERAGE", "AVG_10", "AVG_100", "AVG_1000"};

class Screen {
 public:
  explicit Screen(const ScreenOptions& o) : opts_(o), filter_(o.globs), interval_(o.interval) {}

  int run() {
    SCREEN* scr = newterm(nullptr, stdout, stdin);
    if (!scr) {
      std::fprintf(stderr, "ringlog-stat: cannot use the terminal (TERM=%s); use -1, -j or --prometheus\n",
                   std::getenv("TERM") ? std::getenv("TERM") : "");
      return ringlog::tool::kExitTerminal;
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    sample();
    auto next = std::chrono::steady_clock::now() + to_dur(interval_);
    draw();
    while (!g_stop) {
      auto now = std::chrono::steady_clock::now();
      if (now >= next) {
        sample();
        next = now + to_dur(interval_);
        draw();
        continue;
      }
      int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count());
      timeout(std::clamp(ms, 1, 1000));
      int ch = getch();
      if (ch == ERR) continue;
      if (!key(ch)) break;
      draw();
    }
    endwin();
    delscreen(scr);
    return ringlog::tool::kExitOk;
  }

 private:
  static std::chrono::steady_clock::duration to_dur(double s) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
  }

  // ---- data ----------------------------------------------------------------------------
  void sample() {
    try {
      if (reader_ && reader_->stale()) {
        reader_.reset();
        set_status("instance changed, reattaching");
      }
      if (!reader_) reader_.emplace(rs::InstanceReader::open(opts_.instance));
      rs::Snapshot s = reader_->snapshot();
      if (have_snap_ && (s.instance_id != snap_.instance_id || s.created_ns != snap_.created_ns)) {
        hist_.clear();  // a restarted writer: values start again from zero
        for (auto& m : hit_) m.n = 0, m.acc = 0;
        set_status("reattached to a restarted writer (pid " + std::to_string(s.writer_pid) + ")");
      }
      update(s);
      snap_ = std::move(s);
      have_snap_ = true;
      gone_ = false;
    } catch (const Error& e) {
      reader_.reset();
      gone_ = true;
      set_status(std::string("waiting for the instance: ") + e.what());
    }
    rebuild();
  }

  // A message in the status bar, kept for a few seconds.
  void set_status(std::string m) {
    status_ = std::move(m);
    status_until_ = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  }

  void update(const rs::Snapshot& s) {
    double dt = have_snap_ ? static_cast<double>(s.timestamp_ns - std::min(s.timestamp_ns, snap_.timestamp_ns)) / 1e9 : 0;
    std::uint64_t dh = 0, dm = 0;
    bool hitrate = false;
    for (const auto& c : s.counters) {
      History& h = hist_[c.name];
      if (c.raw != 0) h.seen = true;
      if (h.have_last && dt > 0) {
        double delta = c.type == rs::Type::gauge ? static_cast<double>(static_cast<std::int64_t>(c.raw - h.last_raw))
                                                 : static_cast<double>(c.raw - h.last_raw);
        if (c.format == rs::Format::duration) delta /= 1e9;
        h.change = delta / dt;
        h.ma10.update(h.change);
        h.ma100.update(h.change);
        h.ma1000.update(h.change);
        if (c.name == "MAIN.cache_hit") dh = c.raw - h.last_raw, hitrate = true;
        if (c.name == "MAIN.cache_miss") dm = c.raw - h.last_raw;
      }
      h.last_raw = c.raw;
      h.have_last = true;
    }
    if (hitrate && dh + dm > 0) {
      double r = static_cast<double>(dh) / static_cast<double>(dh + dm);
      hit_[0].update(r);
      hit_[1].update(r);
      hit_[2].update(r);
    }
  }

  // The visible rows: level, zero and search filters applied.
  void rebuild() {
    rows_.clear();
    for (std::size_t i = 0; i < snap_.counters.size(); ++i) {
      const auto& c = snap_.counters[i];
      if (static_cast<int>(c.level) > static_cast<int>(level_)) continue;
      if (!filter_.match(c.name)) continue;
      if (!search_.empty() && c.name.find(search_) == std::string::npos) continue;
      if (!show_zero_ && !hist_[c.name].seen) continue;
      rows_.push_back(i);
    }
    if (cursor_ >= rows_.size()) cursor_ = rows_.empty() ? 0 : rows_.size() - 1;
  }

  // ---- keys ----------------------------------------------------------------------------
  bool key(int ch) {
    if (searching_) {
      if (ch == '\n' || ch == KEY_ENTER || ch == '\r') {
        searching_ = false;
        search_ = edit_;
        cursor_ = top_ = 0;
      } else if (ch == 27) {
        searching_ = false;
      } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
        if (!edit_.empty()) edit_.pop_back();
      } else if (ch >= 0x20 && ch < 0x7f && edit_.size() < 64) {
        edit_ += static_cast<char>(ch);
      }
      rebuild();
      return true;
    }
    const std::size_t page = static_cast<std::size_t>(std::max(1, list_height()));
    switch (ch) {
      case 'q': case 'Q': return false;
      case KEY_UP: case 'k': if (cursor_ > 0) --cursor_; break;
      case KEY_DOWN: case 'j': if (cursor_ + 1 < rows_.size()) ++cursor_; break;
      case KEY_PPAGE: case 'b': cursor_ = cursor_ > page ? cursor_ - page : 0; top_ = top_ > page ? top_ - page : 0; break;
      case KEY_NPAGE: case ' ':
        if (!rows_.empty()) {
          cursor_ = std::min(cursor_ + page, rows_.size() - 1);
          top_ = std::min(top_ + page, rows_.size() - 1);
        }
        break;
      case KEY_HOME: case 'g': cursor_ = top_ = 0; break;
      case KEY_END: case 'G': cursor_ = rows_.empty() ? 0 : rows_.size() - 1; break;
      case '+': step_interval(+1); break;
      case '-': step_interval(-1); break;
      case 'v': level_ = static_cast<rs::Level>((static_cast<int>(level_) + 1) % 3); rebuild(); break;
      case 'd': show_zero_ = !show_zero_; rebuild(); break;
      case '/': searching_ = true; edit_ = search_; break;
      case KEY_RESIZE: clear(); break;
      default: break;
    }
    return true;
  }

  void step_interval(int dir) {
    std::size_t n = std::size(kIntervals);
    std::size_t i = 0;
    while (i < n && kIntervals[i] < interval_ - 1e-9) ++i;  // first step >= current
    if (dir > 0) {
      if (i < n && std::fabs(kIntervals[i] - interval_) < 1e-9) ++i;
      interval_ = kIntervals[std::min(i, n - 1)];
    } else {
      interval_ = i == 0 ? kIntervals[0] : kIntervals[i - 1];
    }
  }

  // ---- drawing -------------------------------------------------------------------------
  int list_height() const { return LINES - 6; }  // 3 header lines + column titles + 2 bottom

  void put(int y, int x, const std::string& s, int maxw) {
    if (y < 0 || y >= LINES || x >= COLS || maxw <= 0) return;
    mvaddnstr(y, x, s.c_str(), std::min(maxw, COLS - x));
  }

  // A value in at most 12 characters: two decimals while they fit, then none, then
  // scientific notation (columns must never push each other).
  static std::string num(double v, bool integral) {
    char b[48];
    if (!std::isfinite(v)) return "";
    if (!integral) {
      std::snprintf(b, sizeof b, "%12.2f", v);
      if (std::strlen(b) <= 12) return b;
    }
    std::snprintf(b, sizeof b, "%12.0f", v);
    if (std::strlen(b) <= 12) return b;
    std::snprintf(b, sizeof b, "%12.5e", v);
    return b;
  }

  void draw() {
    erase();
    if (LINES < 8 || COLS < 30) {
      put(0, 0, "terminal too small", COLS);
      refresh();
      return;
    }
    // Header: uptime / writer, hit rates.
    std::string up = "Uptime:  " + rs::dhms(snap_.uptime_seconds());
    std::string wr = "Writer:  " + (have_snap_ ? "pid " + std::to_string(snap_.writer_pid) +
                                                      (snap_.writer_alive ? " (running)" : " (not running)")
                                                : std::string("-"));
    if (gone_) wr = "Writer:  instance gone, waiting";
    put(0, 0, up, COLS);
    put(1, 0, wr, COLS);
    char hb[128];
    std::snprintf(hb, sizeof hb, "Hitrate n: %8u %8u %8u", hit_[0].n, hit_[1].n, hit_[2].n);
    std::string h1 = hb;
    std::snprintf(hb, sizeof hb, "   avg(n): %8.4f %8.4f %8.4f", hit_[0].acc, hit_[1].acc, hit_[2].acc);
    std::string h2 = hb;
    int hx = std::max(static_cast<int>(up.size()) + 2, COLS - static_cast<int>(h1.size()));
    if (hx < static_cast<int>(wr.size()) + 2) hx = -1;
    if (hx >= 0 && hx + static_cast<int>(h1.size()) <= COLS) {
      put(0, hx, h1, COLS);
      put(1, hx, h2, COLS);
    } else {
      put(2, 0, h1 + h2.substr(3), COLS);
    }

    // Columns: as many value columns as fit after a name column of at least 16.
    std::size_t namew = 16;
    for (std::size_t r : rows_) namew = std::max(namew, snap_.counters[r].name.size() + 1);
    int ncols = std::clamp((COLS - 16) / kColW, 1, 6);
    int nw = std::min(static_cast<int>(namew), COLS - ncols * kColW);
    attron(A_BOLD);
    put(3, 0, "NAME", nw);
    for (int c = 0; c < ncols; ++c) {
      char t[32];
      std::snprintf(t, sizeof t, "%12s", kCols[c]);
      put(3, nw + c * kColW + 1, t, 12);
    }
    attroff(A_BOLD);

    const int lh = list_height();
    if (cursor_ < top_) top_ = cursor_;
    if (cursor_ >= top_ + static_cast<std::size_t>(lh)) top_ = cursor_ - lh + 1;
    if (top_ >= rows_.size()) top_ = rows_.empty() ? 0 : rows_.size() - 1;
    const double uptime = snap_.uptime_seconds();
    for (int i = 0; i < lh && top_ + i < rows_.size(); ++i) {
      const std::size_t idx = top_ + i;
      const rs::CounterValue& c = snap_.counters[rows_[idx]];
      const History& h = hist_[c.name];
      const int y = 4 + i;
      if (idx == cursor_) attron(A_REVERSE);
      std::string line = c.name;
      line.resize(static_cast<std::size_t>(nw), ' ');
      const bool integral = c.format != rs::Format::duration;
      std::string cols[6];
      if (c.type == rs::Type::bitmap) {
        char b[32];
        std::snprintf(b, sizeof b, "%12" PRIx64, c.raw);
        cols[0] = b;
      } else {
        cols[0] = num(c.value(), integral);
        if (h.ma10.n > 0) cols[1] = num(h.change, false);
        if (c.type == rs::Type::counter) {
          cols[2] = num(uptime > 0 ? c.value() / uptime : 0, false);
          if (h.ma10.n > 0) {
            cols[3] = num(h.ma10.acc, false);
            cols[4] = num(h.ma100.acc, false);
            cols[5] = num(h.ma1000.acc, false);
          }
        }
      }
      for (int k = 0; k < ncols; ++k) {
        std::string v = cols[k].empty() ? std::string(12, ' ') : cols[k];
        if (v.size() < 12) v.insert(0, 12 - v.size(), ' ');
        line += ' ' + v;
      }
      if (static_cast<int>(line.size()) < COLS) line.resize(static_cast<std::size_t>(COLS), ' ');
      put(y, 0, line, COLS);
      if (idx == cursor_) attroff(A_REVERSE);
    }

    // Bottom: the selected counter's description, then state and keys.
    std::string desc;
    if (!rows_.empty()) {
      const auto& c = snap_.counters[rows_[cursor_]];
      desc = c.name + ": " + c.description + " [" + rs::to_string(c.type) + ", " + rs::to_string(c.level) + "]";
    } else {
      desc = show_zero_ ? "(no counters match)" : "(no counters match; d shows zero counters)";
    }
    put(LINES - 2, 0, desc, COLS);
    std::string st;
    if (searching_) {
      st = "/" + edit_;
    } else {
      char b[200];
      std::snprintf(b, sizeof b, "Refresh %.1fs  Level %s  Zero %s  %zu-%zu/%zu", interval_, rs::to_string(level_),
                    show_zero_ ? "shown" : "hidden", rows_.empty() ? 0 : top_ + 1,
                    std::min(top_ + static_cast<std::size_t>(lh), rows_.size()), rows_.size());
      st = b;
      if (!search_.empty()) st += "  Search: " + search_;
      if (!status_.empty() && (gone_ || std::chrono::steady_clock::now() < status_until_)) st += "  | " + status_;
      else st += "  | q quit, v level, d zeros, / search, +/- refresh";
    }
    attron(A_REVERSE);
    std::string bar = st;
    if (static_cast<int>(bar.size()) < COLS) bar.resize(static_cast<std::size_t>(COLS), ' ');
    put(LINES - 1, 0, bar, COLS);
    attroff(A_REVERSE);
    refresh();
  }

  ScreenOptions opts_;
  rs::Filter filter_;
  double interval_;
  std::optional<rs::InstanceReader> reader_;
  rs::Snapshot snap_;
  bool have_snap_ = false;
  bool gone_ = false;
  std::map<std::string, History> hist_;
  MovingAvg hit_[3] = {{10}, {100}, {1000}};
  std::vector<std::size_t> rows_;
  std::size_t cursor_ = 0, top_ = 0;
  rs::Level level_ = rs::Level::info;
  bool show_zero_ = false;
  bool searching_ = false;
  std::string search_, edit_, status_;
  std::chrono::steady_clock::time_point status_until_{};
};

}  // namespace

int run_screen(const ScreenOptions& opts) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  Screen s(opts);
  return s.run();
}

}  // namespace ringlog::stat_tool
