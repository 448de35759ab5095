// bench_ring's LTTng-UST peer: a private lttng-sessiond, one snapshot-mode session with
// one user-space channel, and the tracepoint module (peers/lttng_peer.c) loaded into
// this process. Nothing system-wide: the daemon's home (LTTNG_HOME) is a fresh
// directory; as root, where lttng-sessiond and lttng(1) insist on /var/run/lttng, the
// daemon runs in a mount namespace of its own with a private /run and /dev/shm, and
// each lttng(1) command joins that namespace. Applications register through the
// socket in LTTNG_HOME. The daemon is stopped by its pid. When anything is missing,
// why() says what, and the peer is reported as unavailable: never a made-up figure.
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace ringlog::bench {

class LttngSession {
 public:
  using WriteFn = void (*)(const void*, std::size_t, const void*, std::size_t);

  // Starts the daemon and the session (subbuf_bytes x nsubbuf per CPU), then loads the
  // module. module: the tracepoint module's path.
  LttngSession(const std::string& module, std::uint64_t subbuf_bytes, unsigned nsubbuf) {
    start(module, subbuf_bytes, nsubbuf);
    if (!why_.empty()) stop();
  }
  ~LttngSession() { stop(); }
  LttngSession(const LttngSession&) = delete;
  LttngSession& operator=(const LttngSession&) = delete;

  const std::string& why() const noexcept { return why_; }  // empty: running
  WriteFn write() const noexcept { return write_; }
  const std::string& home() const noexcept { return home_; }
  const std::string& module() const noexcept { return module_; }
  const std::string& field_type() const noexcept { return field_type_; }
  std::string channel_desc() const { return channel_; }

  // Loads the module in a process that did not start the daemon (a second writer
  // process): LTTNG_HOME must already point at the daemon's home. Returns "" or why not.
  static std::string load_module(const std::string& module, WriteFn& write) {
    void* h = ::dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return std::string("cannot load the LTTng-UST peer module: ") + ::dlerror();
    auto enabled = reinterpret_cast<int (*)()>(::dlsym(h, "ringlog_bench_lttng_enabled"));
    write = reinterpret_cast<WriteFn>(::dlsym(h, "ringlog_bench_lttng_write"));
    if (!enabled || !write) return "the LTTng-UST peer module lacks its entry points";
    // liblttng-ust registers while it loads (LTTNG_UST_REGISTER_TIMEOUT, 3 s by
    // default); give a slow machine a little longer before concluding.
    for (int i = 0; i < 100 && !enabled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!enabled())
      return "the tracepoint is not enabled: this process did not register with the private lttng-sessiond";
    return "";
  }

  // Records a snapshot and returns its size in bytes (evidence that events were
  // recorded), or -1.
  long long snapshot_bytes() {
    if (!why_.empty()) return -1;
    std::string dir = home_ + "/snapshot";
    if (run_lttng({"snapshot", "record", "-s", kSession}) != 0) return -1;
    long long total = 0;
    std::error_code ec;
    for (auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
      if (e.is_regular_file(ec)) total += static_cast<long long>(e.file_size(ec));
    return total;
  }

 private:
  static constexpr const char* kSession = "ringlog-bench";
  static constexpr int kStartSeconds = 120;  // lttng-sessiond's start, on a loaded machine

  static bool in_path(const char* prog) {
    const char* path = std::getenv("PATH");
    std::string p = path ? path : "/usr/bin:/bin";
    for (std::size_t i = 0; i <= p.size();) {
      std::size_t j = p.find(':', i);
      if (j == std::string::npos) j = p.size();
      std::string cand = p.substr(i, j - i) + "/" + prog;
      if (::access(cand.c_str(), X_OK) == 0) return true;
      i = j + 1;
    }
    return false;
  }

  static int free_port() {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    int port = -1;
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &l) == 0)
      port = ntohs(a.sin_port);
    ::close(s);
    return port;
  }

  static std::vector<char*> argv_of(std::vector<std::string>& args) {
    std::vector<char*> v;
    for (auto& a : args) v.push_back(a.data());
    v.push_back(nullptr);
    return v;
  }

  // Enters the daemon's mount namespace (root only) in a forked child.
  bool enter_ns() const {
    if (!private_ns_) return true;
    int fd = ::open(("/proc/" + std::to_string(pid_) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC);
    return fd >= 0 && ::setns(fd, CLONE_NEWNS) == 0;
  }

  // Runs lttng(1) with the daemon's home (and namespace); returns its exit status.
  int run_lttng(std::vector<std::string> args) const {
    args.insert(args.begin(), "lttng");
    args.insert(args.begin() + 1, "--quiet");
    std::fflush(nullptr);
    pid_t p = ::fork();
    if (p == 0) {
      if (!enter_ns()) ::_exit(126);
      ::setenv("LTTNG_HOME", home_.c_str(), 1);
      int dn = ::open("/dev/null", O_WRONLY);
      if (dn >= 0) ::dup2(dn, 1);
      auto v = argv_of(args);
      ::execvp("lttng", v.data());
      ::_exit(127);
    }
    if (p < 0) return -1;
    int st = 0;
    ::waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  void start(const std::string& module, std::uint64_t subbuf_bytes, unsigned nsubbuf) {
    module_ = module;
    if (module.empty() || ::access(module.c_str(), R_OK) != 0) {
      why_ = "not built (liblttng-ust-dev was missing at build time)";
      return;
    }
    if (!in_path("lttng-sessiond") || !in_path("lttng")) {
      why_ = "lttng-sessiond or lttng not found (Debian package lttng-tools)";
      return;
    }
    char tmpl[] = "/tmp/ringlog-bench-lttng-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      why_ = "cannot create a home directory for lttng-sessiond";
      return;
    }
    home_ = tmpl;
    ::mkdir((home_ + "/.lttng").c_str(), 0700);
    std::string apps_sock = home_ + "/.lttng/lttng-ust-sock-8";
    private_ns_ = ::geteuid() == 0;
    int port = free_port();
    std::string log = home_ + "/sessiond.log";
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      if (private_ns_) {
        // The root daemon's run directory and wait shm would be system-wide: make them ours.
        if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
            ::mount("tmpfs", "/run", "tmpfs", 0, "mode=0755") != 0 ||
            ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777") != 0)
          ::_exit(125);
        std::error_code ec;
        if (std::filesystem::canonical("/var/run", ec) != "/run" &&
            ::mount("tmpfs", "/var/run", "tmpfs", 0, "mode=0755") != 0)
          ::_exit(125);
      }
      ::setenv("LTTNG_HOME", home_.c_str(), 1);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      std::vector<std::string> args = {"lttng-sessiond", "--no-kernel", "--apps-sock=" + apps_sock};
      if (port > 0) args.push_back("--agent-tcp-port=" + std::to_string(port));
      auto v = argv_of(args);
      ::execvp("lttng-sessiond", v.data());
      ::_exit(127);
    }
    if (pid_ < 0) {
      why_ = "fork failed";
      return;
    }
    // Ready when its client socket exists (seen through the daemon's own root).
    std::string client = private_ns_ ? "/proc/" + std::to_string(pid_) + "/root/run/lttng/client-lttng-sessiond"
                                     : home_ + "/.lttng/client-lttng-sessiond";
    // Up to 120 s: on a loaded machine a daemon's start takes tens of seconds.
    bool up = false;
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(kStartSeconds);
    while (!up && std::chrono::steady_clock::now() < give_up) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        why_ = st == 125 << 8 ? "cannot make a private mount namespace for lttng-sessiond"
                              : "lttng-sessiond exited at start (see " + log + ")";
        return;
      }
      struct stat sb{};
      up = ::stat(client.c_str(), &sb) == 0 && ::stat(apps_sock.c_str(), &sb) == 0;
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!up) {
      why_ = "lttng-sessiond did not come up within " + std::to_string(kStartSeconds) + " s (see " + log + ")";
      return;
    }
    std::string sub = std::to_string(subbuf_bytes);
    channel_ = "per-user buffers, per CPU " + std::to_string(nsubbuf) + " x " + std::to_string(subbuf_bytes >> 10) +
               " KiB sub-buffers, overwrite mode";
    if (run_lttng({"create", kSession, "--snapshot", "--output=" + home_ + "/snapshot"}) != 0 ||
        run_lttng({"enable-channel", "-u", "-s", kSession, "--subbuf-size=" + sub,
                   "--num-subbuf=" + std::to_string(nsubbuf), "--overwrite", "ch"}) != 0 ||
        run_lttng({"enable-event", "-u", "-s", kSession, "-c", "ch", "ringlog_bench:msg"}) != 0 ||
        run_lttng({"start", kSession}) != 0) {
      why_ = "lttng(1) could not set up the snapshot session";
      return;
    }
    ::setenv("LTTNG_HOME", home_.c_str(), 1);  // read by liblttng-ust when it loads
    shm_before_ = existing_wait_shm();
    why_ = load_module(module, write_);
    void* h = ::dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h) {
      auto ft = reinterpret_cast<const char* (*)()>(::dlsym(h, "ringlog_bench_lttng_field_type"));
      if (ft) field_type_ = ft();
      ::dlclose(h);
    }
  }

  // liblttng-ust creates its wait files in /dev/shm when it loads; the ones we caused
  // are removed when we stop.
  static std::vector<std::string> existing_wait_shm() {
    std::vector<std::string> v;
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator("/dev/shm", ec))
      if (e.path().filename().string().rfind("lttng-ust-wait-", 0) == 0) v.push_back(e.path().string());
    return v;
  }

  void stop() {
    if (pid_ > 0) {
      run_lttng({"destroy", kSession});
      ::kill(pid_, SIGTERM);
      int st = 0;
      bool gone = false;
      for (int i = 0; i < 100 && !gone; ++i) {
        gone = ::waitpid(pid_, &st, WNOHANG) == pid_;
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!gone) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
      }
      pid_ = -1;
    }
    if (!shm_before_.empty() || write_) {
      for (auto& f : existing_wait_shm())
        if (std::find(shm_before_.begin(), shm_before_.end(), f) == shm_before_.end()) ::unlink(f.c_str());
    }
    // Kept when something failed (the daemon's log is there) or when asked to.
    if (!home_.empty() && why_.empty() && std::getenv("RINGLOG_BENCH_KEEP_LTTNG") == nullptr) {
      std::error_code ec;
      std::filesystem::remove_all(home_, ec);
    }
    home_.clear();
  }

  std::string why_, home_, module_, field_type_, channel_;
  std::vector<std::string> shm_before_;
  pid_t pid_ = -1;
  bool private_ns_ = false;
  WriteFn write_ = nullptr;
};

}  // namespace ringlog::bench
