// Kill torture: writer processes are SIGKILLed at random moments, round after round,
// while readers (pinned and passive, in this process) keep reading. Survivors must keep
// writing, no torn message may ever be delivered, every reader must keep working, and
// at the end the ring must still accept and deliver a marker message.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "observe.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;
using namespace ringlog::test;
using ringlog::format::Header;
using namespace std::chrono_literals;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kRounds = 60;
#else
constexpr int kRounds = 250;
#endif
constexpr unsigned kLive = 3;         // writer processes alive at any time
constexpr unsigned kThreadsEach = 3;  // threads per writer process
constexpr std::uint32_t kMarker = 0xFFFFFFF0u;

// Writes forever (until killed) from kThreadsEach threads; writer ids are unique per spawn.
[[noreturn]] void writer_forever(const std::string& path, std::uint32_t spawn) {
  try {
    Ring ring = Ring::open(path);
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < kThreadsEach; ++t)
      ts.emplace_back([&, t] {
        std::uint32_t id = spawn * kThreadsEach + t;
        for (std::uint64_t s = 0;; ++s) ring.write(make_stress(id, s, mix_len(s)));
      });
    for (auto& t : ts) t.join();
  } catch (...) {
  }
  ::_exit(1);
}

struct Tally {
  std::atomic<std::uint64_t> msgs{0}, torn{0}, disorder{0}, lost{0}, markers{0};
};

void reader_loop(Reader rd, Tally& t, std::atomic<bool>& stop) {
  std::vector<std::byte> buf;
  std::vector<std::int64_t> last;
  while (!stop.load(std::memory_order_acquire)) {
    ReadResult r = rd.next(buf);
    if (r.status == ReadStatus::empty) {
      rd.wait(5ms);
      continue;
    }
    if (r.status == ReadStatus::lost) {
      t.lost += r.lost;
      continue;
    }
    if (r.kind != format::MsgKind::data) continue;
    StressMsg m;
    if (!check_stress(buf.data(), buf.size(), m)) {
      ++t.torn;
      continue;
    }
    if (m.writer == kMarker) {
      ++t.markers;
      continue;
    }
    if (last.size() <= m.writer) last.resize(m.writer + 1, -1);
    if (static_cast<std::int64_t>(m.seq) <= last[m.writer]) ++t.disorder;
    last[m.writer] = static_cast<std::int64_t>(m.seq);
    ++t.msgs;
  }
}

}  // namespace

