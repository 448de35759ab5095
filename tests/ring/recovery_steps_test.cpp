// The recovery steps of ringlog/repair.hpp on a ring file's bytes in memory (a copy of
// a real ring), judged by a fake liveness check: torn batches of dead writers become
// pads that readers skip, dead readers' pins are released, a dead lock holder's work
// is undone, implausible records are left alone, and headers are checked as open() does.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "ringlog/repair.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;
using namespace ringlog::format;
namespace rp = ringlog::repair;

namespace {

constexpr std::uint32_t kDeadPid = 4242, kLivePid = 4343;

// A ring's file bytes, 64-byte aligned in memory, with the positions of its messages.
struct Image {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  std::vector<std::uint64_t> pos;  // RC position of each message written
  ~Image() { std::free(data); }
  std::span<std::uint8_t> bytes() const { return {data, size}; }
  rp::View view() const {
    auto v = rp::View::of(bytes());
    EXPECT_TRUE(v.has_value());
    return *v;
  }
  Header& hdr() const { return *reinterpret_cast<Header*>(data); }
  std::uint64_t tail() const { return hdr().tail.load() & kPosMask; }
  // Writes the bytes to a file and reads every message there from the oldest.
  std::vector<std::string> read_back(const std::string& path) const {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
    Reader rd = Reader::open(path, {.kind = ReaderKind::passive, .start = StartAt::oldest});
    std::vector<std::string> out;
    std::vector<std::byte> buf;
    for (;;) {
      ReadResult r = rd.next(buf);
      if (r.status == ReadStatus::empty) return out;
      EXPECT_EQ(r.status, ReadStatus::message);
      out.emplace_back(reinterpret_cast<const char*>(buf.data()), buf.size());
    }
  }
};

void make_image(Image& img, unsigned messages) {
  test::ScratchPath path("recovery");
  {
    Ring ring = Ring::create(path, {.area_size = 1 << 16});
    for (unsigned i = 0; i < messages; ++i) ring.write("message " + std::to_string(i) + std::string(i * 7, 'x'));
  }
  Reader rd = Reader::open(path, {.kind = ReaderKind::passive, .start = StartAt::oldest});
  std::vector<std::byte> buf;
  for (ReadResult r; (r = rd.next(buf)).status == ReadStatus::message;) img.pos.push_back(r.pos);
  std::ifstream in(path.str(), std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  img.size = s.size();
  img.data = static_cast<std::uint8_t*>(std::aligned_alloc(64, (s.size() + 63) / 64 * 64));
  std::memcpy(img.data, s.data(), s.size());
}

// A liveness check that costs no system call: kDeadPid is dead, everyone else alive.
struct FakeLiveness {
  unsigned calls = 0;
  rp::Liveness fn() {
    return [this](std::uint32_t pid, std::uint64_t) {
      ++calls;
      return pid != kDeadPid;
    };
  }
};

// Marks messages [first, end of ring) as the in-flight batch of a writer.
void fake_inflight(Image& img, unsigned slot, std::uint32_t pid, unsigned first, std::uint8_t saved) {
  WriterSlot& ws = img.hdr().writers[slot];
  ws.pid = pid;
  ws.inflight_pos = img.pos[first] + 1;
  ws.inflight_end = img.tail();
  ws.saved_rc = saved;
  img.view().put(img.pos[first], kRcWriting);
}

}  // namespace

TEST(RecoverySteps, PadsFrameExactlyForEveryRoom) {
  std::vector<std::uint8_t> area(4096);
  const rp::View v{nullptr, area.data(), area.size()};
  for (std::uint64_t len = 2; len <= 3000; ++len) {
    for (std::uint64_t from : {std::uint64_t{0}, std::uint64_t{4096 * 3 - 7}}) {  // plain, and across the wrap
      std::fill(area.begin(), area.end(), 0xAB);
      const std::uint64_t to = from + len;
      v.put(from, 0);
      rp::write_pad(v, from, to);
      std::uint64_t p = from;
      while (p < to) {
        ASSERT_EQ(v.byte(p), 0) << "len " << len << " at " << p;
        std::uint64_t word = 0;
        std::size_t vl = varint_decode([&](std::size_t i) { return v.byte(p + 1 + i); }, kVarintMax, word);
        ASSERT_NE(vl, 0u) << "len " << len;
        ASSERT_EQ(word & kKindMask, std::uint64_t(MsgKind::pad)) << "len " << len;
        for (std::uint64_t i = 0; i < (word >> kKindBits); ++i) ASSERT_EQ(v.byte(p + 1 + vl + i), 0);
        p += 1 + vl + (word >> kKindBits);
      }
      ASSERT_EQ(p, to) << "len " << len << ": the pads must end exactly where asked";
      ASSERT_EQ(v.byte(to), 0xAB) << "the byte at the end belongs to the next message";
    }
  }
}

TEST(RecoverySteps, TornBatchOfADeadWriterBecomesPadsThatReadersSkip) {
  Image img;
  make_image(img, 6);
  fake_inflight(img, 7, kDeadPid, 3, 0);
  FakeLiveness alive;
  rp::DeadCheck r = rp::recover_dead(img.view(), alive.fn());
  EXPECT_EQ(r.torn_discarded, 1u);
  EXPECT_EQ(r.writers_freed, 1u);
  EXPECT_GT(alive.calls, 0u);
  EXPECT_EQ(img.hdr().writers[7].pid.load(), 0u);
  EXPECT_EQ(img.hdr().writers[7].inflight_pos.load(), 0u);
  EXPECT_EQ(img.hdr().torn_discarded.load(), 1u);
  EXPECT_EQ(img.view().byte(img.pos[3]), 0) << "the saved readers count is back";
  test::ScratchPath copy("recovered");
  std::vector<std::string> msgs = img.read_back(copy);
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[2], "message 2" + std::string(14, 'x'));
}

