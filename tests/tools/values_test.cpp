// The shared command-line values: parse_size follows Varnish's byte sizes
// (VNUM_2bytes) at its edges, parse_wait is -t SECONDS|off.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "values.hpp"

namespace {

using ringlog::tool::parse_size;
using ringlog::tool::parse_wait;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

TEST(ParseSize, PlainNumbersAreBytes) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("1"), 1u);
  EXPECT_EQ(parse_size("8192"), 8192u);
  EXPECT_EQ(parse_size("007"), 7u);
}

TEST(ParseSize, UnitsArePowersOf1024InEitherCase) {
  EXPECT_EQ(parse_size("1k"), 1024u);
  EXPECT_EQ(parse_size("1K"), 1024u);
  EXPECT_EQ(parse_size("256k"), 256u << 10);
  EXPECT_EQ(parse_size("8M"), 8u << 20);
  EXPECT_EQ(parse_size("8m"), 8u << 20);
  EXPECT_EQ(parse_size("1g"), std::uint64_t(1) << 30);
  EXPECT_EQ(parse_size("2T"), std::uint64_t(2) << 40);
  EXPECT_EQ(parse_size("1p"), std::uint64_t(1) << 50);
}

TEST(ParseSize, ATrailingBMeansBytes) {
  EXPECT_EQ(parse_size("512b"), 512u);
  EXPECT_EQ(parse_size("512B"), 512u);
  EXPECT_EQ(parse_size("4kB"), 4096u);
  EXPECT_EQ(parse_size("4Kb"), 4096u);
  EXPECT_EQ(parse_size("1MB"), 1u << 20);
}

TEST(ParseSize, OneSpaceMayStandBeforeTheUnit) {
  EXPECT_EQ(parse_size("4 KB"), 4096u);
  EXPECT_EQ(parse_size("4 k"), 4096u);
  EXPECT_EQ(parse_size("4 b"), 4u);
  EXPECT_EQ(parse_size("4  k"), std::nullopt);  // one, not several
  EXPECT_EQ(parse_size("4 "), std::nullopt);    // a space with no unit after it
}

TEST(ParseSize, FractionsAreRoundedToAWholeByte) {
  EXPECT_EQ(parse_size("1.5k"), 1536u);
  EXPECT_EQ(parse_size("0.5M"), 512u << 10);
  EXPECT_EQ(parse_size(".5k"), 512u);
  EXPECT_EQ(parse_size("1.4"), 1u);
  EXPECT_EQ(parse_size("1.5"), 2u);
  EXPECT_EQ(parse_size("3."), 3u);
  EXPECT_EQ(parse_size("0.0001k"), 0u);
}

TEST(ParseSize, MalformedIsRefused) {
  for (const char* bad : {"", " ", "k", "b", ".", ".k", "-1", "+1", "-0", " 1", "1 x", "1x", "1kk", "1kbb", "1kib",
                          "1e3", "0x10", "inf", "nan", "1,5k", "1.2.3", "1k ", "1b2", "4K B"})
    EXPECT_EQ(parse_size(bad), std::nullopt) << "'" << bad << "'";
}

TEST(ParseSize, OverflowIsRefusedNotWrapped) {
  EXPECT_EQ(parse_size("18446744073709551615"), kMax);
  EXPECT_EQ(parse_size("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_size("99999999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_size("16383p"), std::uint64_t(16383) << 50);
  EXPECT_EQ(parse_size("16384p"), std::nullopt);  // 2^64
  EXPECT_EQ(parse_size("16384.5p"), std::nullopt);
  EXPECT_EQ(parse_size("17179869184G"), std::nullopt);
}

TEST(ParseSize, AboveTheCallersMaximumIsRefused) {
  const std::uint64_t tib = std::uint64_t(1) << 40;
  EXPECT_EQ(parse_size("1T", tib), tib);
  EXPECT_EQ(parse_size("1025G", tib), std::nullopt);
  EXPECT_EQ(parse_size("1099511627777", tib), std::nullopt);
  EXPECT_EQ(parse_size("1.0000001T", tib), std::nullopt);
  EXPECT_EQ(parse_size("0", 0), 0u);
  EXPECT_EQ(parse_size("1", 0), std::nullopt);
}

TEST(ParseWait, OffIsForeverAndNumbersAreSeconds) {
  EXPECT_EQ(parse_wait("off"), -1.0);
  EXPECT_EQ(parse_wait("0"), 0.0);
  EXPECT_EQ(parse_wait("5"), 5.0);
  EXPECT_EQ(parse_wait("0.25"), 0.25);
  EXPECT_EQ(parse_wait("1e9"), std::nullopt);
  EXPECT_EQ(parse_wait("1000000000"), 1e9);
  EXPECT_EQ(parse_wait("1000000001"), std::nullopt);
}

TEST(ParseWait, MalformedIsRefused) {
  for (const char* bad : {"", "OFF", "on", "-1", "+1", " 1", "1 ", "1s", "inf", "nan", "0x1", "."})
    EXPECT_EQ(parse_wait(bad), std::nullopt) << "'" << bad << "'";
}

}  // namespace
