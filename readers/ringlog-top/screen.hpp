// The curses screen of ringlog-top, after varnishtop's: "list length N" and the
// instance on the first line, then one row per (tag, payload) pair, highest decaying
// count first. Redrawn and decayed once a second, redrawn at once on a resize or ^L.
// While it runs, standard error goes to a pipe so that tool messages (overruns,
// reattaching) show on the status line instead of breaking the screen; they are
// replayed on the real standard error at the end.
#pragma once

#include <chrono>
#include <string>

#include "ringlog/top.hpp"

namespace ringlog::top_tool {

class Screen {
 public:
  Screen(TopCounter& counter, std::string name, unsigned period);
  ~Screen();
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  // Takes the terminal (and standard error); false when the terminal cannot be used.
  bool start();
  // Gives them back and replays what was written to standard error meanwhile.
  void stop();

  // Handles keys; every second draws and, unless at the end of the input, decays the
  // counts. Returns false once the user asked to quit (q, Q, ^C through SIGINT).
  bool tick(bool eof);
  // Blocks up to ms for a key (used after the end of the input).
  void wait_key(int ms);

 private:
  void draw(bool eof);
  void drain_stderr();

  TopCounter& counter_;
  std::string name_;
  unsigned period_;
  bool started_ = false;
  bool quit_ = false;
  bool was_eof_ = false;
  std::chrono::steady_clock::time_point last_update_{};
  int saved_stderr_ = -1;
  int pipe_rd_ = -1;
  std::string captured_;  // everything written to stderr while the screen was up
  std::string status_;    // its last line, shown under the header
};

}  // namespace ringlog::top_tool
