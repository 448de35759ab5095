// Single-process behaviour of the ring: framing, wrap-around, full ring, drops and
// their in-band notice, size limits, truncation, pinned and passive readers, wake-ups,
// and the recovery paths driven by hand (dead reader, torn batch, dead lock owner).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "observe.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;
using namespace ringlog::format;
using ringlog::test::ScratchPath;
using namespace std::chrono_literals;

namespace {

std::string as_string(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Drains every message a reader can see now.
std::vector<std::string> drain(Reader& rd, std::vector<ReadResult>* events = nullptr) {
  std::vector<std::string> out;
  std::vector<std::byte> buf;
  for (;;) {
    ReadResult r = rd.next(buf);
    if (r.status == ReadStatus::empty) break;
    if (events) events->push_back(r);
    if (r.status == ReadStatus::message) out.push_back((r.kind == MsgKind::notice ? "NOTICE:" : "") + as_string(buf));
  }
  return out;
}

pid_t dead_pid() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  ::waitpid(p, nullptr, 0);
  return p;
}

}  // namespace

TEST(WriteRead, MessagesComeBackInOrder) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  EXPECT_TRUE(drain(rd).empty());
  EXPECT_EQ(r.write("hello"), WriteStatus::ok);
  EXPECT_EQ(r.write(""), WriteStatus::ok);
  std::string big(1000, 'x');
  EXPECT_EQ(r.write(big), WriteStatus::ok);
  auto got = drain(rd);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], "hello");
  EXPECT_EQ(got[1], "");
  EXPECT_EQ(got[2], big);
  RingStats s = r.stats();
  EXPECT_EQ(s.msgs_written, 3u);
  EXPECT_EQ(s.msgs_dropped, 0u);
  EXPECT_FALSE(s.locked);
}

TEST(WriteRead, GatheredPartsFormOneMessage) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  char a[] = "abc", b[] = "defgh";
  iovec parts[] = {{a, 3}, {b, 5}, {a, 0}};
  EXPECT_EQ(r.writev(parts), WriteStatus::ok);
  auto got = drain(rd);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "abcdefgh");
}

// Every payload length up to 320 bytes, split into three parts at several places (so
// that each part goes through each of the copy's size classes, empty parts included),
// comes back byte for byte, over a ring that wraps several times.
TEST(WriteRead, PartsOfEveryLengthComeBackExactly) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 1 << 16});
  Reader rd = Reader::attach(r, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  std::string src(400, '\0');
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>('!' + (i * 7) % 90);
  std::vector<std::byte> buf;
  for (std::size_t len = 0; len <= 320; ++len)
    for (std::size_t c : {std::size_t{0}, std::size_t{1}, len / 3, len / 2, std::size_t{82}, len}) {
      const std::size_t cut = std::min(c, len), cut2 = cut + (len - cut) / 2;
      iovec parts[] = {{src.data(), cut}, {src.data() + cut + 1, cut2 - cut}, {src.data() + 5, len - cut2}};
      ASSERT_EQ(r.writev(parts), WriteStatus::ok) << len << " " << cut;
      std::string want = src.substr(0, cut) + src.substr(cut + 1, cut2 - cut) + src.substr(5, len - cut2);
      ReadResult got = rd.next(buf);
      ASSERT_EQ(got.status, ReadStatus::message) << len << " " << cut;
      ASSERT_EQ(as_string(buf), want) << len << " " << cut;
    }
  EXPECT_EQ(r.stats().msgs_dropped, 0u);
}

TEST(WriteRead, TailStartSkipsOldMessages) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  r.write("old");
  Reader passive = Reader::open(p);
  Reader pinned = Reader::attach(r, {.kind = ReaderKind::pinned});
  r.write("new");
  EXPECT_EQ(drain(passive), std::vector<std::string>{"new"});
  EXPECT_EQ(drain(pinned), std::vector<std::string>{"new"});
}

