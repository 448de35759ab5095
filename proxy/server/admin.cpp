// Admin commands (run by the admin thread, one per connection to the 0600 Unix
// socket) and the `ringproxy adm` client. Commands change atomics only, so they
// apply to the workers' next request without a restart and never block them.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "admin.hpp"
#include "server.hpp"
#include "unix_path.hpp"

namespace ringproxy {

namespace {

const char* kHelp =
    "ping                         alive check: PONG <unix time>\n"
    "help                         this list\n"
    "param.show [NAME]            parameters (and trace, mask) with their values\n"
    "param.set NAME VALUE         change a parameter; NAME may also be:\n"
    "                               trace on|off   global tracing (Trace records)\n"
    "                               mask SPEC      tag mask: default, all, none, +Tag,-Tag...\n"
    "backend.list                 backends: name, address, health, probe results\n"
    "backend.health [NAME]        probe history per backend (newest first, H good, - bad)\n"
    "stats [PREFIX]               counters of this instance: name value description\n"
    "purge HOST URL               drop every variant of the object HOST + URL: purged N\n"
    "purge.regex REGEX            drop every object whose key (lowercase host, then URL,\n"
    "                               e.g. example.com/a/b) matches REGEX: purged N\n"
    "cache.info                   objects, storage in use and capacity\n";

std::string history(std::uint64_t bits, unsigned n) {
  std::string s;
  for (unsigned i = 0; i < n; ++i) s += (bits >> i) & 1 ? 'H' : '-';
  return s;
}

}  // namespace

std::string Server::admin_command(const std::vector<std::string>& argv, bool& ok) {
  ok = true;
  if (argv.empty()) {
    ok = false;
    return "no command; try help";
  }
  const std::string& cmd = argv[0];
  auto want = [&](std::size_t lo, std::size_t hi) {
    if (argv.size() - 1 < lo || argv.size() - 1 > hi) throw std::runtime_error("wrong number of arguments for " + cmd);
  };
  if (cmd == "ping") {
    want(0, 0);
    return "PONG " + std::to_string(std::time(nullptr));
  }
  if (cmd == "help") return kHelp;
  if (cmd == "purge" || cmd == "purge.regex" || cmd == "cache.info") {
    if (!cache_) {
      ok = false;
      return "the cache is off (--cache off)";
    }
    if (cmd == "purge") {
      want(2, 2);
      return "purged " + std::to_string(cache_->purge(argv[1], argv[2]));
    }
    if (cmd == "purge.regex") {
      want(1, 1);
      try {
        return "purged " + std::to_string(cache_->purge_regex(argv[1]));
      } catch (const ringlog::RegexError& e) {
        ok = false;
        return std::string("bad regular expression: ") + e.what();
      }
    }
    want(0, 0);
    const delivery::Store& st = cache_->store();
    return "objects " + std::to_string(cache_->objects()) + "\nstorage_used " + std::to_string(st.used()) +
           "\nstorage_capacity " + std::to_string(st.config().capacity) + "\ntransient_used " +
           std::to_string(st.transient_used()) + "\n";
  }
  if (cmd == "param.show") {
    want(0, 1);
    std::string name = argv.size() > 1 ? argv[1] : "";
    std::string out;
    if (name.empty() || name == "trace") out += std::string("trace                  ") + (log_->trace() ? "on" : "off") + "\n";
    if (name.empty() || name == "mask") out += "mask                   " + log_->mask() + "\n";
    if (name != "trace" && name != "mask") {
      if (!name.empty() && Params::find(name) < 0) {
        ok = false;
        return "unknown parameter '" + name + "'";
      }
      out += params_.show(name);
    }
    return out;
  }
  if (cmd == "param.set") {
    want(2, 2);
    const std::string& name = argv[1];
    const std::string& v = argv[2];
    if (name == "trace") {
      if (v == "on" || v == "1" || v == "true") log_->set_trace(true);
      else if (v == "off" || v == "0" || v == "false") log_->set_trace(false);
      else {
        ok = false;
        return "trace takes on or off";
      }
      log_->record(ringlog::Tag::Notice, "param.set trace " + v);
      return "trace " + std::string(log_->trace() ? "on" : "off");
    }
    if (name == "mask") {
      try {
        log_->set_mask(v);
      } catch (const ringlog::Error& e) {
        ok = false;
        return e.what();
      }
      return "mask " + log_->mask();
    }
    std::string err = params_.set(name, v);
    if (!err.empty()) {
      ok = false;
      return err;
    }
    log_->record(ringlog::Tag::Notice, "param.set " + name + " " + v);
    return params_.show(name);
  }
  if (cmd == "backend.list") {
    want(0, 0);
    std::string out;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%-24s %-24s %-8s %-8s %s\n", "name", "address", "health", "probes", "last probe");
    out += buf;
    if (backends_.empty()) return out + "(none: the built-in demo origin answers)\n";
    for (auto& b : backends_) {
      std::string last;
      {
        std::lock_guard<std::mutex> lk(b->probe_mu);
        last = b->last_probe.empty() ? "-" : b->last_probe;
      }
      std::snprintf(buf, sizeof buf, "%-24s %-24s %-8s %3u/%-4u %s\n", b->spec.name.c_str(), b->spec.addr.str().c_str(),
                    b->healthy.load() ? "healthy" : "sick",
                    unsigned(__builtin_popcountll(b->happy.load() & 0xff)),
                    unsigned(std::min<std::uint64_t>(b->probes.load(), 8)), last.c_str());
      out += buf;
    }
    return out;
  }
  if (cmd == "backend.health") {
    want(0, 1);
    std::string out;
    bool found = false;
    for (auto& b : backends_) {
      if (argv.size() > 1 && argv[1] != b->spec.name) continue;
      found = true;
      unsigned n = unsigned(std::min<std::uint64_t>(b->probes.load(), 32));
      char buf[512];
      std::snprintf(buf, sizeof buf, "%s %s %s probes=%llu failed=%llu history=%s\n", b->spec.name.c_str(),
                    b->spec.addr.str().c_str(), b->healthy.load() ? "healthy" : "sick",
                    (unsigned long long)b->probes.load(), (unsigned long long)b->probe_failures.load(),
                    history(b->happy.load(), n).c_str());
      out += buf;
    }
    if (argv.size() > 1 && !found) {
      ok = false;
      return "no backend named '" + argv[1] + "'";
    }
    return out;
  }
  if (cmd == "stats") {
    want(0, 1);
    auto snap = ringlog::stats::InstanceReader::open(ringlog::instance_dir(cfg_.instance)).snapshot();
    std::string out;
    for (const auto& c : snap.counters) {
      if (argv.size() > 1 && c.name.compare(0, argv[1].size(), argv[1]) != 0) continue;
      char buf[512];
      if (c.type == ringlog::stats::Type::gauge)
        std::snprintf(buf, sizeof buf, "%-40s %20lld  %s\n", c.name.c_str(), (long long)c.as_signed(), c.description.c_str());
      else
        std::snprintf(buf, sizeof buf, "%-40s %20llu  %s\n", c.name.c_str(), (unsigned long long)c.raw, c.description.c_str());
      out += buf;
    }
    return out;
  }
  ok = false;
  return "unknown command '" + cmd + "'; try help";
}

int admin_client(const std::string& socket_path, const std::vector<std::string>& words) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  UnixPath un(socket_path);
  if (!un.ok()) {
    std::fprintf(stderr, "ringproxy adm: cannot reach %s: %s\n", socket_path.c_str(), un.error().c_str());
    if (fd >= 0) ::close(fd);
    return kAdmExitUnreachable;
  }
  if (fd < 0 || ::connect(fd, un.sa(), un.len()) != 0) {
    std::fprintf(stderr, "ringproxy adm: cannot reach %s: %s (is ringproxy running for this instance?)\n",
                 socket_path.c_str(), std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return kAdmExitUnreachable;
  }
  std::string line;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i) line += '\x1f';
    line += words[i];
  }
  line += '\n';
  if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) != ssize_t(line.size())) {
    std::fprintf(stderr, "ringproxy adm: send: %s\n", std::strerror(errno));
    ::close(fd);
    return kAdmExitUnreachable;
  }
  std::string reply;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, std::size_t(n));
  }
  ::close(fd);
  auto nl = reply.find('\n');
  if (nl == std::string::npos) {
    std::fprintf(stderr, "ringproxy adm: no reply from %s\n", socket_path.c_str());
    return kAdmExitUnreachable;
  }
  bool ok = reply.compare(0, nl, "OK") == 0;
  std::string body = reply.substr(nl + 1);
  std::fputs(body.c_str(), ok ? stdout : stderr);
  return ok ? 0 : kAdmExitRefused;
}

}  // namespace ringproxy
