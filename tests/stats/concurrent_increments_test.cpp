// Counters incremented from many threads at once sum exactly; gauges that threads move
// in opposite directions (so a thread's own part goes negative) sum right; counts of
// threads that exited are kept when their slab is reused.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "ringlog/stats.hpp"
#include "ringproxy/counters.hpp"
#include "stats_test_util.hpp"

namespace rs = ringlog::stats;
namespace pc = ringproxy::counters;  // MAIN and VBE, the proxy's groups

namespace {

std::uint64_t value(const rs::StatsReader& r, std::string_view name) {
  rs::Snapshot s = r.snapshot();
  const rs::CounterValue* c = s.find(name);
  EXPECT_NE(c, nullptr) << name;
  return c ? c->raw : ~0ull;
}

TEST(ConcurrentIncrements, ManyThreadsSumExactly) {
  ringlog::test::ScratchDir dir;
  auto stats = rs::Stats::create(dir.file("stats"));
  auto main = stats.add_group(pc::main::kKind, "", pc::main::kDefs);
  auto reader = rs::StatsReader::open(dir.file("stats"));

  constexpr int kThreads = 16;
  constexpr std::uint64_t kPerThread = 200000;
  std::atomic<bool> done{false};
  // A reader polls while the writers run: values only grow (counters) and never exceed
  // the final total.
  std::thread poller([&] {
    std::uint64_t last = 0;
    while (!done.load(std::memory_order_acquire)) {
      std::uint64_t v = value(reader, "MAIN.client_req");
      EXPECT_GE(v, last);
      EXPECT_LE(v, kThreads * kPerThread);
      last = v;
    }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < kPerThread; ++i) {
        main.add(pc::main::client_req);
        main.add(pc::main::s_resp_bodybytes, 100);
        if (i % 2 == 0) main.add(pc::main::cache_hit);
        else main.add(pc::main::cache_miss);
        // Gauges: even threads go up, odd threads go down by as much and once more
        // up; a thread's own part is negative for odd threads.
        if (t % 2 == 0) main.add(pc::main::sess_active, 3);
        else main.sub(pc::main::sess_active, 2);
      }
    });
  for (auto& t : ts) t.join();
  done.store(true, std::memory_order_release);
  poller.join();

  EXPECT_EQ(value(reader, "MAIN.client_req"), kThreads * kPerThread);
  EXPECT_EQ(value(reader, "MAIN.s_resp_bodybytes"), kThreads * kPerThread * 100);
  EXPECT_EQ(value(reader, "MAIN.cache_hit") + value(reader, "MAIN.cache_miss"), kThreads * kPerThread);
  EXPECT_EQ(value(reader, "MAIN.cache_hit"), kThreads * kPerThread / 2);
  rs::Snapshot s = reader.snapshot();
  const rs::CounterValue* g = s.find("MAIN.sess_active");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->type, rs::Type::gauge);
  EXPECT_EQ(g->as_signed(), static_cast<std::int64_t>(kThreads / 2 * kPerThread * 3) -
                                static_cast<std::int64_t>(kThreads / 2 * kPerThread * 2));
}

TEST(ConcurrentIncrements, LocalHandlesSumExactly) {
  ringlog::test::ScratchDir dir;
  auto stats = rs::Stats::create(dir.file("stats"));
  auto main = stats.add_group(pc::main::kKind, "", pc::main::kDefs);
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      rs::LocalCounters w = main.local();  // this thread's part, kept at hand
      for (int i = 0; i < 100000; ++i) {
        w.add(pc::main::client_req);
        main.add(pc::main::client_req);  // mixing with Group::add hits the same slab
        w.sub(pc::main::n_object);
      }
    });
  for (auto& t : ts) t.join();
  rs::Snapshot s = rs::StatsReader::open(dir.file("stats")).snapshot();
  EXPECT_EQ(s.find("MAIN.client_req")->raw, 8u * 100000 * 2);
  EXPECT_EQ(s.find("MAIN.n_object")->as_signed(), -800000);
}

TEST(ConcurrentIncrements, GaugeSumsNegativeParts) {
  ringlog::test::ScratchDir dir;
  auto stats = rs::Stats::create(dir.file("stats"));
  auto main = stats.add_group(pc::main::kKind, "", pc::main::kDefs);
  auto reader = rs::StatsReader::open(dir.file("stats"));
  // A connection opened on one thread and closed on another: each thread's part alone
  // is wrong (+1000, -1000, -1000), the sum is right, and may itself go below zero.
  std::thread([&] { main.add(pc::main::sess_active, 1000); }).join();
  std::thread([&] { main.sub(pc::main::sess_active, 1000); }).join();
  EXPECT_EQ(reader.snapshot().find("MAIN.sess_active")->as_signed(), 0);
  std::thread([&] { main.sub(pc::main::sess_active, 7); }).join();
  EXPECT_EQ(reader.snapshot().find("MAIN.sess_active")->as_signed(), -7);
  EXPECT_DOUBLE_EQ(reader.snapshot().find("MAIN.sess_active")->value(), -7.0);
}

TEST(ConcurrentIncrements, ExitedThreadsKeepTheirCounts) {
  ringlog::test::ScratchDir dir;
  rs::StatsOptions o;
  o.max_slabs = 4;  // direct slab + 3 thread slabs: threads must reuse slabs
  auto stats = rs::Stats::create(dir.file("stats"), o);
  auto main = stats.add_group(pc::main::kKind, "", pc::main::kDefs);
  auto reader = rs::StatsReader::open(dir.file("stats"));
  for (int round = 0; round < 50; ++round) {
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; ++t)
      ts.emplace_back([&] {
        for (int i = 0; i < 1000; ++i) main.add(pc::main::client_req);
      });
    for (auto& t : ts) t.join();
  }
  EXPECT_EQ(value(reader, "MAIN.client_req"), 50u * 3 * 1000);
}

TEST(ConcurrentIncrements, BitmapSetIsAbsolute) {
  ringlog::test::ScratchDir dir;
  auto stats = rs::Stats::create(dir.file("stats"));
  auto be = stats.add_group(pc::vbe::kKind, "web1", pc::vbe::kDefs);
  auto reader = rs::StatsReader::open(dir.file("stats"));
  be.set(pc::vbe::happy, 0xff);
  std::thread([&] { be.set(pc::vbe::happy, 0x0f); }).join();
  rs::Snapshot s = reader.snapshot();
  ASSERT_NE(s.find("VBE.web1.happy"), nullptr);
  EXPECT_EQ(s.find("VBE.web1.happy")->raw, 0x0fu);
  EXPECT_EQ(s.find("VBE.web1.happy")->type, rs::Type::bitmap);
}

}  // namespace
