// ringlog::Line (fmt.hpp) against snprintf: the hot records ringproxy writes without
// printf must read exactly as the printf versions did.
#include "ringlog/fmt.hpp"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cmath>
#include <random>
#include <string>

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

TEST(Line, CapsLongInputWithoutOverflow) {
  ringlog::BasicLine<8> l;
  l.s("abcdefghij").u(123);
  EXPECT_EQ(l.view(), "abcdefgh");
  ringlog::BasicLine<24> m;
  m.s("0123456789").u(UINT64_MAX);  // 14 bytes left: no room for 20 digits
  EXPECT_EQ(m.view(), "0123456789");
}

}  // namespace
