// ringlog-ncsa: one NCSA access-log line per client request (or backend fetch with -b),
// like varnishncsa: the same formats (-F/-f), -j JSON escaping, -w FILE (appended,
// reopened on SIGHUP for logrotate), -D/-P for running as a daemon, and the shared
// reader options (-n -t -d -r --pinned -g -T -L -q -Q -c -b -k -R).
// It only reads the ring; lines already accepted are never dropped on a reopen failure.
//
// Exit codes (the shared set of program.hpp, documented in ringlog-ncsa(1)):
//   0 success, 1 runtime failure (no ring, unreadable file, write error),
//   2 bad command line (flag, value, format or query), 3 ring unusable.
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "ringlog_cli11.hpp"

#include "reader_tool.hpp"
#include "ringlog/ncsa.hpp"

namespace {

namespace tool = ringlog::tool;
constexpr const char* kName = "ringlog-ncsa";

// Where lines go: stdout, or a file opened for appending and reopened on SIGHUP.
class Output {
 public:
  explicit Output(std::string path) : path_(std::move(path)) {
    if (path_.empty() || path_ == "-") {
      fd_ = STDOUT_FILENO;
      return;
    }
    fd_ = open_file();
    if (fd_ < 0) throw tool::RuntimeError("-w: cannot open " + path_ + ": " + std::strerror(errno));
  }
  ~Output() {
    if (fd_ > STDERR_FILENO) ::close(fd_);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  std::string& buffer() noexcept { return buf_; }
  bool is_file() const noexcept { return fd_ != STDOUT_FILENO; }

  // Writes what is buffered; throws RuntimeError on a write error.
  void flush() {
    std::size_t off = 0;
    while (off < buf_.size()) {
      ssize_t n = ::write(fd_, buf_.data() + off, buf_.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        int e = errno;
        buf_.erase(0, off);
        throw tool::RuntimeError("write to " + (is_file() ? path_ : std::string("stdout")) + ": " + std::strerror(e));
      }
      off += std::size_t(n);
    }
    buf_.clear();
  }

  // logrotate: the file was renamed away; write the pending lines to the old file and
  // continue in a new one. If the new one cannot be opened, keep the old one.
  void reopen() {
    if (!is_file()) return;
    flush();
    int nfd = open_file();
    if (nfd < 0) {
      tool::say_error(kName, "SIGHUP: cannot reopen " + path_ + ": " + std::strerror(errno) +
                                 "; still writing to the old file");
      return;
    }
    ::close(fd_);
    fd_ = nfd;
  }

 private:
  int open_file() const { return ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644); }

