// Pull filters: range (planning and cutting, 416, suffix, overlapping, multipart),
// chunked coding, gzip/gunzip round trips and corrupt input, the CRC32 check; every
// lease comes back (accounting build).
#include <gtest/gtest.h>

#include "delivery_util.hpp"

using namespace ringproxy::delivery;
using namespace dtest;

TEST(RangePlan, SingleRanges) {
  auto p = plan_range("bytes=0-99", 1000);
  EXPECT_EQ(p.status, 206);
  EXPECT_EQ(p.content_range, "bytes 0-99/1000");
  EXPECT_EQ(p.content_length, 100u);
  p = plan_range("bytes=990-", 1000);
  EXPECT_EQ(p.content_range, "bytes 990-999/1000");
  p = plan_range("bytes=900-5000", 1000);  // last-pos past the end is cut
  EXPECT_EQ(p.content_range, "bytes 900-999/1000");
  p = plan_range("bytes=-10", 1000);  // suffix
  EXPECT_EQ(p.content_range, "bytes 990-999/1000");
  p = plan_range("bytes=-5000", 1000);  // suffix longer than the body: all of it
  EXPECT_EQ(p.content_range, "bytes 0-999/1000");
  p = plan_range(" BYTES = 5-5 ", 1000);
  EXPECT_EQ(p.status, 206);
  EXPECT_EQ(p.content_range, "bytes 5-5/1000");
}

TEST(RangePlan, Unsatisfiable416) {
  auto p = plan_range("bytes=1000-", 1000);
  EXPECT_EQ(p.status, 416);
  EXPECT_EQ(p.content_range, "bytes */1000");
  EXPECT_EQ(plan_range("bytes=-0", 1000).status, 416);
  EXPECT_EQ(plan_range("bytes=5-", 0).status, 416);
  EXPECT_EQ(plan_range("bytes=-5", 0).status, 416);
  EXPECT_EQ(plan_range("bytes=2000-3000, 1500-", 1000).status, 416);
  // One satisfiable range is enough.
  EXPECT_EQ(plan_range("bytes=2000-3000, 10-20", 1000).status, 206);
}

TEST(RangePlan, InvalidIsIgnored) {
  for (const char* h : {"bytes=", "bytes=abc", "bytes=5-3", "items=0-5", "bytes 0-5", "bytes=1-2-3",
                        "bytes=--5", "bytes=99999999999999999999-", "bytes=0x10-20", "bytes=,,"})
    EXPECT_EQ(plan_range(h, 1000).status, 200) << h;
  // Too many ranges (a classic amplification attack): served whole.
  EXPECT_EQ(plan_range("bytes=0-1,2-3,4-5,6-7,8-9,10-11,12-13,14-15,16-17", 1000).status, 200);
}

TEST(RangePlan, OverlappingRangesCoalesce) {
  auto p = plan_range("bytes=0-99, 50-149, 150-160", 1000);
  EXPECT_EQ(p.status, 206);
  ASSERT_EQ(p.ranges.size(), 1u);
  EXPECT_EQ(p.content_range, "bytes 0-160/1000");
  p = plan_range("bytes=500-599, 0-9, -10", 1000, "text/plain");
  ASSERT_EQ(p.ranges.size(), 3u);
  EXPECT_EQ(p.ranges[0].lo, 0u);
  EXPECT_EQ(p.ranges[2].lo, 990u);
  EXPECT_NE(p.content_type.find("multipart/byteranges; boundary="), std::string::npos);
}

static std::string run_range(const std::string& data, const std::string& hdr, std::size_t seg, std::size_t piece,
                             std::size_t cap, bool use_skip, RangePlan* plan_out = nullptr) {
  Store st({.segment_size = seg});
  ObjRef o = make_object(st, data, piece);
  RangePlan p = plan_range(hdr, data.size(), "text/plain");
  if (plan_out) *plan_out = p;
  if (p.status != 206) return "<" + std::to_string(p.status) + ">";
  Chain c(o, nullptr);
  std::uint64_t start = 0;
  if (use_skip) {
    start = p.ranges[0].lo;
    c.reader().skip(start);
  }
  c.push(std::make_unique<RangeFilter>(p, start, 4));
  std::string got;
  if (!drain(c, &got, cap)) return "<error>";
  EXPECT_EQ(got.size(), p.content_length);
  return got;
}

