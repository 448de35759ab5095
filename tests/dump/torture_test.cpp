// Crash torture: writer processes are SIGKILLed at random moments and, through the
// test-only hooks of the ringlog_hooks library, at each named step of the write path.
// After each kill, ringlog-dump must show every message whose write completed (the
// writers report completions through a pipe), never a torn or corrupted message, and
// its repaired copy must read cleanly; then the surviving writers must carry on.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ringlog/ring.hpp"
#include "test_util.hpp"

namespace ringlog::detail {
void test_hook_arm(const char* spec) noexcept;  // ringlog/src/test_hooks.cpp
}

using namespace ringlog;
using namespace ringlog::test;

namespace {

constexpr const char* kSteps[] = {"locked", "reclaimed", "tagged", "head_moved",
                                  "unlocked", "mid_copy", "copied", "exposed"};
constexpr unsigned kWriters = 3;
constexpr std::uint64_t kPhaseA = 60, kPhaseB = 40;
constexpr std::uint64_t kPhaseARandomVictim = 2000;  // still writing when its random kill comes
constexpr std::uint64_t kDoneMarker = ~0ULL;
constexpr auto kBudget = std::chrono::seconds(30);
constexpr unsigned kMaxRounds = 400, kMinRounds = 48;

std::string make_line(unsigned round, unsigned w, std::uint64_t seq) {
  char head[64];
  std::snprintf(head, sizeof head, "w=%u s=%" PRIu64 " r=%u ", w, seq, round);
  std::string s = head;
  s.append(static_cast<std::size_t>(10 + (seq * 37 + w * 11) % 150), static_cast<char>('a' + (seq + w) % 26));
  char tail[16];
  std::snprintf(tail, sizeof tail, " c=%08x", fnv1a(s.data(), s.size()));
  return s + tail;
}

// Parses and checks a line; false if it is torn or corrupted.
bool check_line(const std::string& l, unsigned& round, unsigned& w, std::uint64_t& seq) {
  std::size_t c = l.rfind(" c=");
  if (c == std::string::npos || l.size() != c + 11) return false;
  unsigned sum = 0;
  if (std::sscanf(l.c_str() + c, " c=%8x", &sum) != 1 || sum != fnv1a(l.data(), c)) return false;
  return std::sscanf(l.c_str(), "w=%u s=%" SCNu64 " r=%u ", &w, &seq, &round) == 3;
}

struct ToolRun {
  int code = -1;
  std::string out;
};

ToolRun run_dump(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  pid_t p = fork_child();
  if (p == 0) {
    ::dup2(fds[1], 1);
    int devnull = ::open("/dev/null", O_WRONLY);  // what it skipped is checked through stdout
    if (devnull >= 0) ::dup2(devnull, 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(RINGLOG_DUMP_BIN));
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(RINGLOG_DUMP_BIN, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ToolRun r;
  char buf[65536];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int st = 0;
  ::waitpid(p, &st, 0);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// A writer process: phase A, report, wait for "go", phase B. Reports each completed
// write's sequence number through `report` (8 bytes, atomic on a pipe).
[[noreturn]] void writer_main(const std::string& path, unsigned round, unsigned w, const char* kill_spec,
                              std::uint64_t phase_a, int report, int go) {
  detail::test_hook_arm(kill_spec);
  try {
    Ring r = Ring::open(path);
    std::uint64_t seq = 0;
    auto phase = [&](std::uint64_t n) {
      for (std::uint64_t i = 0; i < n; ++i, ++seq) {
        std::string line = make_line(round, w, seq);
        if (r.write(line) == WriteStatus::ok && ::write(report, &seq, 8) != 8) ::_exit(3);
      }
    };
    phase(phase_a);
    if (::write(report, &kDoneMarker, 8) != 8) ::_exit(3);
    char c;
    if (::read(go, &c, 1) != 1) ::_exit(0);  // the parent gave up on us
    phase(kPhaseB);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "writer: %s\n", e.what());
    ::_exit(4);
  }
  ::_exit(0);
}

struct Writer {
  pid_t pid = -1;
  int report = -1, go = -1;
  bool done_a = false, eof = false;
  std::vector<std::uint64_t> completed;
  std::string partial;  // bytes of an incomplete 8-byte report
};

void drain(Writer& w) {
  char buf[4096];
  ssize_t n = ::read(w.report, buf, sizeof buf);
  if (n <= 0) {
    if (n == 0 || errno != EINTR) w.eof = true;
    return;
  }
  w.partial.append(buf, static_cast<std::size_t>(n));
  while (w.partial.size() >= 8) {
    std::uint64_t v;
    std::memcpy(&v, w.partial.data(), 8);
    w.partial.erase(0, 8);
    if (v == kDoneMarker) w.done_a = true;
    else w.completed.push_back(v);
  }
}

// Reads reports until every writer has finished phase A or died (EOF).
bool wait_phase(std::vector<Writer>& ws, bool until_eof) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    std::vector<pollfd> pf;
    std::vector<Writer*> who;
    for (auto& w : ws)
      if (!w.eof && (until_eof || !w.done_a)) {
        pf.push_back({w.report, POLLIN, 0});
        who.push_back(&w);
      }
    if (pf.empty()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    int n = ::poll(pf.data(), pf.size(), 200);
    for (int i = 0; n > 0 && i < static_cast<int>(pf.size()); ++i)
      if (pf[i].revents) drain(*who[i]);
  }
}

struct Totals {
  unsigned rounds = 0, kills = 0, hook_kills = 0, random_kills = 0, random_mid_write = 0;
  std::map<std::string, unsigned> kills_at;
  std::uint64_t completed = 0, recovered = 0, unreported = 0, torn_discarded = 0, notices = 0, phase_b_ok = 0;
};

// Checks one dump of the ring: every line intact, no duplicates, and the completed
// writes present (all of them, or for a ring that wrapped, each writer's newest ones).
void check_dump(const std::string& what, const ToolRun& r, unsigned round, std::vector<Writer>& ws, bool wrapped,
                Totals& tot, bool count, bool live = false) {
  ASSERT_TRUE(r.code == 0 || r.code == 1) << what << ": exit " << r.code;
  std::map<unsigned, std::set<std::uint64_t>> seen;
  std::size_t start = 0;
  while (start < r.out.size()) {
    std::size_t nl = r.out.find('\n', start);
    ASSERT_NE(nl, std::string::npos) << what << ": unterminated line";
    std::string l = r.out.substr(start, nl - start);
    start = nl + 1;
    if (l.rfind("ringlog: ", 0) == 0) {  // a drop notice
      if (count) ++tot.notices;
      continue;
    }
    unsigned rr = 0, w = 0;
    std::uint64_t seq = 0;
    ASSERT_TRUE(check_line(l, rr, w, seq)) << what << ": torn or corrupted message: " << l;
    ASSERT_EQ(rr, round) << what;
    ASSERT_LT(w, kWriters) << what;
    ASSERT_TRUE(seen[w].insert(seq).second) << what << ": duplicate " << l;
  }
  if (live) return;  // writers are at work: only integrity can be checked
  for (unsigned w = 0; w < kWriters; ++w) {
    const auto& got = seen[w];
    std::set<std::uint64_t> done(ws[w].completed.begin(), ws[w].completed.end());
    std::uint64_t from = 0;
    if (wrapped) from = got.empty() ? ~0ULL : *got.begin();  // older ones may be reclaimed
    for (std::uint64_t s : done)
      if (s >= from) {
        ASSERT_TRUE(got.count(s)) << what << ": writer " << w << " completed seq " << s << " but it is missing";
      }
    if (count) {
      for (std::uint64_t s : got) {
        if (done.count(s)) ++tot.recovered;
        else ++tot.unreported;  // killed after exposing, before reporting
      }
    }
  }
}

std::uint64_t json_number(const std::string& j, const std::string& key) {
  std::size_t p = j.find("\"" + key + "\":");
  return p == std::string::npos ? 0 : std::strtoull(j.c_str() + p + key.size() + 3, nullptr, 10);
}

}  // namespace

TEST(DumpTorture, WritersKilledAtEveryStep) {
  ::signal(SIGPIPE, SIG_IGN);
  std::mt19937_64 rng(0x5eed ^ static_cast<std::uint64_t>(::getpid()));
  Totals tot;
  auto t0 = std::chrono::steady_clock::now();
  for (unsigned round = 0; round < kMaxRounds; ++round) {
    if (round >= kMinRounds && std::chrono::steady_clock::now() - t0 > kBudget) break;
    const char* step = kSteps[round % std::size(kSteps)];
    const bool small = std::string(step) == "head_moved" || round % 5 == 0;
    ScratchPath path("torture");
    ScratchPath copy("torture-copy");
    const bool random_victim = round % 2 == 1;
    { Ring::create(path, {.area_size = small ? 8192u : random_victim ? 1u << 20 : 256u << 10}); }

    // Writer 0 dies at `step` after a random number of hits; writer 1 is killed at a
    // random moment in odd rounds; writer 2 (and any writer not killed) survives.
    char spec[64];
    std::snprintf(spec, sizeof spec, "%s:%u", step, static_cast<unsigned>(1 + rng() % 30));
    std::vector<Writer> ws(kWriters);
    for (unsigned w = 0; w < kWriters; ++w) {
      int rep[2], go[2];
      ASSERT_EQ(::pipe(rep), 0);
      ASSERT_EQ(::pipe(go), 0);
      pid_t p = fork_child();
      if (p == 0) {
        ::close(rep[0]);
        ::close(go[1]);
        writer_main(path, round, w, w == 0 ? spec : "", w == 1 && random_victim ? kPhaseARandomVictim : kPhaseA,
                    rep[1], go[0]);
      }
      ::close(rep[1]);
      ::close(go[0]);
      ws[w].pid = p;
      ws[w].report = rep[0];
      ws[w].go = go[1];
    }
    if (random_victim) {
      // The kill's moment is the random input under test, not a synchronisation (phases
      // are reported through the pipes).
      ::usleep(static_cast<useconds_t>(rng() % 3000));
      ::kill(ws[1].pid, SIGKILL);
    }
    ASSERT_TRUE(wait_phase(ws, false)) << "round " << round << ": writers stuck in phase A (step " << step << ")";

    // The crash state: victims are dead, survivors paused.
    for (unsigned w = 0; w < kWriters; ++w)
      if (ws[w].eof) {
        int st = 0;
        ::waitpid(ws[w].pid, &st, 0);
        ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "writer " << w << " ended without being killed";
        ws[w].pid = -1;
        ++tot.kills;
        if (w == 0) {
          ++tot.hook_kills;
          ++tot.kills_at[step];
        } else {
          ++tot.random_kills;
          if (!ws[w].done_a) ++tot.random_mid_write;  // it was still writing
        }
      }
    ToolRun d = run_dump({"--raw", path});
    check_dump("round " + std::to_string(round) + " crashed ring", d, round, ws, small, tot, true);
    if (HasFatalFailure()) break;
    ToolRun rep = run_dump({"--repair", "-j", "-o", copy, path});
    ASSERT_TRUE(rep.code == 0 || rep.code == 1) << "repair exit " << rep.code << "\n" << rep.out;
    tot.torn_discarded += json_number(rep.out, "torn_batches");
    ToolRun dc = run_dump({"--raw", copy});
    ASSERT_EQ(dc.code, 0) << "the repaired copy is not clean (round " << round << ", step " << step << ")";
    check_dump("round " + std::to_string(round) + " repaired copy", dc, round, ws, small, tot, false);
    if (HasFatalFailure()) break;
    ASSERT_EQ(dc.out, d.out) << "repair changed what a dump shows (round " << round << ")";

    // Survivors carry on: they must get past whatever the dead left behind.
    std::vector<std::size_t> before(kWriters);
    for (unsigned w = 0; w < kWriters; ++w) {
      before[w] = ws[w].completed.size();
      if (ws[w].pid > 0) (void)!::write(ws[w].go, "g", 1);  // EPIPE: it was killed meanwhile
    }
    // A dump while they write (a live ring, wrapping in small rounds): never a torn message.
    ToolRun live = run_dump({"--raw", path});
    check_dump("round " + std::to_string(round) + " live", live, round, ws, true, tot, false, true);
    if (HasFatalFailure()) break;
    ASSERT_TRUE(wait_phase(ws, true)) << "round " << round << ": survivors stuck after a kill at " << step;
    for (unsigned w = 0; w < kWriters; ++w) {
      if (ws[w].pid > 0) {
        int st = 0;
        ::waitpid(ws[w].pid, &st, 0);
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && w == 1 && random_victim) {
          ++tot.kills;  // the random kill landed after its phase A
          ++tot.random_kills;
        } else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && w == 0) {
          ++tot.kills;  // its step came up only in phase B
          ++tot.hook_kills;
          ++tot.kills_at[step];
        } else {
          ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "survivor " << w << " failed, status " << st;
        }
        tot.phase_b_ok += ws[w].completed.size() - before[w];
        if (!small && WIFEXITED(st)) {
          EXPECT_EQ(ws[w].completed.size() - before[w], kPhaseB) << "survivor " << w << " lost writes";
        }
      }
      tot.completed += ws[w].completed.size();
      ::close(ws[w].report);
      ::close(ws[w].go);
    }
    ToolRun fin = run_dump({"--raw", path});
    check_dump("round " + std::to_string(round) + " after survivors", fin, round, ws, small, tot, false);
    if (HasFatalFailure()) break;
    ++tot.rounds;
  }
  std::printf("torture: %u rounds, %u kills (%u at hooks, %u at random moments, %u of them mid-stream), %" PRIu64
              " completed writes, %" PRIu64 " recovered after a crash, %" PRIu64
              " exposed but unreported, %" PRIu64 " torn batches discarded by repair, %" PRIu64
              " drop notices, %" PRIu64 " writes by survivors after a crash\n",
              tot.rounds, tot.kills, tot.hook_kills, tot.random_kills, tot.random_mid_write, tot.completed,
              tot.recovered, tot.unreported,
              tot.torn_discarded, tot.notices, tot.phase_b_ok);
  std::printf("torture: kills per step:");
  for (const char* s : kSteps) std::printf(" %s=%u", s, tot.kills_at[s]);
  std::printf("\n");
  EXPECT_GE(tot.rounds, kMinRounds);
  for (const char* s : kSteps) EXPECT_GT(tot.kills_at[s], 0u) << "no writer was ever killed at " << s;
  EXPECT_GT(tot.random_mid_write, 0u);
  EXPECT_GT(tot.torn_discarded, 0u);
  EXPECT_GT(tot.recovered, 0u);
}
