// ringlog-top's counting core: counts per (tag, payload), -f first fields, the display
// order, varnishtop's decay formula and its pruning, and the -1 dump layout.
#include <gtest/gtest.h>

#include <string>

#include "ringlog/top.hpp"

using namespace ringlog;

TEST(TopCounter, CountsPairsAndSortsByCount) {
  TopCounter c;
  for (int i = 0; i < 3; ++i) c.add(Tag::ReqURL, "/a");
  c.add(Tag::ReqURL, "/b");
  c.add(Tag::BereqURL, "/a");  // another tag: another pair
  c.add(Tag::BereqURL, "/a");
  EXPECT_FALSE(c.add(Tag::ReqURL, ""));
  ASSERT_EQ(c.size(), 3u);
  auto v = c.sorted();
  EXPECT_EQ(v[0].key, "/a");
  EXPECT_EQ(v[0].tag, Tag::ReqURL);
  EXPECT_DOUBLE_EQ(v[0].count, 3.0);
  EXPECT_EQ(v[1].tag, Tag::BereqURL);
  EXPECT_DOUBLE_EQ(v[1].count, 2.0);
  EXPECT_EQ(v[2].key, "/b");
  EXPECT_EQ(c.sorted(2).size(), 2u);
}

TEST(TopCounter, TiesAreOrderedByTagThenKey) {
  TopCounter c;
  c.add(Tag::RespStatus, "200");
  c.add(Tag::ReqURL, "/z");
  c.add(Tag::ReqURL, "/m");
  auto v = c.sorted();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].key, "/m");
  EXPECT_EQ(v[1].key, "/z");
  EXPECT_EQ(v[2].tag, Tag::RespStatus);
}

TEST(TopCounter, FirstFieldOnly) {
  TopCounter c(true);
  c.add(Tag::ReqHeader, "Host: a.example");
  c.add(Tag::ReqHeader, "Host: b.example");
  c.add(Tag::ReqHeader, "User-Agent: x");
  c.add(Tag::ReqURL, "/path with space");
  EXPECT_FALSE(c.add(Tag::ReqHeader, ": no name"));
  auto v = c.sorted();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].key, "Host");
  EXPECT_DOUBLE_EQ(v[0].count, 2.0);
  EXPECT_EQ(v[1].key, "/path");
  EXPECT_EQ(v[2].key, "User-Agent");
}

TEST(TopCounter, DecayIsVarnishtops) {
  TopCounter c;
  for (int i = 0; i < 3; ++i) c.add(Tag::ReqURL, "/a");
  c.decay(60, 100);  // n = 1: count += (1/3 - count) / 1
  EXPECT_EQ(c.ticks(), 1u);
  EXPECT_NEAR(c.sorted()[0].count, 1.0 / 3.0, 1e-12);
  c.add(Tag::ReqURL, "/a");
  c.add(Tag::ReqURL, "/a");
  c.decay(60, 100);  // n = 2
  EXPECT_NEAR(c.sorted()[0].count, (7.0 / 3.0) + ((1.0 / 3.0) - (7.0 / 3.0)) / 2.0, 1e-12);
}

TEST(TopCounter, SteadyRateSettlesNearRateTimesPeriod) {
  TopCounter c;
  const unsigned period = 10;
  double shown = 0;
  for (int s = 0; s < 300; ++s) {
    for (int i = 0; i < 5; ++i) c.add(Tag::ReqURL, "/hot");
    shown = c.sorted()[0].count;  // what the screen shows, before the update
    c.decay(period, 100);
  }
  EXPECT_EQ(c.ticks(), period);  // n stops at the period
  EXPECT_NEAR(shown, 5.0 * period + 1.0 / 3.0, 1e-6);
}

TEST(TopCounter, PrunesFarBelowTheShownRowsAndBeyondTenScreens) {
  TopCounter c;
  for (int i = 0; i < 1000; ++i) c.add(Tag::ReqURL, "/big");
  c.add(Tag::ReqURL, "/tiny");
  // Rows 2..3 are shown with 4 rows: /big and /tiny both shown, nothing dropped.
  c.decay(60, 4);
  EXPECT_EQ(c.size(), 2u);
  for (int i = 0; i < 1000; ++i) c.add(Tag::ReqURL, "/big");
  c.add(Tag::ReqURL, "/tiny");
  // Only one row fits: /tiny's count falls below a tenth of /big's and goes.
  c.decay(60, 3);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.sorted()[0].key, "/big");

  TopCounter d;
  for (int i = 0; i < 100; ++i) d.add(Tag::ReqURL, "/u" + std::to_string(i));
  d.decay(60, 3);  // at most 3 * 10 ranks kept (rows 2..30)
  EXPECT_EQ(d.size(), 29u);
}

TEST(TopCounter, DumpLayout) {
  TopCounter c;
  for (int i = 0; i < 12; ++i) c.add(Tag::ReqURL, "/index.html");
  for (int i = 0; i < 2; ++i) c.add(Tag::ReqHeader, std::string("X-Ctl: a\x01\xff"));
  c.add(Tag::RespStatus, "200");  // counted once: not dumped, like varnishtop -1
  EXPECT_EQ(c.dump(),
            "    12.00 ReqURL /index.html\n"
            "     2.00 ReqHeader X-Ctl: a\\x01\\xff\n");
}