TEST(RangeFilter, SingleRangeAcrossSegmentsAndArraySizes) {
  std::string d = random_bytes(10000, 3);
  for (std::size_t seg : {1u, 7u, 64u, 4096u})
    for (std::size_t cap : {1u, 2u, 5u}) {
      for (bool skip : {false, true}) {
        EXPECT_TRUE(same(run_range(d, "bytes=0-0", seg, 100, cap, skip), d.substr(0, 1))) << seg << " " << cap << " " << skip;
        EXPECT_TRUE(same(run_range(d, "bytes=123-4567", seg, 100, cap, skip), d.substr(123, 4445))) << seg << " " << cap << " " << skip;
        EXPECT_TRUE(same(run_range(d, "bytes=-1", seg, 100, cap, skip), d.substr(9999))) << seg << " " << cap << " " << skip;
        EXPECT_TRUE(same(run_range(d, "bytes=9000-", seg, 333, cap, skip), d.substr(9000))) << seg << " " << cap << " " << skip;
        EXPECT_TRUE(same(run_range(d, "bytes=0-", seg, 333, cap, skip), d)) << seg << " " << cap << " " << skip;
      }
    }
}

TEST(RangeFilter, MultipartBody) {
  std::string d = random_bytes(5000, 4);
  RangePlan p;
  std::string got = run_range(d, "bytes=4990-, 0-9, 100-199, 150-299", 64, 50, 3, false, &p);
  ASSERT_EQ(p.ranges.size(), 3u);
  std::string want;
  want += p.part_heads[0] + d.substr(0, 10);
  want += p.part_heads[1] + d.substr(100, 200);
  want += p.part_heads[2] + d.substr(4990);
  want += p.tail;
  EXPECT_TRUE(same(got, want));
  EXPECT_EQ(p.part_heads[1].find("\r\n--RP"), 0u);
  EXPECT_NE(p.part_heads[1].find("Content-Range: bytes 100-299/5000\r\n"), std::string::npos);
  // Several ranges inside one extent (one segment holds the whole body).
  got = run_range(d, "bytes=1-2,10-20,30-40", 8192, 5000, 2, true, &p);
  EXPECT_TRUE(same(got, p.part_heads[0] + d.substr(1, 2) + p.part_heads[1] + d.substr(10, 11) + p.part_heads[2] +
                     d.substr(30, 11) + p.tail));
}

TEST(RangeFilter, ShortObjectIsAnError) {
  Store st;
  ObjRef o = make_object(st, "0123456789");
  RangePlan p = plan_range("bytes=5-50", 100);  // the length lied
  Chain c(o, nullptr);
  c.push(std::make_unique<RangeFilter>(p));
  std::string got;
  EXPECT_FALSE(drain(c, &got));
}

// A source of given extents, some of zero length, for the filters' edge cases.
struct ListObject {
  Store st{{.segment_size = 16}};
  ObjRef o;
  explicit ListObject(const std::vector<std::string>& parts) {
    o = st.new_object(false);
    for (auto& s : parts) o->append(s.data(), s.size());
    o->finish();
  }
};

TEST(ChunkedFilter, EncodesEveryExtentAndTerminates) {
  std::string d = random_bytes(3000, 5);
  for (std::size_t cap : {3u, 4u, 7u, 64u}) {
    Store st({.segment_size = 100});
    Chain c(make_object(st, d, 77), nullptr);
    c.push(std::make_unique<ChunkedFilter>(5));
    std::string got;
    ASSERT_TRUE(drain(c, &got, cap));
    bool ok;
    EXPECT_TRUE(same(dechunk(got, &ok), d));
    EXPECT_TRUE(ok);
    EXPECT_EQ(got.substr(got.size() - 5), "0\r\n\r\n");
  }
}

