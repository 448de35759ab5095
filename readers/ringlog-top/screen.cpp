// ringlog-top's curses screen (see screen.hpp).
#include "screen.hpp"

#include <curses.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "ringlog/tags.hpp"

namespace ringlog::top_tool {

namespace {

// The widest built-in tag name: varnishtop pads the tag column to it.
int tag_width() {
  std::size_t w = 0;
  for (const TagInfo& t : builtin_tags()) w = std::max(w, std::strlen(t.name));
  return int(w);
}

}  // namespace

Screen::Screen(TopCounter& counter, std::string name, unsigned period)
    : counter_(counter), name_(std::move(name)), period_(period) {}

Screen::~Screen() { stop(); }

bool Screen::start() {
  if (started_) return true;
  if (newterm(nullptr, stdout, stdin) == nullptr) return false;
  started_ = true;
  cbreak();  // not raw(): ^C stays a SIGINT, which stops the reading loop cleanly
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  intrflush(stdscr, FALSE);
  curs_set(0);
  timeout(0);
  // Tool messages go to a pipe while the screen is up.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    saved_stderr_ = ::dup(STDERR_FILENO);
    if (saved_stderr_ >= 0 && ::dup2(fds[1], STDERR_FILENO) >= 0) {
      pipe_rd_ = fds[0];
    } else {
      ::close(fds[0]);
      if (saved_stderr_ >= 0) ::close(saved_stderr_);
      saved_stderr_ = -1;
    }
    ::close(fds[1]);
  }
  last_update_ = std::chrono::steady_clock::now();
  draw(false);
  return true;
}

void Screen::stop() {
  if (!started_) return;
  started_ = false;
  endwin();
  if (pipe_rd_ >= 0) {
    std::fflush(stderr);
    drain_stderr();
    ::dup2(saved_stderr_, STDERR_FILENO);
    ::close(saved_stderr_);
    ::close(pipe_rd_);
    pipe_rd_ = saved_stderr_ = -1;
    if (!captured_.empty()) {
      ssize_t n = ::write(STDERR_FILENO, captured_.data(), captured_.size());
      (void)n;
    }
  }
}

void Screen::drain_stderr() {
  if (pipe_rd_ < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(pipe_rd_, buf, sizeof buf);
    if (n <= 0) break;
    captured_.append(buf, std::size_t(n));
  }
  // Keep the last complete line for the status line; bound what is kept.
  std::size_t end = captured_.size();
  while (end > 0 && captured_[end - 1] == '\n') --end;
  std::size_t begin = captured_.rfind('\n', end ? end - 1 : 0);
  begin = begin == std::string::npos ? 0 : begin + 1;
  if (begin < end) status_ = captured_.substr(begin, end - begin);
  if (captured_.size() > 1 << 20) captured_.erase(0, captured_.size() - (1 << 19));
}

bool Screen::tick(bool eof) {
  if (!started_) return !quit_;
  bool redraw = eof != was_eof_;
  was_eof_ = eof;
  for (int ch = getch(); ch != ERR; ch = getch()) {
    switch (ch) {
      case 'q':
      case 'Q':
      case 3:   // ^C (if it arrives as a key)
      case 17:  // ^Q
        quit_ = true;
        return false;
      case KEY_RESIZE: redraw = true; break;
      case 12:  // ^L
        clearok(curscr, TRUE);
        redraw = true;
        break;
      default: break;
    }
  }
  auto now = std::chrono::steady_clock::now();
  if (now - last_update_ >= std::chrono::seconds(1)) {
    last_update_ = now;
    draw(eof);
    // varnishtop decays once a second while reading, and stops at the end of input.
    if (!eof) counter_.decay(period_, std::size_t(std::max(LINES, 1)));
  } else if (redraw) {
    draw(eof);
  }
  return true;
}

void Screen::wait_key(int ms) {
  if (!started_) return;
  timeout(ms);
  int ch = getch();
  timeout(0);
  if (ch != ERR) ungetch(ch);
}

void Screen::draw(bool eof) {
  drain_stderr();
  erase();
  const int rows = LINES, cols = COLS;
  if (rows < 3 || cols < 30) {
    mvaddnstr(0, 0, "terminal too small", std::max(cols, 0));
    refresh();
    return;
  }
  char head[64];
  std::snprintf(head, sizeof head, "list length %zu", counter_.size());
  mvaddnstr(0, 0, head, cols);
  std::string right = name_ + (eof ? " (EOF)" : "");
  int hl = int(std::strlen(head));
  if (int(right.size()) > cols - hl - 2) right = right.substr(right.size() - std::size_t(std::max(cols - hl - 2, 0)));
  mvaddnstr(0, cols - 1 - int(right.size()), right.c_str(), int(right.size()));
  if (!status_.empty()) mvaddnstr(1, 0, status_.c_str(), cols - 1);

  static const int tw = tag_width();
  std::string line;
  int y = 2;
  for (const TopCounter::Entry& e : counter_.sorted(std::size_t(rows - 2))) {
    char num[48];
    int n = std::snprintf(num, sizeof num, "%9.2f ", e.count);
    line.assign(num, std::size_t(n));
    std::string_view tn = tag_name(e.tag);
    line += tn;
    if (int(tn.size()) < tw) line.append(std::size_t(tw) - tn.size(), ' ');
    line += ' ';
    append_top_key(line, e.key);
    mvaddnstr(y++, 0, line.c_str(), cols - 1);
    if (y >= rows) break;
  }
  refresh();
}

}  // namespace ringlog::top_tool