TEST(WriteRead, WrapsAroundManyTimes) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 4096});
  Reader rd = Reader::attach(r, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  std::uint64_t expect = 0;
  for (std::uint64_t i = 0; i < 20000; ++i) {
    std::string s = ringlog::test::make_stress(1, i, 20 + i % 300);
    ASSERT_EQ(r.write(s), WriteStatus::ok) << i;
    if (i % 3 == 0) {
      for (auto& m : drain(rd)) {
        ringlog::test::StressMsg sm;
        ASSERT_TRUE(ringlog::test::check_stress(m.data(), m.size(), sm));
        ASSERT_EQ(sm.seq, expect++);
      }
    }
  }
  for (auto& m : drain(rd)) {
    ringlog::test::StressMsg sm;
    ASSERT_TRUE(ringlog::test::check_stress(m.data(), m.size(), sm));
    ASSERT_EQ(sm.seq, expect++);
  }
  EXPECT_EQ(expect, 20000u);
  EXPECT_GT(r.stats().tail, 10 * 4096u);  // absolute positions kept counting
}

TEST(FullRing, PinnedReaderMakesWritersDropAndCount) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 4096});
  Reader rd = Reader::attach(r, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  std::string m(100, 'm');
  int ok = 0, dropped = 0;
  for (int i = 0; i < 100; ++i) {
    WriteStatus s = r.write(m);
    if (s == WriteStatus::ok) ++ok;
    if (s == WriteStatus::dropped) ++dropped;
  }
  EXPECT_GT(ok, 30);
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(ok + dropped, 100);
  RingStats s = r.stats();
  EXPECT_EQ(s.msgs_dropped, static_cast<std::uint64_t>(dropped));
  EXPECT_EQ(s.msgs_written, static_cast<std::uint64_t>(ok));
  // The pinned reader lost nothing that was accepted.
  auto got = drain(rd);
  EXPECT_EQ(got.size(), static_cast<std::size_t>(ok));
  // The next successful writer announces the drops in-band.
  EXPECT_EQ(r.write("after"), WriteStatus::ok);
  got = drain(rd);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], "after");
  EXPECT_EQ(got[0], "NOTICE:ringlog: " + std::to_string(dropped) + " messages (" +
                        std::to_string(dropped * (1 + 2 + 100)) + " bytes) dropped");
  // Announced once only.
  r.write("again");
  EXPECT_EQ(drain(rd), std::vector<std::string>{"again"});
}

TEST(FullRing, WithoutPinnedReadersOldMessagesAreOverwritten) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 4096});
  Reader passive = Reader::open(p, {.start = StartAt::oldest});
  std::string m(100, 'm');
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(r.write(m), WriteStatus::ok);
  std::vector<ReadResult> ev;
  auto got = drain(passive, &ev);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev[0].status, ReadStatus::lost);
  // Exactly the bytes that were overwritten: every message is 103 bytes.
  RingStats s = r.stats();
  EXPECT_EQ(ev[0].lost, s.head);
  EXPECT_EQ(passive.lost_bytes(), s.head);
  EXPECT_EQ((s.head + got.size() * 103), s.tail - 1);
  EXPECT_EQ(r.stats().msgs_dropped, 0u);
}

TEST(Limits, MaxPayloadFitsAndOneMoreIsRefused) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 4096});
  std::uint64_t maxp = r.max_payload();
  EXPECT_GT(maxp, 4000u);
  EXPECT_LT(maxp, 4096u);
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  std::string almost(maxp, 'A');
  EXPECT_EQ(r.write(almost), WriteStatus::ok);
  EXPECT_EQ(drain(rd), std::vector<std::string>{almost});
  // A message that almost fills the ring, written again and again (reclaims everything).
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r.write(almost), WriteStatus::ok);
  std::string over(maxp + 1, 'B');
  EXPECT_EQ(r.write(over), WriteStatus::too_big);
  EXPECT_EQ(r.stats().msgs_refused, 1u);
  EXPECT_STRNE(to_string(WriteStatus::too_big), "");
  // Near-full sizes around the boundary never corrupt the ring.
  for (std::uint64_t n = maxp - 40; n <= maxp; ++n) EXPECT_EQ(r.write(std::string(n, 'c')), WriteStatus::ok);
  Reader tail = Reader::open(p, {.start = StartAt::oldest});
  auto got = drain(tail);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].size(), maxp);
}

