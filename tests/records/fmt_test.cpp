// ringlog::Line and the number formatters (fmt.hpp) against snprintf: the hot records
// ringproxy writes without printf must read exactly as the printf versions did, and the
// formatters must stay inside the room they document.
#include "ringlog/fmt.hpp"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cmath>
#include <random>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string sprintf_u(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%" PRIu64, v);
  return b;
}

std::string sprintf_f(double x, int d) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", d, x);
  return b;
}

TEST(Line, UnsignedMatchesPrintfAtEveryLength) {
  std::uint64_t v = 1;
  for (int i = 0; i < 20; ++i, v *= 10) {
    for (std::uint64_t w : {v - 1, v, v + 1, v * 9 / 10 * 9 + 7}) EXPECT_EQ(ringlog::Line().u(w).view(), sprintf_u(w));
  }
  EXPECT_EQ(ringlog::Line().u(0).view(), "0");
  EXPECT_EQ(ringlog::Line().u(UINT64_MAX).view(), sprintf_u(UINT64_MAX));
  std::mt19937_64 rng(42);
  for (int i = 0; i < 100000; ++i) {
    std::uint64_t w = rng() >> (rng() % 64);
    ASSERT_EQ(ringlog::Line().u(w).view(), sprintf_u(w)) << w;
  }
}

TEST(Line, SignedAndPieces) {
  EXPECT_EQ(ringlog::Line().i(-1).view(), "-1");
  EXPECT_EQ(ringlog::Line().i(INT64_MIN).view(), "-9223372036854775808");
  EXPECT_EQ(ringlog::Line().s("fd").sp().i(12).c(':').u(7).s(" reused").view(), "fd 12:7 reused");
}

TEST(Line, FixedPointMatchesPrintfAwayFromTies) {
  // Values whose digit after the last printed one is not a 5 (no tie to round): the
  // two roundings (printf's exact binary value, ours x * 10^d + 0.5) agree.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mag(-6, 10);
  for (int i = 0; i < 100000; ++i) {
    double x = std::pow(10.0, mag(rng)) * (rng() % 2 ? 1 : -1);
    int d = int(rng() % 7);
    double scaled = std::fabs(x) * std::pow(10.0, d);
    double frac = scaled - std::floor(scaled);
    if (std::fabs(frac - 0.5) < 1e-6) continue;
    ASSERT_EQ(ringlog::Line().f(x, d).view(), sprintf_f(x, d)) << x << " " << d;
  }
  EXPECT_EQ(ringlog::Line().f(1796018201.099304, 6).view(), "1796018201.099304");
  EXPECT_EQ(ringlog::Line().f(0.0, 3).view(), "0.000");
  EXPECT_EQ(ringlog::Line().f(59.9642489, 6).view(), "59.964249");
  EXPECT_EQ(ringlog::Line().f(-0.302748, 6).view(), "-0.302748");
  EXPECT_EQ(ringlog::Line().f6(10.0).view(), "10.000000");
}

// "%llu.%06llu" of ns truncated to the microsecond: the Timestamp record's numbers.
std::string sprintf_seconds(std::uint64_t ns) {
  char b[48];
  std::snprintf(b, sizeof b, "%llu.%06llu", (unsigned long long)(ns / 1000000000),
                (unsigned long long)(ns / 1000 % 1000000));
  return b;
}

TEST(Format, U64MatchesPrintfAndStaysInItsRoom) {
  std::vector<std::uint64_t> vals = {0, UINT64_MAX, UINT64_MAX - 1};
  for (std::uint64_t v = 1, i = 0; i < 20; ++i, v *= 10)
    for (std::uint64_t w : {v - 1, v, v + 1, v * 2, v * 9 + (v - 1)}) vals.push_back(w);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200000; ++i) vals.push_back(rng() >> (rng() % 64));
  for (std::uint64_t v : vals) {
    char b[32];
    std::memset(b, '#', sizeof b);
    std::size_t n = ringlog::format_u64(b, v);
    ASSERT_EQ(std::string(b, n), sprintf_u(v)) << v;
    for (std::size_t k = 20; k < sizeof b; ++k) ASSERT_EQ(b[k], '#') << "wrote past 20 bytes for " << v;
  }
}

TEST(Format, SixDigitsEveryValue) {
  char want[16], got[16];
  for (std::uint32_t f = 0; f < 1000000; ++f) {
    std::snprintf(want, sizeof want, "%06u", f);
    std::memset(got, '#', sizeof got);
    ringlog::format_6digits(got, f);
    ASSERT_EQ(std::string(got, 7), std::string(want, 6) + "#") << f;  // exactly 6 bytes written
  }
}

TEST(Format, SecondsMatchPrintfAndStayInTheirRoom) {
  std::vector<std::uint64_t> vals = {0, 999, 1000, 999999999, 1000000000, 1000000999, 1999999999, UINT64_MAX,
                                     1795990488752601000ULL, 59999999999ULL};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200000; ++i) vals.push_back(rng() >> (rng() % 64));
  for (std::uint64_t ns : vals) {
    char b[40];
    std::memset(b, '#', sizeof b);
    std::size_t n = ringlog::format_seconds(b, ns);
    ASSERT_EQ(std::string(b, n), sprintf_seconds(ns)) << ns;
    for (std::size_t k = 20; k < sizeof b; ++k) ASSERT_EQ(b[k], '#') << "wrote past 20 bytes for " << ns;
  }
  char b[40];
  std::uint64_t t = 1795990488752601000ULL;
  EXPECT_EQ(std::string(b, ringlog::format_seconds_delta(b, t + 1500000, t)), "0.001500");
  EXPECT_EQ(std::string(b, ringlog::format_seconds_delta(b, t, t + 1000)), "-0.000001");
  EXPECT_EQ(std::string(b, ringlog::format_seconds_delta(b, t, t + 2000001999)), "-2.000001");
  EXPECT_EQ(std::string(b, ringlog::format_seconds_delta(b, t, t)), "0.000000");
}

TEST(Line, CapsLongInputWithoutOverflow) {
  ringlog::BasicLine<8> l;
  l.s("abcdefghij").u(123);
  EXPECT_EQ(l.view(), "abcdefgh");
  ringlog::BasicLine<24> m;
  m.s("0123456789").u(UINT64_MAX);  // 14 bytes left: no room for 20 digits
  EXPECT_EQ(m.view(), "0123456789");
}

}  // namespace
