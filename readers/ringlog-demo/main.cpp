// ringlog-demo: creates a ring, writes to it from several threads and tails it live
// from a separate (forked) reader process, then prints what each side counted.
// It is the README's first command until the proxy exists; it must never leave a
// child behind (the reader dies with the demo).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ringlog_cli11.hpp"

#include "program.hpp"

#include "ringlog/ring.hpp"

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

const char* kPaths[] = {"/", "/index.html", "/img/logo.png", "/api/v1/items?page=2", "/static/app.js",
                        "/health", "/search?q=ring+buffer", "/favicon.ico"};
const char* kMethods[] = {"GET", "GET", "GET", "POST", "HEAD"};

// The tailing side: a passive reader in its own process, printing every message.
// Runs until SIGTERM (sent by the demo once its writers are done), then drains.
int tail(const std::string& path, bool pinned, bool print) {
  ringlog::Reader rd = ringlog::Reader::open(
      path, {.kind = pinned ? ringlog::ReaderKind::pinned : ringlog::ReaderKind::passive});
  std::vector<std::byte> buf;
  std::uint64_t msgs = 0, notices = 0, lost = 0;
  while (true) {
    ringlog::ReadResult r = rd.next(buf);
    if (r.status == ringlog::ReadStatus::empty) {
      if (g_stop) break;
      rd.wait(std::chrono::milliseconds(50));
      continue;
    }
    if (r.status == ringlog::ReadStatus::lost) {
      lost += r.lost;
      std::fprintf(stderr, "Log overrun: %" PRIu64 " bytes lost\n", r.lost);
      continue;
    }
    if (r.kind == ringlog::format::MsgKind::notice) {
      ++notices;
      std::printf("** %.*s\n", static_cast<int>(buf.size()), reinterpret_cast<const char*>(buf.data()));
      continue;
    }
    ++msgs;
    if (print)
      std::printf("%10" PRIu64 "  %.*s\n", r.pos, static_cast<int>(buf.size()), reinterpret_cast<const char*>(buf.data()));
  }
  std::fflush(stdout);
  std::printf("reader:  %" PRIu64 " messages, %" PRIu64 " notices, %" PRIu64 " bytes lost\n", msgs, notices, lost);
  std::fflush(stdout);  // the caller leaves through _exit
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ringlog::tool::Cli cli("ringlog-demo",
                         "ringlog-demo: write to a ring from several threads and tail it live from another process");
  CLI::App& app = cli.app();
  std::string name = "demo";
  std::uint64_t size = 1 << 20;
  unsigned writers = 4;
  double rate = 5;
  double duration = 5;
  unsigned queues = 6;
  bool pinned = false, quiet = false;
  app.add_option("-n,--name", name, "Instance name or ring file path")->capture_default_str();
  app.add_option("-s,--size", size, "Ring area size in bytes")->capture_default_str()->check(CLI::Range(4096ULL, 1ULL << 40));
  app.add_option("-w,--writers", writers, "Writer threads")->capture_default_str()->check(CLI::Range(1u, 256u));
  app.add_option("-r,--rate", rate, "Messages per second per writer (0: as fast as possible)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("-d,--duration", duration, "Seconds to write for")->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  app.add_option("-q,--queues", queues, "Writer wait queues per process")->capture_default_str()->check(CLI::Range(1u, 1024u));
  app.add_flag("-p,--pinned", pinned, "Tail with a pinned (lossless) reader instead of a passive one");
  app.add_flag("--quiet", quiet, "Do not print each message, only the totals");
  cli.footer("", {{ringlog::tool::kExitOk, "ok"},
                  {ringlog::tool::kExitFailure, "the ring could not be created or the reader failed"},
                  {ringlog::tool::kExitUsage, "bad command line"}});
  if (auto rc = cli.parse(argc, argv)) return *rc;
  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  std::string path = ringlog::resolve_ring_path(name);
  try {
    ringlog::Ring ring = ringlog::Ring::create(path, {.area_size = size}, {.queues = queues});
    std::printf("ring %s: %" PRIu64 " bytes, %u writers at %g msg/s each for %g s, %s reader\n", path.c_str(), size,
                writers, rate, duration, pinned ? "pinned" : "passive");
    std::fflush(stdout);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) return cli.fail(std::string("fork: ") + std::strerror(errno));
    if (child == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
      _exit(tail(path, pinned, !quiet));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the reader attach
    std::atomic<std::uint64_t> ok{0}, dropped{0};
    std::vector<std::thread> ts;
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration);
    for (unsigned w = 0; w < writers; ++w)
      ts.emplace_back([&, w] {
        ringlog::set_thread_index(w);
        char msg[256];
        auto next = std::chrono::steady_clock::now();
        for (std::uint64_t seq = 0; !g_stop && std::chrono::steady_clock::now() < end; ++seq) {
          int n = std::snprintf(msg, sizeof msg, "writer %u seq %" PRIu64 " %s %s HTTP/1.1 %d %u bytes", w, seq,
                                kMethods[(seq + w) % 5], kPaths[(seq * 7 + w) % 8], seq % 13 ? 200 : 404,
                                static_cast<unsigned>((seq * 2654435761u) % 50000));
          if (ring.write(std::string_view(msg, static_cast<std::size_t>(n))) == ringlog::WriteStatus::ok) ++ok;
          else ++dropped;
          if (rate > 0) {
            next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(1.0 / rate));
            std::this_thread::sleep_until(next);
          }
        }
      });
    for (auto& t : ts) t.join();
    kill(child, SIGTERM);  // the reader drains what is left, then exits
    int st = 0;
    waitpid(child, &st, 0);
    ringlog::RingStats s = ring.stats();
    std::printf("writers: %" PRIu64 " written, %" PRIu64 " dropped\n", ok.load(), dropped.load());
    std::printf("ring:    head %" PRIu64 " tail %" PRIu64 ", %" PRIu64 " messages in %" PRIu64
                " batches, %" PRIu64 " lock waits\n",
                s.head, s.tail, s.msgs_written, s.batches, s.lock_waits);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? ringlog::tool::kExitOk : ringlog::tool::kExitFailure;
  } catch (const ringlog::Error& e) {
    return cli.fail(e.what());
  }
}
