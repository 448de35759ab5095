// A reader says where it stands without a look into the file's reader table: a pinned
// reader names its slot there, and its progress (position, tail, ring identity) is the
// position its slot holds, before and after it reads; a passive reader has no slot.
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;

TEST(ReaderProgress, PinnedReaderNamesItsSlotAndTheSlotHoldsItsPosition) {
  test::ScratchPath path("progress");
  Ring ring = Ring::create(path, {.area_size = 1 << 16});
  Reader a = Reader::attach(ring, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  Reader b = Reader::attach(ring, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  ASSERT_GE(a.slot(), 0);
  ASSERT_GE(b.slot(), 0);
  ASSERT_LT(a.slot(), int(format::kReaderSlots));
  EXPECT_NE(a.slot(), b.slot());
  const format::ReaderSlot& rs = ring.header().readers[a.slot()];
  EXPECT_EQ(rs.pid.load(), static_cast<std::uint32_t>(::getpid()));

  for (int i = 0; i < 3; ++i) ASSERT_EQ(ring.write("message " + std::to_string(i)), WriteStatus::ok);
  ReaderProgress p = a.progress();
  EXPECT_EQ(p.instance_id, ring.instance_id());
  EXPECT_EQ(p.area_size, ring.area_size());
  EXPECT_EQ(p.tail, ring.stats().tail);
  EXPECT_EQ(p.pos, rs.pos.load());
  EXPECT_EQ(p.unread(), a.behind());
  EXPECT_GT(p.unread(), 0u);
  EXPECT_DOUBLE_EQ(p.fill(), double(p.tail - p.pos) / double(p.area_size));

  std::vector<std::byte> buf;
  ASSERT_EQ(a.next(buf).status, ReadStatus::message);
  ReaderProgress q = a.progress();
  EXPECT_GT(q.pos, p.pos);
  EXPECT_EQ(q.pos, rs.pos.load()) << "the slot follows the reader";
  EXPECT_LT(q.unread(), p.unread());
  while (a.next(buf).status == ReadStatus::message) {
  }
  EXPECT_EQ(a.progress().unread(), 0u);
  EXPECT_EQ(a.progress().pos, rs.pos.load());
  EXPECT_EQ(b.progress().pos, p.pos) << "the other reader has not moved";
}

TEST(ReaderProgress, PassiveReaderHasNoSlot) {
  test::ScratchPath path("progress");
  Ring ring = Ring::create(path, {.area_size = 1 << 16});
  ASSERT_EQ(ring.write("one"), WriteStatus::ok);
  Reader r = Reader::open(path, {.kind = ReaderKind::passive, .start = StartAt::oldest});
  EXPECT_EQ(r.slot(), -1);
  EXPECT_EQ(r.progress().pos, r.position());
  EXPECT_EQ(r.progress().tail, ring.stats().tail);
  EXPECT_EQ(r.stats().pinned_readers, 0u);
}