TEST(Crash, WritersKilledAtRandomNeverCorruptOrStallTheRing) {
  ScratchPath p;
  Ring ring = Ring::create(p, {.area_size = 1 << 16});
  std::atomic<bool> stop{false};
  Tally pinned_t, passive_t;
  std::thread pinned_th(reader_loop, Reader::attach(ring, {.kind = ReaderKind::pinned}), std::ref(pinned_t),
                        std::ref(stop));
  std::thread passive_th(reader_loop, Reader::open(p), std::ref(passive_t), std::ref(stop));

  std::mt19937 rng(12345);
  std::vector<pid_t> live;
  std::uint32_t spawn = 0;
  auto start_writer = [&] {
    pid_t pid = fork_child();
    if (pid == 0) writer_forever(p, spawn);
    ++spawn;
    live.push_back(pid);
  };
  for (unsigned i = 0; i < kLive; ++i) start_writer();
  for (int round = 0; round < kRounds; ++round) {
    // Kill at a random moment of the writers' work: after a random number of messages
    // more (the ring's count), not after a random time. The survivors keep writing:
    // no progress at all within the bound is a stall (a liveness bound, not a speed check).
    const std::uint64_t target = ring.stats().msgs_written + 1 + rng() % 2000;
    if (!test::wait_until([&] { return ring.stats().msgs_written >= target; }, 60s)) {
      RingStats s = ring.stats();
      Header& h = ring.header();
      auto* area = reinterpret_cast<std::uint8_t*>(&h) + format::kHeaderLen;
      std::string slots;
      for (auto& ws : h.writers)
        if (ws.pid.load()) slots += " w" + std::to_string(ws.pid.load()) + "@" + std::to_string(ws.inflight_pos.load());
      for (auto& rs : h.readers)
        if (rs.pid.load()) slots += " r" + std::to_string(rs.pid.load()) + "@" + std::to_string(rs.pos.load());
      FAIL() << "writers stalled after a kill (round " << round << "): head " << s.head << " tail " << s.tail
             << " locked " << s.locked << " owner " << std::hex << h.owner.load() << std::dec << " rc@head "
             << int(area[s.head % s.area_size]) << " rc@tail-1 " << int(area[(s.tail - 1) % s.area_size])
             << " dropped " << s.msgs_dropped << " recov " << s.lock_recoveries << " torn " << s.torn_discarded
             << " released " << s.readers_released << " slots" << slots;
    }
    std::size_t victim = rng() % live.size();
    ::kill(live[victim], SIGKILL);
    ::waitpid(live[victim], nullptr, 0);
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    start_writer();
  }

  for (pid_t pid : live) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  // Whatever the last victims left behind, the ring recovers and delivers a marker.
  // A marker is written until one goes in (a dead owner's lock is recovered first),
  // then both readers must see it.
  std::uint64_t markers = 0;
  bool marker_in = false;
  const bool marker_seen = test::wait_until([&] {
    if (!marker_in) marker_in = ring.write(make_stress(kMarker, markers++, 100)) == WriteStatus::ok;
    return pinned_t.markers > 0 && passive_t.markers > 0;
  }, 60s);
  stop = true;
  pinned_th.join();
  passive_th.join();
  RingStats st = ring.stats();
  std::printf("rounds %d: pinned saw %llu msgs, passive %llu (lost %llu bytes); lock recoveries %llu, "
              "torn batches discarded %llu, dead readers released %llu, dropped %llu\n",
              kRounds, (unsigned long long)pinned_t.msgs.load(), (unsigned long long)passive_t.msgs.load(),
              (unsigned long long)passive_t.lost.load(), (unsigned long long)st.lock_recoveries,
              (unsigned long long)st.torn_discarded, (unsigned long long)st.readers_released,
              (unsigned long long)st.msgs_dropped);
  EXPECT_TRUE(marker_seen) << "the ring did not recover: readers never saw the marker";
  EXPECT_EQ(pinned_t.torn, 0u);
  EXPECT_EQ(passive_t.torn, 0u);
  EXPECT_EQ(pinned_t.disorder, 0u);
  EXPECT_EQ(passive_t.disorder, 0u);
  EXPECT_EQ(pinned_t.lost, 0u);
  EXPECT_GT(pinned_t.msgs, 0u);
  EXPECT_GT(passive_t.msgs, 0u);
  EXPECT_FALSE(st.locked);
  // The file is still a valid ring.
  EXPECT_NO_THROW(Ring::open(p));
}

TEST(Crash, PinnedReaderKilledReleasesItsPin) {
  ScratchPath p;
  Ring ring = Ring::create(p, {.area_size = 8192});
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t pid = fork_child();
  if (pid == 0) {
    Reader rd = Reader::open(p, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
    char c = 1;
    if (::write(go[1], &c, 1) != 1) ::_exit(2);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(go[0], &c, 1), 1);
  EXPECT_EQ(ring.stats().pinned_readers, 1u);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  // Writers fill the ring: first blocked by the dead pin, then the periodic check
  // (every ~50 ms) releases it: writes go in again. A bounded poll on the write status.
  int ok_after = 0;
  EXPECT_TRUE(test::wait_until([&] {
    for (int i = 0; i < 100 && ok_after < 500; ++i) ok_after += ring.write(std::string(100, 'x')) == WriteStatus::ok;
    return ok_after >= 500;
  }, 60s)) << ok_after;
  EXPECT_EQ(ring.stats().readers_released, 1u);
  EXPECT_EQ(ring.stats().pinned_readers, 0u);
}
