// What every ringlog program shares at start-up (ringlog, ringlog-ncsa, ringlog-top,
// ringlog-stat, ringlog-dump, ringlog-forward, ringlog-demo and ringproxy): --help,
// --version, how a usage error is said, and the exit codes. Nothing here exits the
// process: the program returns the code it is handed.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringlog_cli11.hpp"

namespace ringlog::tool {

// The exit codes of every ringlog program (ringlog(7), EXIT STATUS; each program's
// page lists the ones it uses and what they mean for it).
inline constexpr int kExitOk = 0;        // success
inline constexpr int kExitFailure = 1;   // failure at run time: no ring or instance (after -t),
                                         // an I/O or write error, data not delivered
inline constexpr int kExitUsage = 2;     // bad command line or configuration
inline constexpr int kExitUnusable = 3;  // what was named exists but cannot be used: permission
                                         // denied, not a ring, a damaged or incompatible file
inline constexpr int kExitTerminal = 4;  // the terminal cannot be used for a screen

// A command-line mistake (exit 2) / a failure while running (exit 1, or the code it
// carries). The message is complete ("-q: ...", "no ring at ..."), without the
// program's name.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct RuntimeError : std::runtime_error {
  explicit RuntimeError(const std::string& what, int exit_code = kExitFailure)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

// "ringlog-top (ringlog) X.Y.Z": what --version prints, X.Y.Z the CMake project version.
std::string version_line(std::string_view program);

// Where the program's messages go: "PROGRAM: MSG" lines on stderr, or, once a program
// that daemonised called messages_to_syslog(), syslog (facility daemon, ident PROGRAM,
// with the pid; errors at LOG_ERR, notices at LOG_NOTICE). Cli and ReaderLoop speak
// through these. program must outlive the process (a literal or the Cli's name).
void messages_to_syslog(const char* program);
bool messages_in_syslog() noexcept;
void say_error(std::string_view program, std::string_view msg);
void say_notice(std::string_view program, std::string_view msg);

// A program's command line: a CLI11 App with -h/--help and -V/--version, and the
// messages every program gives. Register the options on app(), then parse().
class Cli {
 public:
  // name: the program as messages name it; description: the first line of --help.
  Cli(std::string name, std::string description);
  Cli(const Cli&) = delete;
  Cli& operator=(const Cli&) = delete;

  CLI::App& app() noexcept { return app_; }
  const std::string& name() const noexcept { return name_; }

  // The end of --help: text (may be empty), then "Exit codes: 0 ok, 1 ..., 2 ...".
  void footer(std::string text, const std::vector<std::pair<int, std::string>>& exit_codes);

  // Parses argv. Returns the code to exit with when the program is done already
  // (--help or --version printed: 0; a usage error said: 2), else nullopt.
  std::optional<int> parse(int argc, char** argv);

  // "NAME: MSG" and "Run 'NAME --help' for the options." on stderr (say_error: syslog
  // once there); returns kExitUsage.
  int usage_error(std::string_view msg) const;
  // "NAME: MSG" as say_error; returns code.
  int fail(std::string_view msg, int code = kExitFailure) const;
  int fail(const RuntimeError& e) const { return fail(e.what(), e.exit_code()); }
  // "NAME: MSG" as say_error.
  void say(std::string_view msg) const;

 private:
  std::string name_;
  CLI::App app_;
};

}  // namespace ringlog::tool