TEST(Limits, AlmostFullRingWithPinnedReaderDropsInsteadOfUnderflowing) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 4096});
  Reader rd = Reader::attach(r, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  std::uint64_t maxp = r.max_payload();
  EXPECT_EQ(r.write(std::string(maxp - 10, 'a')), WriteStatus::ok);
  // Free space is ~10 bytes: everything larger must drop, nothing may wrap onto the reader.
  for (std::size_t n : {9u, 10u, 11u, 20u, 100u, 4000u}) EXPECT_EQ(r.write(std::string(n, 'b')), WriteStatus::dropped) << n;
  auto got = drain(rd);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::string(maxp - 10, 'a'));
}

TEST(Limits, ConfiguredMaximumTruncatesExplicitly) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192, .max_msg_len = 10});
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  EXPECT_EQ(r.write("0123456789"), WriteStatus::ok);
  EXPECT_EQ(r.write("0123456789ABC"), WriteStatus::truncated);
  char a[] = "01234", b[] = "56789XYZ";
  iovec parts[] = {{a, 5}, {b, 8}};
  EXPECT_EQ(r.writev(parts), WriteStatus::truncated);
  auto got = drain(rd);
  EXPECT_EQ(got, (std::vector<std::string>{"0123456789", "0123456789", "0123456789"}));
  EXPECT_EQ(r.stats().msgs_truncated, 2u);
}

TEST(Readers, PinnedReaderWaitsOnTheFutex) {
  // Seen from /proc, not inferred from a time: the reader thread sleeps (state S) in
  // futex(2) on the ring's futex word, counted in the header's waiters, until a write
  // bumps the word and wakes it.
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  Reader rd = Reader::attach(r, {.kind = ReaderKind::pinned});
  std::atomic<pid_t> tid{0};
  std::string got;
  std::thread reader([&] {
    tid = test::this_tid();
    std::vector<std::byte> buf;
    while (rd.next(buf).status == ReadStatus::empty) rd.wait(60s);
    got = as_string(buf);
  });
  const auto word = reinterpret_cast<std::uintptr_t>(&rd.header().futex);
  const bool asleep = test::wait_until([&] {
    test::BlockedCall c;
    const pid_t t = tid.load();
    return t && rd.header().waiters.load() == 1 && test::thread_state(t) == 'S' && test::blocked_call(t, &c) &&
           c.nr == SYS_futex && c.arg0 == word;
  });
  const std::uint32_t seq = rd.header().futex.load();
  r.write("wake");
  reader.join();
  EXPECT_TRUE(asleep) << "the reader never slept in futex(2) on the ring's futex word";
  EXPECT_EQ(got, "wake");
  EXPECT_NE(rd.header().futex.load(), seq) << "the write did not bump the futex word";
  EXPECT_EQ(rd.header().waiters.load(), 0u);
}

TEST(Readers, PassiveReaderPollsUntilTimeout) {
  // Nothing to read: the wait lasts its timeout (a lower bound only) and sleeps more
  // than once on the way (it polls: a passive reader may not ask to be woken). Data
  // there: it returns without blocking at all (no voluntary context switch).
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  Reader rd = Reader::open(p);
  const long before = test::voluntary_switches();
  const auto t0 = std::chrono::steady_clock::now();
  rd.wait(300ms);
  const auto waited = std::chrono::steady_clock::now() - t0;
  const long sleeps = test::voluntary_switches() - before;
  EXPECT_GE(waited, 300ms) << "returned before its timeout with nothing to read";
  EXPECT_GE(sleeps, 2) << "a passive reader polls: more than one sleep";
  EXPECT_EQ(rd.header().waiters.load(), 0u) << "a passive reader never counts itself as a futex waiter";
  r.write("x");
  const long before_data = test::voluntary_switches();
  rd.wait(std::chrono::hours(1));  // had it blocked, ctest's timeout would fail the test
  EXPECT_EQ(test::voluntary_switches() - before_data, 0) << "it blocked although data was there";
  EXPECT_EQ(drain(rd), std::vector<std::string>{"x"});
  EXPECT_EQ(rd.behind(), 0u);
}

