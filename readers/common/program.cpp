// The start-up shared by every ringlog program (see program.hpp).
#include "program.hpp"

#include <syslog.h>

#include <atomic>
#include <cstdio>
#include <iostream>

#include "ringlog/version.hpp"

namespace ringlog::tool {

std::string version_line(std::string_view program) {
  return std::string(program) + " (ringlog) " + kVersion;
}

namespace {
std::atomic<bool> g_syslog{false};

void say_at(int priority, std::string_view program, std::string_view msg) {
  if (!g_syslog.load(std::memory_order_relaxed)) {
    std::cerr << program << ": " << msg << "\n";
    return;
  }
  // One syslog message per line: a collector shows each on its own.
  while (!msg.empty()) {
    std::size_t nl = msg.find('\n');
    std::string_view line = msg.substr(0, nl);
    ::syslog(priority, "%.*s", int(line.size()), line.data());
    if (nl == std::string_view::npos) break;
    msg.remove_prefix(nl + 1);
  }
}
}  // namespace

void messages_to_syslog(const char* program) {
  ::openlog(program, LOG_PID | LOG_NDELAY, LOG_DAEMON);
  g_syslog.store(true, std::memory_order_relaxed);
}
bool messages_in_syslog() noexcept { return g_syslog.load(std::memory_order_relaxed); }
void say_error(std::string_view program, std::string_view msg) { say_at(LOG_ERR, program, msg); }
void say_notice(std::string_view program, std::string_view msg) { say_at(LOG_NOTICE, program, msg); }

Cli::Cli(std::string name, std::string description) : name_(std::move(name)), app_(std::move(description), name_) {}

void Cli::footer(std::string text, const std::vector<std::pair<int, std::string>>& exit_codes) {
  // "Exit codes: 0 ok, 1 ..., 2 ...", folded under 100 columns like the rest of --help.
  std::string codes = "Exit codes:";
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < exit_codes.size(); ++i) {
    std::string item = std::to_string(exit_codes[i].first) + " " + exit_codes[i].second +
                       (i + 1 < exit_codes.size() ? "," : ".");
    if (codes.size() - line_start + 1 + item.size() > 96) {
      codes += '\n';
      line_start = codes.size();
    } else {
      codes += ' ';
    }
    codes += item;
  }
  if (!text.empty() && text.back() != '\n') text += '\n';
  app_.footer(text + codes);
}

std::optional<int> Cli::parse(int argc, char** argv) {
  // Added last, so that --help lists it after the program's own options.
  if (!app_.get_option_no_throw("--version"))
    app_.set_version_flag("-V,--version", version_line(name_), "Print the version and exit");
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app_.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app_.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  return std::nullopt;
}

int Cli::usage_error(std::string_view msg) const {
  std::string m(msg);
  if (!m.empty() && m.back() == '\n') m.pop_back();
  if (messages_in_syslog()) say_error(name_, m);
  else std::cerr << name_ << ": " << m << "\nRun '" << name_ << " --help' for the options.\n";
  return kExitUsage;
}

int Cli::fail(std::string_view msg, int code) const {
  say(msg);
  return code;
}

void Cli::say(std::string_view msg) const { say_error(name_, msg); }

}  // namespace ringlog::tool
