// A ring over caller memory (Ring::open_memory, Reader::open_memory): checked as a file
// is, then written and read in place like a mapped ring; a bad or misaligned image is
// refused with an Error.
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;

namespace {

constexpr std::size_t kArea = 4096;
constexpr std::align_val_t kAlign{alignof(format::Header)};

// A ring file's image, copied from a ring created on disk.
struct Image {
  std::size_t n = format::kHeaderLen + kArea;
  std::byte* p = static_cast<std::byte*>(::operator new(n + 64, kAlign));
  Image() {
    test::ScratchPath path;
    Ring r = Ring::create(path, {.area_size = kArea, .mode = 0600});
    std::memcpy(p, &r.header(), n);
  }
  ~Image() { ::operator delete(p, kAlign); }
  std::span<std::byte> bytes(std::size_t skip = 0) const { return {p + skip, n}; }
};

std::string text(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

TEST(RingInMemory, WritesAndReadsInPlace) {
  Image img;
  Ring ring = Ring::open_memory(img.bytes());
  EXPECT_EQ(ring.area_size(), kArea);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(ring.write("message " + std::to_string(i)), WriteStatus::ok);
  Reader pin = Reader::attach(ring, {.kind = ReaderKind::pinned, .start = StartAt::oldest});
  Reader passive = Reader::open_memory(img.bytes(), {.start = StartAt::oldest});
  EXPECT_FALSE(passive.stale());
  std::vector<std::byte> buf;
  // 200 messages of ~12 bytes went around a 4 KiB ring: the oldest are gone.
  ReadResult r = passive.next(buf);
  ASSERT_EQ(r.status, ReadStatus::message);
  std::string first = text(buf);
  ReadResult p = pin.next(buf);
  ASSERT_EQ(p.status, ReadStatus::message);
  EXPECT_EQ(text(buf), first);
  std::string last;
  while (passive.next(buf).status == ReadStatus::message) last = text(buf);
  EXPECT_EQ(last, "message 199");
  EXPECT_EQ(ring.stats().msgs_written, 200u);
}

TEST(RingInMemory, RefusesBadImages) {
  Image img;
  EXPECT_THROW(Ring::open_memory(img.bytes(8)), Error);  // misaligned
  EXPECT_THROW(Ring::open_memory(img.bytes().first(100)), Error);  // shorter than a header
  EXPECT_THROW(Ring::open_memory(img.bytes().first(img.n - 1)), Error);  // area cut short
  EXPECT_THROW(Reader::open_memory(img.bytes(), {.kind = ReaderKind::pinned}), Error);
  std::memset(img.p, 0, 8);  // magic
  try {
    Ring::open_memory(img.bytes());
    FAIL() << "a ring without its magic was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format);
  }
}

}  // namespace
