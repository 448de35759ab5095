// A small writer for the ringlog-stat tests: creates an instance (stats file and ring)
// and either sets known values (--fixed, so outputs can be checked exactly) or keeps
// bumping counters from several threads, optionally adding and removing backend groups.
// Runs until SIGTERM/SIGINT or --run seconds; writes --ready FILE once set up.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ringlog/ring.hpp"
#include "ringlog/stats.hpp"
#include "ringproxy/counters.hpp"

namespace rs = ringlog::stats;
namespace pc = ringproxy::counters;  // MAIN and VBE, the proxy's groups

namespace {
volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

void usage() {
  std::fprintf(stderr, "usage: stats_demo_writer --dir DIR [--fixed] [--churn] [--threads N] [--run SECONDS] [--ready FILE]\n");
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  std::string dir, ready;
  bool fixed = false, churn = false;
  int threads = 4;
  double run = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--dir") dir = next();
    else if (a == "--ready") ready = next();
    else if (a == "--fixed") fixed = true;
    else if (a == "--churn") churn = true;
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--run") run = std::atof(next().c_str());
    else usage();
  }
  if (dir.empty() || threads < 1) usage();
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  // Stats first, then the ring: a tool that sees the ring sees the counters too.
  auto stats = rs::Stats::create(dir + "/stats");
  auto ring = ringlog::Ring::create(dir + "/ring", ringlog::CreateOptions{1u << 20, 0640, 0});
  auto main_g = stats.add_group(pc::main::kKind, "", pc::main::kDefs);
  auto web1 = stats.add_group(pc::vbe::kKind, "web1", pc::vbe::kDefs);
  auto web2 = stats.add_group(pc::vbe::kKind, "web2", pc::vbe::kDefs);

  if (fixed) {
    // Exactly: client_req 1000, cache_hit 600, cache_miss 400, sess_active 5 (threads
    // +4 +4 -1 -2), s_resp_bodybytes 4096, req_time 1 s, web1.req 10, web1.happy 0x5,
    // web2.req 20, web2.conn 2; the ring holds 3 messages.
    std::vector<std::thread> ts;
    const std::int64_t sess[4] = {4, 4, -1, -2};
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < 250; ++i) main_g.add(pc::main::client_req);
        main_g.add(pc::main::cache_hit, 150);
        main_g.add(pc::main::cache_miss, 100);
        if (sess[t] >= 0) main_g.add(pc::main::sess_active, static_cast<std::uint64_t>(sess[t]));
        else main_g.sub(pc::main::sess_active, static_cast<std::uint64_t>(-sess[t]));
        main_g.add(pc::main::s_resp_bodybytes, 1024);
        main_g.add(pc::main::req_time, 250'000'000);
      });
    for (auto& t : ts) t.join();
    web1.add(pc::vbe::req, 10);
    web1.set(pc::vbe::happy, 0x5);
    web2.add(pc::vbe::req, 20);
    web2.add(pc::vbe::conn, 2);
    ring.write(std::string_view("one"));
    ring.write(std::string_view("two"));
    ring.write(std::string_view("three"));
  }
  if (!ready.empty()) std::ofstream(ready) << ::getpid() << "\n";

  auto start = std::chrono::steady_clock::now();
  auto done = [&] {
    return g_stop || (run > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= run);
  };
  std::vector<std::thread> ts;
  if (!fixed) {
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        std::uint64_t i = 0;
        while (!done()) {
          main_g.add(pc::main::client_req);
          main_g.add(i % 4 == 0 ? pc::main::cache_miss : pc::main::cache_hit);
          main_g.add(pc::main::s_resp_bodybytes, 512 + i % 1024);
          (t % 2 ? web2 : web1).add(pc::vbe::req);
          if (i % 64 == 0) ring.write(std::string_view("demo message"));
          // A live load that leaves the CPU to the reader under test: pacing, not a synchronisation.
          if (++i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
  }
  int n = 0;
  rs::Group extra;
  while (!done()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the churn's clock (a group every second)
    if (churn && ++n % 10 == 0) {
      if (extra) extra.remove();
      else extra = stats.add_group(pc::vbe::kKind, "churn" + std::to_string(n / 10), pc::vbe::kDefs);
    }
  }
  g_stop = 1;
  for (auto& t : ts) t.join();
  return 0;
}
