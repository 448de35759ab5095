// The file format: varint encoding, header validation of damaged files, sizes,
// instance naming. Every damaged header must give a clear error, never a crash.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;
using namespace ringlog::format;
using ringlog::test::ScratchPath;

namespace {

std::uint64_t roundtrip(std::uint64_t v) {
  std::uint8_t buf[kVarintMax];
  std::size_t n = varint_encode(v, buf);
  EXPECT_EQ(n, varint_size(v)) << v;
  std::uint64_t out = 0;
  std::size_t used = varint_decode([&](std::size_t i) { return buf[i]; }, n, out);
  EXPECT_EQ(used, n) << v;
  return out;
}

// Patches bytes of a file at an offset.
void patch(const std::string& path, off_t off, const void* data, std::size_t n) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, data, n, off), static_cast<ssize_t>(n));
  ::close(fd);
}

template <class T>
void patch_value(const std::string& path, off_t off, T v) {
  patch(path, off, &v, sizeof v);
}

std::string open_error(const std::string& path, Errc* code = nullptr) {
  try {
    Ring::open(path);
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Varint, RoundTripsAcrossBoundaries) {
  for (std::uint64_t v : {0ull, 1ull, 239ull, 240ull, 241ull, 255ull, 256ull, 2287ull, 2288ull, 65535ull,
                          1ull << 20, (1ull << 32) + 7, (1ull << 62) + 12345, ~0ull >> 2})
    EXPECT_EQ(roundtrip(v), v);
  for (std::uint64_t v = 0; v < 100000; v += 7) ASSERT_EQ(roundtrip(v), v);
}

TEST(Varint, MatchesHaproxyEncoding) {
  // Values < 240 are one byte; 240 is F0 00; 300 is FC 03 (300 = 0xF0|0xC, (300-240)>>4 = 3).
  std::uint8_t b[kVarintMax];
  ASSERT_EQ(varint_encode(239, b), 1u);
  EXPECT_EQ(b[0], 239);
  ASSERT_EQ(varint_encode(240, b), 2u);
  EXPECT_EQ(b[0], 0xF0);
  EXPECT_EQ(b[1], 0x00);
  ASSERT_EQ(varint_encode(300, b), 2u);
  EXPECT_EQ(b[0], 0xFC);
  EXPECT_EQ(b[1], 0x03);
  // The largest two-byte value: 240 + 15 + (127 << 4) = 2287.
  EXPECT_EQ(varint_size(2287), 2u);
  EXPECT_EQ(varint_size(2288), 3u);
}

TEST(Varint, RejectsTruncatedAndOverlong) {
  std::uint8_t b[kVarintMax];
  std::size_t n = varint_encode(1ull << 40, b);
  std::uint64_t v;
  EXPECT_EQ(varint_decode([&](std::size_t i) { return b[i]; }, n - 1, v), 0u);
  std::uint8_t ff[16];
  std::memset(ff, 0xFF, sizeof ff);
  EXPECT_EQ(varint_decode([&](std::size_t i) { return ff[i]; }, sizeof ff, v), 0u);
  EXPECT_EQ(varint_decode([&](std::size_t i) { return ff[i]; }, 0, v), 0u);
}

TEST(Create, WritesAValidSelfDescribingHeader) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 65536, .mode = 0600});
  Reader rd = Reader::open(p);
  const Header& h = rd.header();
  EXPECT_EQ(h.magic, kMagic);
  EXPECT_EQ(h.version, kVersion);
  EXPECT_EQ(h.byte_order, kByteOrderMark);
  EXPECT_EQ(h.header_len, kHeaderLen);
  EXPECT_EQ(h.area_size, 65536u);
  EXPECT_EQ(h.creator_pid, static_cast<std::uint32_t>(::getpid()));
  EXPECT_GT(h.created_ns, 0u);
  EXPECT_EQ(h.head.load(), 0u);
  EXPECT_EQ(h.tail.load(), 1u);
  struct stat st {};
  ASSERT_EQ(::stat(p.str().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), kHeaderLen + 65536u);
}