TEST(ChunkedFilter, EmptyBodyAndTooSmallArray) {
  Store st;
  ObjRef o = st.new_object(false);
  o->finish();
  Chain c(o, nullptr);
  c.push(std::make_unique<ChunkedFilter>());
  std::string got;
  ASSERT_TRUE(drain(c, &got, 1));
  EXPECT_EQ(got, "0\r\n\r\n");
  // With data, an array of 2 can never hold a chunk: 0 ("no room"), never END.
  Chain c2(make_object(st, "abc"), nullptr);
  c2.push(std::make_unique<ChunkedFilter>());
  ScatterArray sa(2);
  EXPECT_EQ(c2.pull(sa), 0);
  EXPECT_FALSE(sa.end());
}

// Zero-length extents from a filter upstream are dropped by chunked (a zero-size chunk
// would end the body early) and their leases still come back.
struct ZeroInjector : Filter {
  const char* name() const noexcept override { return "zero"; }
  int pull(ScatterArray& out) noexcept override {
    if (out.room() < 2) return 0;
    out.add_noret("", 0);
    int r = prev_->pull(out);
    return r < 0 ? r : r + 1;
  }
};

TEST(ChunkedFilter, ZeroLengthExtentsCarryNoChunk) {
  Store st({.segment_size = 10});
  std::string d = random_bytes(95, 6);
  Chain c(make_object(st, d, 10), nullptr);
  c.push(std::make_unique<ZeroInjector>());
  c.push(std::make_unique<ChunkedFilter>(4));
  std::string got;
  ASSERT_TRUE(drain(c, &got, 6));
  bool ok;
  EXPECT_TRUE(same(dechunk(got, &ok), d));
  EXPECT_TRUE(ok);
}

TEST(ZlibFilter, GzipThenGunzipRoundTrip) {
  for (std::size_t n : {0u, 1u, 1000u, 300000u}) {
    std::string d = random_bytes(n, 8);
    for (std::size_t i = 0; i < d.size(); i += 3) d[i] = 'a';  // compressible
    Store st({.segment_size = 4096});
    {
      Chain c(make_object(st, d, 999), nullptr);
      c.push(std::make_unique<ZlibFilter>(ZlibFilter::Mode::gzip, 6, 1000));
      std::string z;
      ASSERT_TRUE(drain(c, &z, 3));
      EXPECT_TRUE(same(gunzip(z), d)) << n;
      // And back through gunzip, in storage, with tiny buffers.
      Chain c2(make_object(st, z, 13), nullptr);
      c2.push(std::make_unique<ZlibFilter>(ZlibFilter::Mode::gunzip, 6, 100, 2));
      std::string back;
      ASSERT_TRUE(drain(c2, &back, 2));
      EXPECT_TRUE(same(back, d)) << n;
    }
    // Both in one chain.
    Chain c3(make_object(st, d, 4096), nullptr);
    c3.push(std::make_unique<ZlibFilter>(ZlibFilter::Mode::gzip));
    c3.push(std::make_unique<ZlibFilter>(ZlibFilter::Mode::gunzip));
    c3.push(std::make_unique<ChunkedFilter>());
    std::string ch;
    ASSERT_TRUE(drain(c3, &ch, 16));
    bool ok;
    EXPECT_TRUE(same(dechunk(ch, &ok), d));
    EXPECT_TRUE(ok);
    EXPECT_EQ(st.buffer_used(), 0u);  // every filter buffer went back
  }
}

TEST(ZlibFilter, GunzipRejectsCorruptAndTruncatedInput) {
  Store st;
  std::string z = gzip(random_bytes(20000, 9));
  std::string bad = z;
  bad[bad.size() / 2] ^= 0x55;
  bad[bad.size() / 2 + 1] ^= 0x55;
  {
    Chain c(make_object(st, bad), nullptr);
    c.push(std::make_unique<ZlibFilter>(ZlibFilter::Mode::gunzip));
    std::string out;
    EXPECT_FALSE(drain(c, &out));
  }
  {
    Chain c(make_object(st, z.substr(0, z.size() - 9)), nullptr);
    c.push(std::make_unique<ZlibFilter>(ZlibFilter::Mode::gunzip));
    std::string out;
    EXPECT_FALSE(drain(c, &out));
  }
  {
    Chain c(make_object(st, "this is not gzip at all"), nullptr);
    c.push(std::make_unique<ZlibFilter>(ZlibFilter::Mode::gunzip));
    std::string out;
    EXPECT_FALSE(drain(c, &out));
  }
  EXPECT_EQ(st.buffer_used(), 0u);
}

