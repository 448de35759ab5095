// The interactive ringlog-stat screen (varnishstat's curses mode). Runs until q or a
// signal; survives terminal resizes and writer restarts (it reattaches).
#pragma once

#include <string>
#include <vector>

namespace ringlog::stat_tool {

struct ScreenOptions {
  std::string instance;              // -n argument
  std::vector<std::string> globs;    // -f
  double interval = 1.0;             // seconds between samples
};

// Returns the process exit code (kExitOk, or kExitTerminal when the terminal cannot be used).
int run_screen(const ScreenOptions& opts);

}  // namespace ringlog::stat_tool
