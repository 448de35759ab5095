// ringproxy reads byte sizes by the rule every ringlog program shares (values.hpp,
// Varnish's VNUM_2bytes): its options (--ring-size, --storage, --pass-window,
// --tunnel-pipe-size), its byte parameters (adm param.set) and the demo origin's body
// size accept and refuse the same forms as ringlog-forward's --buffer. Fails when the
// proxy grows a size parser of its own again.
#include <cstdint>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "config.hpp"
#include "demo_origin.hpp"
#include "params.hpp"
#include "values.hpp"

namespace ringproxy {
namespace {

// Forms of every kind values_test pins down: plain, units, B suffixes, one space,
// fractions, and the malformed ones (signs, exponents, hex, spaces, junk, overflow).
const char* const kForms[] = {
    "0",     "1",      "8192",  "007",     "1k",    "1K",     "256k",   "8M",     "8m",   "1g",    "2T",
    "1p",    "512b",   "512B",  "4kB",     "4Kb",   "1MB",    "4 KB",   "4 k",    "4 b",  "1.5k",  "0.5M",
    ".5k",   "1.4",    "1.5",   "",        " 4",    "4 ",     "4  k",   "-1",     "+1",   "1e3",   "0x10",
    "k",     "4kk",    "4bk",   "4q",      "inf",   "nan",    "1.",     ".",      "4,5",  "99999999999999999999",
    "16385p", "18446744073709551615", "18446744073709551616", "64M ", "64 M",
};

TEST(ProxySizes, OptionsReadTheSharedRule) {
  for (const char* s : kForms) {
    SCOPED_TRACE(s);
    std::optional<std::uint64_t> want = ringlog::tool::parse_size(s);
    if (want) {
      EXPECT_EQ(parse_size(s), *want);
    } else {
      try {
        parse_size(s);
        ADD_FAILURE() << "accepted";
      } catch (const ConfigError& e) {
        EXPECT_EQ(std::string(e.what()), "bad size '" + std::string(s) + "'");
      }
    }
  }
}

// The forms the proxy's own parsers read otherwise: fractions, a space, a B and the
// t and p units are sizes now; a sign, leading spaces and an exponent are not.
TEST(ProxySizes, FormsTheProxyOnceReadOtherwise) {
  EXPECT_EQ(parse_size("1.5M"), 3u << 19);
  EXPECT_EQ(parse_size("256 KB"), 256u << 10);
  EXPECT_EQ(parse_size("1T"), std::uint64_t(1) << 40);
  EXPECT_THROW(parse_size("-1"), ConfigError);
  EXPECT_THROW(parse_size(" 64M"), ConfigError);
  EXPECT_THROW(parse_size("16385p"), ConfigError);  // past 2^64
  Params p;
  EXPECT_EQ(p.set("max_url", "1.5k"), "");
  EXPECT_EQ(p.get(max_url), 1536.0);
  EXPECT_NE(p.set("max_url", "1e3"), "");
  EXPECT_NE(p.set("max_url", " 64"), "");
}

TEST(ProxySizes, ByteParametersReadTheSharedRule) {
  for (const char* s : kForms) {
    SCOPED_TRACE(s);
    Params p;
    std::optional<std::uint64_t> want = ringlog::tool::parse_size(s);
    std::string err = p.set("max_header_bytes", s);
    if (!want) {
      EXPECT_EQ(err, "bad value '" + std::string(s) + "' for max_header_bytes");
    } else if (*want < 256 || *want > 16777216) {
      EXPECT_EQ(err, "max_header_bytes must be between 256 and 1.67772e+07 bytes");
    } else {
      EXPECT_EQ(err, "");
      EXPECT_EQ(p.get(max_header_bytes), double(*want));
    }
  }
}

TEST(ProxySizes, DemoOriginBodySize) {
  EXPECT_EQ(demo_object("/size/3k").size, 3072u);
  EXPECT_EQ(demo_object("/2M").size, 2u << 20);
  EXPECT_EQ(demo_object("/a/512b.bin").size, 512u);   // the b is not part of the size
  EXPECT_EQ(demo_object("/1.5k").size, 1u);           // nor a fraction: the first number
  EXPECT_EQ(demo_object("/size=007").size, 7u);
  EXPECT_EQ(demo_object("/2g").size, 2u);             // k and m only
  EXPECT_EQ(demo_object("/2048m").size, 1u << 30);    // at most 1 GiB
  EXPECT_EQ(demo_object("/99999999999999999999999").size, 1u << 30);
}

}  // namespace
}  // namespace ringproxy