TEST(ZlibFilter, GzipStreamsWhatItHasWhenTheFetchStalls) {
  Store st({.segment_size = 256});
  ObjRef o = st.new_object(false);
  ReadyNotify n;
  Chain c(o, &n);
  c.push(std::make_unique<ZlibFilter>(ZlibFilter::Mode::gzip));
  std::string part = "first part of a streamed body; ";
  o->append(part.data(), part.size());
  ScatterArray sa(8);
  int r = c.pull(sa);
  ASSERT_GT(r, 0);  // a sync flush made the bytes so far decodable
  std::string z;
  for (std::size_t i = 0; i < sa.used(); ++i) z.append((char*)sa.at(i).iov_base, sa.at(i).iov_len);
  c.give_all(sa);
  EXPECT_EQ(c.pull(sa), kLeaseAgain);
  EXPECT_TRUE(n.armed);
  o->append("rest", 4);
  o->finish();
  EXPECT_TRUE(n.take());
  std::string rest;
  ASSERT_TRUE(drain(c, &rest));
  EXPECT_EQ(gunzip(z + rest), part + "rest");
}

TEST(Crc32Filter, PassesThroughAndChecks) {
  std::string d = random_bytes(100000, 10);
  std::uint32_t want = crc32_z(0, (const Bytef*)d.data(), d.size());
  Store st({.segment_size = 1000});
  {
    Chain c(make_object(st, d, 777), nullptr);
    auto f = std::make_unique<Crc32Filter>(want);
    Crc32Filter* fp = f.get();
    c.push(std::move(f));
    std::string got;
    ASSERT_TRUE(drain(c, &got, 5));
    EXPECT_TRUE(same(got, d));
    EXPECT_EQ(fp->crc(), want);
    EXPECT_FALSE(fp->mismatch());
  }
  {
    Chain c(make_object(st, d, 777), nullptr);
    auto f = std::make_unique<Crc32Filter>(want ^ 1);
    Crc32Filter* fp = f.get();
    c.push(std::move(f));
    std::string got;
    EXPECT_FALSE(drain(c, &got, 5));
    EXPECT_TRUE(fp->mismatch());
  }
}

// crc32_update (carry-less multiply where the CPU has it) gives zlib's values for every
// length around the 16- and 64-byte steps, any alignment, and any split of the input.
TEST(Crc32Filter, FastCrcEqualsZlib) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("sse4.1"))
    GTEST_SKIP() << "no PCLMULQDQ/SSE4.1 here: crc32_update is zlib's own code, nothing to compare";
#else
  GTEST_SKIP() << "the carry-less CRC is x86-64 only: crc32_update is zlib's own code here";
#endif
  std::string d = random_bytes((1 << 20) + 77, 11);
  const auto* p = reinterpret_cast<const unsigned char*>(d.data());
  for (std::size_t off = 0; off < 16; ++off)
    for (std::size_t n = 0; n <= 300; ++n)
      ASSERT_EQ(crc32_update(0, p + off, n), std::uint32_t(crc32_z(0, p + off, n))) << "off " << off << " n " << n;
  for (std::size_t n : {std::size_t(1000), std::size_t(4095), std::size_t(4096), std::size_t(65536 + 13), std::size_t(1) << 20})
    EXPECT_EQ(crc32_update(0, p + 3, n), std::uint32_t(crc32_z(0, p + 3, n))) << n;
  EXPECT_EQ(crc32_update(0x12345678u, p, 5000), std::uint32_t(crc32_z(0x12345678u, p, 5000)));
  std::uint32_t want = std::uint32_t(crc32_z(0, p, d.size()));
  std::mt19937 g(5);
  for (int round = 0; round < 50; ++round) {  // chained over random pieces, as the filter does per extent
    std::uint32_t c = 0;
    for (std::size_t i = 0; i < d.size();) {
      std::size_t k = std::min<std::size_t>(d.size() - i, g() % (round < 25 ? 200 : 100000));
      c = crc32_update(c, p + i, k);
      i += k;
    }
    ASSERT_EQ(c, want) << "round " << round;
  }
}
