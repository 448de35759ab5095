// OpenOptions::reader_wait bounds how long a pinned reader waits for a batch in flight
// (RC byte 0xFF) where it attaches or moves to; 0 means not at all, for a ring nobody
// else writes to. The batch in flight is played by hand: the test sets the RC byte.
#include <atomic>
#include <chrono>
#include <vector>

#include <gtest/gtest.h>

#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;
using ringlog::test::ScratchPath;
using namespace std::chrono_literals;

namespace {

std::atomic_ref<std::uint8_t> rc_at(Ring& r, std::uint64_t pos) {
  auto& h = r.header();
  auto* area = reinterpret_cast<std::uint8_t*>(&h) + h.header_len;
  return std::atomic_ref<std::uint8_t>(area[pos % h.area_size]);
}

TEST(ReaderWait, NoWaitAttachFailsAtAHeldPosition) {
  ScratchPath path;
  Ring::create(path, {.area_size = 4096, .mode = 0600});
  Ring ring = Ring::open(path, {.reader_wait = 0ms});
  ASSERT_EQ(ring.write("one"), WriteStatus::ok);
  auto rc = rc_at(ring, ring.stats().tail - 1);
  rc.store(format::kRcWriting);
  try {
    Reader::attach(ring, {.kind = ReaderKind::pinned, .start = StartAt::tail});
    FAIL() << "attached at a position a writer holds";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::busy);
  }
  rc.store(0);
  EXPECT_NO_THROW(Reader::attach(ring, {.kind = ReaderKind::pinned, .start = StartAt::tail}));
}

TEST(ReaderWait, NoWaitReaderStopsBeforeAHeldPosition) {
  ScratchPath path;
  Ring::create(path, {.area_size = 4096, .mode = 0600});
  Ring ring = Ring::open(path, {.reader_wait = 0ms});
  Reader pin = Reader::attach(ring, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  ASSERT_EQ(ring.write("one"), WriteStatus::ok);
  ASSERT_EQ(ring.write("two"), WriteStatus::ok);
  std::uint64_t second = ring.stats().tail - 1 - (1 + 1 + 3);  // RC byte of "two"
  auto rc = rc_at(ring, second);
  rc.store(format::kRcWriting);  // as if "two" were still being copied
  std::vector<std::byte> buf;
  EXPECT_EQ(pin.next(buf).status, ReadStatus::empty);  // cannot move past "one" yet
  EXPECT_EQ(pin.position(), second - (1 + 1 + 3));
  rc.store(0);
  EXPECT_EQ(pin.next(buf).status, ReadStatus::message);
  EXPECT_EQ(pin.next(buf).status, ReadStatus::message);
  EXPECT_EQ(pin.next(buf).status, ReadStatus::empty);
}

TEST(ReaderWait, NegativeRefused) {
  ScratchPath path;
  Ring::create(path, {.area_size = 4096, .mode = 0600});
  EXPECT_THROW(Ring::open(path, {.reader_wait = -1ms}), Error);
}

}  // namespace