  std::string path_;
  int fd_ = -1;
  std::string buf_;
};

// -f: the first line of the file is the format (varnishncsa's rule).
std::string read_format_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tool::RuntimeError("-f: cannot read " + path + ": " + std::strerror(errno));
  std::string line;
  if (!std::getline(in, line)) {
    if (in.bad()) throw tool::RuntimeError("-f: cannot read " + path + ": " + std::strerror(errno));
    throw tool::RuntimeError("-f: " + path + " is empty (expected a format on its first line)");
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

// "-F: unknown format specifier '%Z' (at byte 3)" and the format with a caret under it.
std::string describe_format_error(const std::string& opt, const std::string& fmt, const ringlog::NcsaFormatError& e) {
  std::string s = opt + ": " + e.what() + "\n  " + fmt + "\n  " + std::string(e.pos(), ' ') + "^";
  return s;
}

std::string absolute(const std::string& path) {
  if (path.empty() || path == "-" || path.front() == '/') return path;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

}  // namespace

int main(int argc, char** argv) {
  tool::Cli cli(kName, "ringlog-ncsa - print ringlog transactions as NCSA access-log lines (like varnishncsa)");
  CLI::App& app = cli.app();
  tool::ReaderOptions ro;
  tool::add_reader_options(app, ro, tool::kSourceOptions | tool::kGroupingOptions | tool::kSelectOptions);
  std::string format_arg, format_file, out_file, pid_file;
  bool json = false, append = false, daemonize = false;
  app.add_option("-F", format_arg, "Log format (default: the NCSA combined format, see FORMAT in ringlog-ncsa(1))")
      ->type_name("FORMAT");
  app.add_option("-f", format_file, "Read the log format from the first line of FILE")->type_name("FILE");
  app.add_flag("-j", json, "JSON-safe values: \\uXXXX escapes, \"\" for a missing string, null for a missing number");
  app.add_option("-w", out_file, "Append the lines to FILE (- for stdout); SIGHUP reopens it (logrotate)")
      ->type_name("FILE");
  app.add_flag("-a", append, "Append to the -w file (always done; accepted for varnishncsa compatibility)");
  app.add_flag("-D", daemonize, "Run in the background (needs -w FILE)");
  app.add_option("-P", pid_file, "Write the process id to FILE (removed at exit)")->type_name("FILE");
  cli.footer(
      "Default: client requests (-c); -b logs backend fetches instead, -c -b both.\n"
      "Grouping (-g) is vxid or request. Formatters: %b %D %H %h %I %{X}i %l %m %{X}o %O\n"
      "%q %r %s %t %{X}t %T %{X}T %U %u %% and %{ringlog:time_firstbyte|hitmiss|handling|\n"
      "side|vxid}x (Varnish:... accepted), %{VSL:Tag[:prefix][field]}x.",
      {{tool::kExitOk, "ok"},
       {tool::kExitFailure, "runtime failure (no ring, unreadable file, write error)"},
       {tool::kExitUsage, "bad command line (flag, value, format or query)"},
       {tool::kExitUnusable, "ring unusable (permission denied, not a ringlog ring)"}});

  // varnishncsa's -c and -b combine (both sides), unlike the other tools' where they
  // exclude each other: take them out of the shared check and select sides here.
  bool want_client = false, want_backend = false;
  auto combine_sides = [&] {
    want_client = ro.client;
    want_backend = ro.backend;
    if (want_client && want_backend) ro.client = ro.backend = false;
    else if (!want_backend) ro.client = true;  // varnishncsa's default: client mode
  };
  if (auto rc = tool::parse_reader_command_line(cli, ro, argc, argv, combine_sides)) return *rc;
  auto usage_error = [&cli](const std::string& msg) { return cli.usage_error(msg); };
  if (ro.mode != ringlog::Grouping::vxid && ro.mode != ringlog::Grouping::request)
    return usage_error("-g: ringlog-ncsa groups by vxid or request, not '" + ro.grouping + "'");
  if (!format_arg.empty() && !format_file.empty()) return usage_error("-F and -f exclude each other");
  if (app.count("-F") && format_arg.empty()) return usage_error("-F: the format is empty");
  if (daemonize && (out_file.empty() || out_file == "-")) return usage_error("-D needs -w FILE (a daemon has no stdout)");
  if (daemonize && ro.read_file == "-") return usage_error("-D cannot read -r - (a daemon has no stdin)");
  (void)append;

  std::string format(ringlog::kNcsaDefaultFormat);
  const char* format_opt = "-F";
  try {
    if (!format_file.empty()) {
      format = read_format_file(format_file);
      format_opt = "-f";
    } else if (!format_arg.empty()) {
      format = format_arg;
    }
  } catch (const tool::RuntimeError& e) {
    return cli.fail(e);
  }
  std::optional<ringlog::NcsaFormatter> fmt;
  try {
    fmt.emplace(ringlog::NcsaFormatter::compile(format, {.json = json}));
  } catch (const ringlog::NcsaFormatError& e) {
    return usage_error(describe_format_error(format_opt, format, e));
  }

  std::optional<Output> out;
  try {
    out.emplace(daemonize ? absolute(out_file) : out_file);
  } catch (const tool::RuntimeError& e) {
    return cli.fail(e);
  }
  // Everything that can be checked is checked before -D detaches, and said on stderr
  // with its exit code (-w and -P opened, the format compiled); once detached,
  // messages go to syslog.
  int pid_fd = -1;
  if (!pid_file.empty()) {
    pid_file = absolute(pid_file);
    pid_fd = ::open(pid_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (pid_fd < 0) return cli.fail("-P: cannot write " + pid_file + ": " + std::strerror(errno));
  }
  // -D: the pid file holds the daemon's pid before the command returns, as a service
  // manager expects of a forking daemon (systemd reads PIDFile= when the parent exits,
  // and finds it empty if the child were left to write it): the parent writes it.
  auto write_pid = [&](pid_t pid) {
    std::string text = std::to_string(pid) + "\n";
    bool ok = ::write(pid_fd, text.data(), text.size()) == ssize_t(text.size());
    ok = ::close(pid_fd) == 0 && ok;
    if (!ok) {
      ::unlink(pid_file.c_str());
      return std::string("-P: cannot write ") + pid_file + ": " + std::strerror(errno);
    }
    return std::string();
  };
  if (daemonize) {
    pid_t child = ::fork();
    if (child < 0) return cli.fail(std::string("-D: ") + std::strerror(errno));
    if (child > 0) {
      if (pid_fd >= 0) {
        if (std::string err = write_pid(child); !err.empty()) {
          ::kill(child, SIGTERM);
          return cli.fail(err);
        }
      }
      ::_exit(tool::kExitOk);
    }
    if (pid_fd >= 0) ::close(pid_fd);
    pid_fd = -1;
    // What daemon(3) does after its fork: a session of its own, /, no terminal.
    ::setsid();
    [[maybe_unused]] int chdir_rc = ::chdir("/");
    if (int null = ::open("/dev/null", O_RDWR); null >= 0) {
      for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
      if (null > 2) ::close(null);
    }
    tool::messages_to_syslog(kName);
  }
  if (pid_fd >= 0) {
    if (std::string err = write_pid(::getpid()); !err.empty()) return cli.fail(err);
  }
  tool::install_signal_handlers();

  const ringlog::NcsaSides sides{.client = want_client || !want_backend, .backend = want_backend};
  // With both sides the loop selects every group, sessions included: count -k here,
  // in transactions that gave a line, as varnishncsa does.
  std::uint64_t own_limit = 0, logged = 0;
  if (want_client && want_backend && ro.mode == ringlog::Grouping::vxid) std::swap(own_limit, ro.limit);
  int rc = tool::kExitOk;
  try {
    tool::ReaderLoop loop(ro, kName);
    loop.on_group([&](const ringlog::Group& g) {
      std::size_t n = fmt->format_group(g, sides, out->buffer());
      if (out->buffer().size() >= 64 * 1024) out->flush();
      if (own_limit && n && ++logged >= own_limit) loop.stop();
    });
    auto housekeeping = [&] {
      out->flush();
      if (tool::take_hup()) out->reopen();
    };
    loop.on_idle(housekeeping);
    loop.on_tick(housekeeping);
    rc = loop.run();
    out->flush();
  } catch (const tool::UsageError& e) {
    rc = cli.usage_error(e.what());
  } catch (const tool::RuntimeError& e) {
    rc = cli.fail(e);
  }
  if (!pid_file.empty()) ::unlink(pid_file.c_str());
  return rc;
}