TEST(Create, DefaultModeIs0640) {
  ScratchPath p;
  Ring::create(p, {.area_size = 8192});
  struct stat st {};
  ASSERT_EQ(::stat(p.str().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST(Create, RefusesBadSizes) {
  ScratchPath p;
  EXPECT_THROW(Ring::create(p, {.area_size = 100}), Error);
  EXPECT_THROW(Ring::create(p, {.area_size = kMaxAreaSize + 1}), Error);
  EXPECT_THROW(Ring::create(p, {.area_size = 8192, .max_msg_len = 5000}), Error);
  EXPECT_FALSE(std::filesystem::exists(p.str()));
}

TEST(Create, ReplacesAtomicallyWithANewInstanceId) {
  ScratchPath p;
  Ring a = Ring::create(p, {.area_size = 8192});
  Reader rd = Reader::open(p);
  EXPECT_FALSE(rd.stale());
  Ring b = Ring::create(p, {.area_size = 8192});
  EXPECT_NE(a.instance_id(), b.instance_id());
  EXPECT_TRUE(rd.stale());
}

TEST(Open, MissingFileSaysSo) {
  Errc code{};
  std::string msg = open_error("/dev/shm/ringlog-test-does-not-exist", &code);
  EXPECT_EQ(code, Errc::not_found);
  EXPECT_NE(msg.find("ringlog-test-does-not-exist"), std::string::npos);
  EXPECT_NE(msg.find("no such file"), std::string::npos);
}

struct Corruption {
  const char* name;
  off_t offset;
  std::uint64_t value;
  std::size_t width;
  const char* expect;  // substring of the error
};

class HeaderCorruption : public ::testing::TestWithParam<Corruption> {};

TEST_P(HeaderCorruption, IsRefusedWithAClearMessage) {
  const Corruption& c = GetParam();
  ScratchPath p;
  Ring::create(p, {.area_size = 16384});
  patch(p, c.offset, &c.value, c.width);
  Errc code{};
  std::string msg = open_error(p, &code);
  EXPECT_EQ(code, Errc::bad_format) << msg;
  EXPECT_NE(msg.find(p.str()), std::string::npos) << msg;
  EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
  // Passive readers validate the same way.
  EXPECT_THROW(Reader::open(p), Error);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, HeaderCorruption,
    ::testing::Values(Corruption{"magic", 0, 0x1234, 8, "bad magic"},
                      Corruption{"version", 8, 7, 4, "format version 7"},
                      Corruption{"byteorder", 12, 0x04030201, 4, "other byte order"},
                      Corruption{"byteorder_junk", 12, 0x55, 4, "byte-order mark"},
                      Corruption{"wordsize", 16, 4, 1, "32-bit"},
                      Corruption{"headerlen", 20, 4096, 4, "header length"},
                      Corruption{"areasize", 24, 1u << 20, 8, "inconsistent sizes"},
                      Corruption{"areasize_tiny", 24, 16, 8, "out of range"},
                      Corruption{"maxmsg", 52, 1u << 30, 4, "max message length"},
                      Corruption{"tail_before_head", 128, 1000, 8, "damaged positions"},
                      Corruption{"tail_far", 64, 1u << 30, 8, "damaged positions"}),
    [](const auto& tp) { return std::string(tp.param.name); });

TEST(Open, TruncatedFileIsRefused) {
  ScratchPath p;
  Ring::create(p, {.area_size = 16384});
  ASSERT_EQ(::truncate(p.str().c_str(), 10000), 0);
  std::string msg = open_error(p);
  EXPECT_NE(msg.find("smaller than a ring header"), std::string::npos) << msg;
  ASSERT_EQ(::truncate(p.str().c_str(), kHeaderLen + 100), 0);
  msg = open_error(p);
  EXPECT_NE(msg.find("inconsistent sizes"), std::string::npos) << msg;
}

TEST(Open, EmptyAndDirectoryAreRefused) {
  ScratchPath p;
  { std::ofstream(p.str()); }
  EXPECT_NE(open_error(p).find("smaller than a ring header"), std::string::npos);
  std::filesystem::remove(p.str());
  std::filesystem::create_directory(p.str());
  EXPECT_FALSE(open_error(p).empty());
  std::filesystem::remove(p.str());
}

TEST(Instances, NamesResolveUnderRinglogDir) {
  ::setenv("RINGLOG_DIR", "/tmp/rl-inst", 1);
  EXPECT_EQ(instance_dir("web"), "/tmp/rl-inst/web");
  EXPECT_EQ(resolve_ring_path("web"), "/tmp/rl-inst/web/ring");
  EXPECT_EQ(resolve_ring_path(""), "/tmp/rl-inst/default/ring");
  EXPECT_EQ(resolve_ring_path("./web"), "./web");
  EXPECT_EQ(resolve_ring_path("/x/y"), "/x/y");
  ::unsetenv("RINGLOG_DIR");
  EXPECT_EQ(instance_dir("a"), "/dev/shm/ringlog/a");
}

TEST(Create, MakesInstanceDirectories) {
  ScratchPath dir("instdir");
  std::string path = dir.str() + "/sub/ring";
  Ring::create(path, {.area_size = 8192});
  EXPECT_TRUE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir.str());
}