TEST(Readers, PinnedReadersOccupyAndFreeSlots) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  {
    Reader a = Reader::attach(r, {.kind = ReaderKind::pinned});
    Reader b = Reader::open(p, {.kind = ReaderKind::pinned});
    EXPECT_EQ(r.stats().pinned_readers, 2u);
    EXPECT_EQ(r.header().pinned.load(), 2u);
  }
  EXPECT_EQ(r.stats().pinned_readers, 0u);
  EXPECT_EQ(r.header().pinned.load(), 0u);  // writers take the plain-store path again
  // Their pins are gone: the ring can be filled again and again.
  for (int i = 0; i < 200; ++i) ASSERT_EQ(r.write(std::string(100, 'z')), WriteStatus::ok);
}

TEST(Recovery, DeadPinnedReaderIsReleased) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 4096});
  Reader rd = Reader::attach(r, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  // Pretend the reader's process died: its slot names a dead pid.
  Header& h = r.header();
  int slot = -1;
  for (unsigned i = 0; i < kReaderSlots; ++i)
    if (h.readers[i].pid.load() == static_cast<std::uint32_t>(::getpid())) slot = static_cast<int>(i);
  ASSERT_GE(slot, 0);
  h.readers[slot].pid.store(static_cast<std::uint32_t>(dead_pid()));
  int dropped = 0;
  for (int i = 0; i < 100; ++i) dropped += r.write(std::string(100, 'q')) == WriteStatus::dropped;
  EXPECT_GT(dropped, 0);  // blocked at first...
  r.check_dead();
  EXPECT_EQ(r.stats().readers_released, 1u);
  EXPECT_EQ(h.pinned.load(), 0u);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(r.write(std::string(100, 'q')), WriteStatus::ok);  // ...then free
}

TEST(Recovery, TornBatchOfADeadWriterIsDiscarded) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  r.write("before");
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  Reader pin = Reader::attach(r, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  // Forge what a writer killed in the middle of its copy leaves behind: the tail
  // advanced over its batch, 0xFF at the batch's RC byte, garbage inside, and its
  // writer slot recording the batch.
  Header& h = r.header();
  std::uint64_t t = h.tail.load();
  auto* area = reinterpret_cast<std::uint8_t*>(&h) + kHeaderLen;
  for (std::uint64_t len : {1ull, 2ull, 61ull, 62ull, 300ull}) {
    t = h.tail.load();
    std::uint64_t end = t + len + 1;
    area[(t - 1) % 8192] = kRcWriting;
    for (std::uint64_t i = t; i < end - 1; ++i) area[i % 8192] = 0xEE;
    area[(end - 1) % 8192] = 0;
    WriterSlot& ws = h.writers[200];
    ws.start_time = 1;
    ws.saved_rc.store(0);
    ws.inflight_end.store(end);
    ws.inflight_pos.store(t);
    ws.pid.store(static_cast<std::uint32_t>(dead_pid()));
    h.tail.store(end);
    // Readers stop at the 0xFF: "after" stays invisible until recovery, which the
    // writer itself may already do (its periodic dead-process check, every ~50 ms).
    std::uint64_t torn_before = r.stats().torn_discarded;
    r.write("after");
    auto seen = drain(rd);
    bool visible = std::find(seen.begin(), seen.end(), "after") != seen.end();
    EXPECT_EQ(visible, r.stats().torn_discarded == torn_before + 1) << len;
    r.check_dead();
    if (!visible) {
      EXPECT_EQ(drain(rd), std::vector<std::string>{"after"}) << len;
    }
    EXPECT_EQ(r.stats().torn_discarded, torn_before + 1) << len;
    EXPECT_EQ(ws.pid.load(), 0u);
  }
  EXPECT_EQ(r.stats().torn_discarded, 5u);
  auto pinned = drain(pin);
  EXPECT_EQ(pinned.size(), 6u);
  EXPECT_EQ(pinned.front(), "before");
}

