// A batch that does not fit because reclaim meets a writer still copying (its RC byte
// 0xFF at head: it was descheduled while the others lapped the ring) waits for that
// writer instead of dropping, for a bounded time per position; a reader in the way is
// never waited for. The copying writer is played by hand: the test sets and clears
// the RC byte at head.
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "observe.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;
using ringlog::test::ScratchPath;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kArea = 8192;

// Fills the ring once around with 100-byte messages: the next write must reclaim.
void fill(Ring& r) {
  std::string msg(100, 'm');
  while (r.stats().tail < 2 * kArea) ASSERT_EQ(r.write(msg), WriteStatus::ok);
}

// The RC byte at the ring's head, as a writer still copying the message there holds it.
std::atomic_ref<std::uint8_t> rc_at_head(Ring& r) {
  auto& h = r.header();
  auto* area = reinterpret_cast<std::uint8_t*>(&h) + h.header_len;
  return std::atomic_ref<std::uint8_t>(area[r.stats().head % kArea]);
}

// 200 bytes never fit in the room a 100-byte message's reclaim leaves over.
const std::string kBig(200, 'w');

}  // namespace

TEST(WriterWait, WaitsForAWriterStillCopyingInsteadOfDropping) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = kArea}, {.writer_wait = 600s});
  fill(r);
  auto rc = rc_at_head(r);
  ASSERT_EQ(rc.load(), 0);
  rc.store(format::kRcWriting);
  std::atomic<int> result{-1};
  std::thread w([&] { result.store(static_cast<int>(r.write(kBig))); });
  ringlog::test::wait_until([&] { return r.stats().writer_waits != 0; });
  ASSERT_EQ(r.stats().writer_waits, 1u) << "the write never waited";
  EXPECT_EQ(result.load(), -1) << "the write returned while the writer was still copying";
  rc.store(0);  // that writer is done: the waiting batch fits now
  w.join();
  EXPECT_EQ(result.load(), static_cast<int>(WriteStatus::ok));
  EXPECT_EQ(r.stats().msgs_dropped, 0u);
}

TEST(WriterWait, DropsOnceTheWaitIsOverAndThenAtOnceForThatPosition) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = kArea}, {.writer_wait = 5ms});
  fill(r);
  auto rc = rc_at_head(r);
  rc.store(format::kRcWriting);  // a writer that never finishes (stopped, or dead)
  EXPECT_EQ(r.write(kBig), WriteStatus::dropped);
  EXPECT_EQ(r.stats().writer_waits, 1u);
  EXPECT_EQ(r.write(kBig), WriteStatus::dropped);
  EXPECT_EQ(r.stats().writer_waits, 1u) << "waited again for a writer already waited for";
  EXPECT_EQ(r.stats().msgs_dropped, 2u);
  rc.store(0);
  EXPECT_EQ(r.write(kBig), WriteStatus::ok);
}

TEST(WriterWait, NoWaitConfiguredDropsAtOnce) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = kArea}, {.writer_wait = 0ms});
  fill(r);
  rc_at_head(r).store(format::kRcWriting);
  EXPECT_EQ(r.write(kBig), WriteStatus::dropped);
  EXPECT_EQ(r.stats().writer_waits, 0u);
}

TEST(WriterWait, APinnedReaderInTheWayIsNeverWaitedFor) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = kArea}, {.writer_wait = 600s});
  Reader rd = Reader::attach(r, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  std::string msg(100, 'm');
  unsigned dropped = 0;
  for (int i = 0; i < 200; ++i) dropped += r.write(msg) == WriteStatus::dropped ? 1 : 0;
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(r.stats().writer_waits, 0u);
}

TEST(WriterWait, NegativeWaitIsRefused) {
  ScratchPath p;
  try {
    Ring::create(p, {.area_size = kArea}, {.writer_wait = -1ms});
    FAIL() << "a negative writer wait was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_arg);
  }
}