TEST(RecoverySteps, BatchOfALiveWriterIsLeftAlone) {
  Image img;
  make_image(img, 6);
  fake_inflight(img, 7, kLivePid, 3, 0);
  std::vector<std::uint8_t> before(img.data, img.data + img.size);
  FakeLiveness alive;
  rp::DeadCheck r = rp::recover_dead(img.view(), alive.fn());
  EXPECT_EQ(r.torn_discarded + r.writers_freed + r.readers_released, 0u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), img.data));
}

TEST(RecoverySteps, ImplausibleBatchRecordChangesNoByteOfTheArea) {
  Image img;
  make_image(img, 6);
  const rp::View v = img.view();
  // A batch of no bytes at all (end == x + 2): nothing to pad; a record past the tail;
  // and one whose position wraps around 2^64.
  WriterSlot& ws = img.hdr().writers[2];
  ws.pid = kDeadPid;
  ws.inflight_pos = img.pos[4] + 1;
  ws.inflight_end = img.pos[4] + 2;
  v.put(img.pos[4], kRcWriting);
  EXPECT_TRUE(rp::inflight_batch(img.hdr(), 2, 0, img.tail()).has_value());
  EXPECT_FALSE(rp::discard_torn(v, *rp::inflight_batch(img.hdr(), 2, 0, img.tail())));
  WriterSlot& past = img.hdr().writers[3];
  past.inflight_pos = img.pos[1] + 1;
  past.inflight_end = img.tail() + 1;
  EXPECT_FALSE(rp::inflight_batch(img.hdr(), 3, 0, img.tail()).has_value());
  past.inflight_pos = ~std::uint64_t{0};
  past.inflight_end = 5;
  EXPECT_FALSE(rp::inflight_batch(img.hdr(), 3, 0, img.tail()).has_value());
  std::vector<std::uint8_t> area(v.area, v.area + v.size);
  FakeLiveness alive;
  rp::DeadCheck r = rp::recover_dead(v, alive.fn());
  EXPECT_EQ(r.torn_discarded, 0u);
  EXPECT_EQ(r.writers_freed, 1u) << "the dead writer's slot is freed all the same";
  EXPECT_TRUE(std::equal(area.begin(), area.end(), v.area));
}

TEST(RecoverySteps, DeadReadersPinIsReleased) {
  Image img;
  make_image(img, 4);
  const rp::View v = img.view();
  ReaderSlot& rs = img.hdr().readers[3];
  rs.pid = kDeadPid;
  rs.pos = img.pos[1];
  v.put(img.pos[1], 1);
  img.hdr().pinned = 1;
  FakeLiveness alive;
  rp::DeadCheck r = rp::recover_dead(v, alive.fn());
  EXPECT_EQ(r.readers_released, 1u);
  EXPECT_EQ(v.byte(img.pos[1]), 0);
  EXPECT_EQ(img.hdr().pinned.load(), 0u);
  EXPECT_EQ(rs.pid.load(), 0u);
  EXPECT_EQ(rs.pos.load(), kNoPos);
  EXPECT_EQ(img.hdr().readers_released.load(), 1u);
}