TEST(Recovery, TailLockOfADeadOwnerIsRecovered) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  r.write("one");
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  Header& h = r.header();
  // A dead process holds the lock and had hidden the tail RC byte.
  std::uint64_t t = h.tail.load();
  auto* area = reinterpret_cast<std::uint8_t*>(&h) + kHeaderLen;
  area[(t - 1) % 8192] = kRcWriting;
  h.owner_saved_rc.store(0);
  h.owner.store(owner_word(static_cast<std::uint32_t>(dead_pid()), 7));
  h.tail.store(t | kTailLock);
  EXPECT_TRUE(r.stats().locked);
  // A writer waits a bounded time, finds the owner dead, recovers and writes.
  EXPECT_EQ(r.write("two"), WriteStatus::ok);
  EXPECT_EQ(drain(rd), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(r.stats().lock_recoveries, 1u);
  EXPECT_FALSE(r.stats().locked);
}

TEST(Recovery, TailLockOfAnUnrecordedDeadOwnerIsRecoveredAfterALongerWait) {
  // The owner died between taking the lock and recording itself: the owner word is 0.
  // Writers wait longer (about a second), see that a registered writer is dead, recover.
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  r.write("one");
  Header& h = r.header();
  pid_t dead = dead_pid();
  WriterSlot& ws = h.writers[100];
  ws.start_time = 1;
  ws.pid.store(static_cast<std::uint32_t>(dead));
  std::uint64_t t = h.tail.load();
  h.owner.store(0);
  h.tail.store(t | kTailLock);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(r.write("two"), WriteStatus::ok);
  // The longer wait itself: a lower bound only (about a second, never an upper bound).
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms) << "recovered without the longer wait";
  EXPECT_EQ(r.stats().lock_recoveries, 1u);
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  EXPECT_EQ(drain(rd), (std::vector<std::string>{"one", "two"}));
}

TEST(Recovery, AnUnrecordedOwnersWaitStartsAgainAfterARecovery) {
  // A recovery unlocks at the position it found, so the next writer locks the tail at
  // the same value, and until its L2 the owner word reads 0. A writer whose
  // second-long wait for an unrecorded owner began before that recovery must not take
  // this new lock over at once, as if the wait were for it: it waits again (D9).
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  r.write("one");
  Header& h = r.header();
  pid_t dead = dead_pid();
  WriterSlot& ws = h.writers[100];
  const std::uint64_t t = h.tail.load();
  auto lock_unrecorded = [&] {  // a dead registered writer; the lock at t, owner 0
    ws.start_time = 1;
    ws.pid.store(static_cast<std::uint32_t>(dead));
    h.owner.store(0);
    h.tail.store(t | kTailLock);
  };
  lock_unrecorded();
  EXPECT_EQ(r.write("two"), WriteStatus::ok);  // this thread waits, recovers, writes
  EXPECT_EQ(r.stats().lock_recoveries, 1u);
  // The same locked value again, owner 0: the live writer of the race above, seen
  // between its L1 and L2 (here it never records itself, so a recovery does follow).
  lock_unrecorded();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(r.write("three"), WriteStatus::ok);
  // Without D9 the old wait counts and the lock is taken within the 20 ms suspicion
  // delay; with it, a whole new wait. A lower bound only, never an upper bound.
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms) << "took over a lock it had not waited for";
  EXPECT_EQ(r.stats().lock_recoveries, 2u);
}