TEST(RecoverySteps, DeadReaderWhoseByteAWriterHoldsIsLeftForTheNextCheck) {
  Image img;
  make_image(img, 4);
  const rp::View v = img.view();
  ReaderSlot& rs = img.hdr().readers[0];
  rs.pid = kDeadPid;
  rs.pos = img.pos[2];
  v.put(img.pos[2], kRcWriting);
  FakeLiveness alive;
  rp::DeadCheck r = rp::recover_dead(v, alive.fn());
  EXPECT_EQ(r.readers_released, 0u);
  EXPECT_EQ(r.readers_busy, 1u);
  EXPECT_EQ(rs.pid.load(), kDeadPid);
  EXPECT_EQ(v.byte(img.pos[2]), kRcWriting);
}

TEST(RecoverySteps, CountAtHeadThatNoReaderHoldsIsReset) {
  Image img;
  make_image(img, 4);
  const rp::View v = img.view();
  v.put(img.hdr().head.load(), 2);
  FakeLiveness alive;
  EXPECT_TRUE(rp::recover_dead(v, alive.fn()).head_recounted);
  EXPECT_EQ(v.byte(img.hdr().head.load()), 0);
  // Held by a registered reader: kept.
  v.put(img.hdr().head.load(), 1);
  img.hdr().readers[5].pid = kLivePid;
  img.hdr().readers[5].pos = img.hdr().head.load();
  EXPECT_FALSE(rp::recover_dead(v, alive.fn()).head_recounted);
  EXPECT_EQ(v.byte(img.hdr().head.load()), 1);
}

TEST(RecoverySteps, DeadLockHoldersWorkIsUndone) {
  Image img;
  make_image(img, 4);
  const rp::View v = img.view();
  const std::uint64_t t = img.tail();
  img.hdr().writers[5].pid = kDeadPid;
  img.hdr().writers[5].inflight_pos = 99;
  img.hdr().owner_saved_rc = 2;
  v.put(t - 1, kRcWriting);
  FakeLiveness alive;
  rp::LockOwner o = rp::lock_owner(img.hdr(), owner_word(kDeadPid, 5), alive.fn());
  EXPECT_EQ(o.pid, kDeadPid);
  EXPECT_EQ(o.slot, 5);
  EXPECT_FALSE(o.alive);
  EXPECT_EQ(rp::lock_owner(img.hdr(), owner_word(kLivePid, 5), {}).alive, false) << "no liveness: decode only";
  EXPECT_TRUE(rp::undo_dead_lock(v, t, o, img.hdr().owner_saved_rc.load()));
  EXPECT_EQ(v.byte(t - 1), 2);
  EXPECT_EQ(img.hdr().writers[5].pid.load(), 0u);
  EXPECT_EQ(img.hdr().writers[5].inflight_pos.load(), 0u);
  EXPECT_EQ(img.hdr().owner_saved_rc.load(), kRcNotRecorded);
  EXPECT_EQ(img.hdr().lock_recoveries.load(), 1u);
  EXPECT_NE(img.hdr().owner_since_ns.load(), 0u);
  // Nothing hidden at the tail: nothing to restore, the recovery is counted anyway.
  EXPECT_FALSE(rp::undo_dead_lock(v, t, o, 0));
  EXPECT_EQ(img.hdr().lock_recoveries.load(), 2u);
}

TEST(RecoverySteps, HeaderCheckSaysWhatOpenWouldSay) {
  Image img;
  make_image(img, 2);
  EXPECT_EQ(rp::check_header(img.bytes()), "");
  EXPECT_EQ(rp::check_header(img.bytes().first(100)), "file is 100 bytes, smaller than a ring header (24576)");
  std::string why;
  EXPECT_FALSE(rp::View::of(img.bytes().first(img.size - 1), &why).has_value());
  EXPECT_NE(why.find("inconsistent sizes"), std::string::npos) << why;
  img.hdr().head = img.tail() + 5;
  auto v = rp::View::of(img.bytes(), &why);
  ASSERT_TRUE(v.has_value()) << "damaged positions leave the file readable";
  EXPECT_EQ(why.rfind("damaged positions", 0), 0u) << why;
  EXPECT_EQ(v->size, img.hdr().area_size);
  img.hdr().magic = 0;
  EXPECT_FALSE(rp::View::of(img.bytes(), &why).has_value());
  EXPECT_EQ(why.rfind("bad magic", 0), 0u) << why;
}
