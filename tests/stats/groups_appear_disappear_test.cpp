// Groups added and removed while running (one per backend): readers notice through the
// generation, a removed group's counters vanish, and a group added again in its place
// starts from zero. Bad names, duplicates and a full file are refused with clear errors.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "observe.hpp"
#include "ringlog/stats.hpp"
#include "ringproxy/counters.hpp"
#include "stats_test_util.hpp"

namespace rs = ringlog::stats;
namespace pc = ringproxy::counters;  // MAIN and VBE, the proxy's groups

namespace {

std::size_t count_prefix(const rs::Snapshot& s, std::string_view prefix) {
  std::size_t n = 0;
  for (const auto& c : s.counters)
    if (c.name.starts_with(prefix)) ++n;
  return n;
}

TEST(Groups, AppearAndDisappear) {
  ringlog::test::ScratchDir dir;
  auto stats = rs::Stats::create(dir.file("stats"));
  auto reader = rs::StatsReader::open(dir.file("stats"));
  EXPECT_TRUE(reader.snapshot().counters.empty());
  const std::uint64_t g0 = reader.generation();

  auto main = stats.add_group(pc::main::kKind, "", pc::main::kDefs);
  auto web1 = stats.add_group(pc::vbe::kKind, "web1", pc::vbe::kDefs);
  auto web2 = stats.add_group(pc::vbe::kKind, "web2", pc::vbe::kDefs);
  EXPECT_GT(reader.generation(), g0);
  web1.add(pc::vbe::req, 5);
  web2.add(pc::vbe::req, 7);
  rs::Snapshot s = reader.snapshot();
  EXPECT_EQ(count_prefix(s, "MAIN."), pc::main::kCount);
  EXPECT_EQ(count_prefix(s, "VBE.web1."), pc::vbe::kCount);
  ASSERT_NE(s.find("VBE.web2.req"), nullptr);
  EXPECT_EQ(s.find("VBE.web1.req")->raw, 5u);
  EXPECT_EQ(s.find("VBE.web2.req")->raw, 7u);
  EXPECT_EQ(s.find("VBE.web2.req")->ident, "web2");
  EXPECT_EQ(s.find("VBE.web2.req")->group, "VBE");
  EXPECT_EQ(s.find("VBE.web2.bereq_hdrbytes")->format, rs::Format::bytes);
  EXPECT_EQ(s.find("VBE.web2.busy")->level, rs::Level::diag);
  // Groups are listed in the order they were added.
  EXPECT_EQ(s.counters.front().name, "MAIN.sess_conn");

  const std::uint64_t g1 = reader.generation();
  web1.remove();
  EXPECT_GT(reader.generation(), g1);
  s = reader.snapshot();
  EXPECT_EQ(count_prefix(s, "VBE.web1."), 0u);
  EXPECT_EQ(s.find("VBE.web2.req")->raw, 7u);

  // Same name again, likely in the same slots: it starts from zero.
  web1 = stats.add_group(pc::vbe::kKind, "web1", pc::vbe::kDefs);
  s = reader.snapshot();
  ASSERT_NE(s.find("VBE.web1.req"), nullptr);
  EXPECT_EQ(s.find("VBE.web1.req")->raw, 0u);
  web1.add(pc::vbe::req);
  EXPECT_EQ(reader.snapshot().find("VBE.web1.req")->raw, 1u);

  { auto tmp = stats.add_group(pc::vbe::kKind, "tmp", pc::vbe::kDefs); }  // destroyed: removed
  EXPECT_EQ(reader.snapshot().find("VBE.tmp.req"), nullptr);
}

TEST(Groups, ChurnWhileReading) {
  // A backend group comes and goes while another thread snapshots: every snapshot is
  // consistent (the group is there whole, or not at all) and MAIN never disappears.
  // Every 100th group stays until a whole snapshot was taken with it there, so that
  // the reader sees the group present too, however the threads are scheduled.
  ringlog::test::ScratchDir dir;
  auto stats = rs::Stats::create(dir.file("stats"));
  auto main = stats.add_group(pc::main::kKind, "", pc::main::kDefs);
  auto reader = rs::StatsReader::open(dir.file("stats"));
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> snapshots{0};
  constexpr int kGroups = 2000, kHeldEvery = 100;
  std::thread churn([&] {
    for (int i = 0; i < kGroups; ++i) {
      auto g = stats.add_group(pc::vbe::kKind, "b" + std::to_string(i % 7), pc::vbe::kDefs);
      g.add(pc::vbe::req, 3);
      main.add(pc::main::backend_req);
      if (i % kHeldEvery == 0) {
        // A bounded poll on the reader's count: one snapshot may have begun before the
        // group was added; the one after it began with the group there.
        const std::uint64_t n = snapshots.load();
        EXPECT_TRUE(ringlog::test::wait_until([&] { return snapshots.load() >= n + 2; }));
      }
    }
    done.store(true, std::memory_order_release);
  });
  std::size_t seen = 0;
  while (!done.load(std::memory_order_acquire)) {
    rs::Snapshot s = reader.snapshot();
    EXPECT_EQ(count_prefix(s, "MAIN."), pc::main::kCount);
    std::size_t vbe = count_prefix(s, "VBE.");
    EXPECT_TRUE(vbe == 0 || vbe == pc::vbe::kCount) << vbe;
    if (vbe) {
      ++seen;
      for (const auto& c : s.counters)
        if (c.group == "VBE" && c.field == "req") {
          EXPECT_TRUE(c.raw == 0 || c.raw == 3) << c.raw;
        }
    }
    snapshots.fetch_add(1);
  }
  churn.join();
  EXPECT_GE(seen, std::size_t(kGroups / kHeldEvery)) << "snapshots with the group there";
  EXPECT_EQ(reader.snapshot().find("MAIN.backend_req")->raw, std::uint64_t(kGroups));
  EXPECT_EQ(count_prefix(reader.snapshot(), "VBE."), 0u);
}

TEST(Groups, RefusesBadNamesDuplicatesAndOverflow) {
  ringlog::test::ScratchDir dir;
  rs::StatsOptions o;
  // Sized from the counter lists, which grow: room for two VBE groups and MAIN, not for
  // a third group of MAIN's size.
  const std::uint32_t nv = std::size(pc::vbe::kDefs), nm = std::size(pc::main::kDefs);
  ASSERT_GT(nm, nv);
  o.max_groups = 3;
  o.max_counters = 2 * nv + nm;
  auto stats = rs::Stats::create(dir.file("stats"), o);
  auto expect_err = [](ringlog::Errc code, auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const ringlog::Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
  };
  using ringlog::Errc;
  expect_err(Errc::invalid_arg, [&] { (void)stats.add_group("", "", pc::vbe::kDefs); });
  expect_err(Errc::invalid_arg, [&] { (void)stats.add_group("BAD.KIND", "", pc::vbe::kDefs); });
  expect_err(Errc::invalid_arg, [&] { (void)stats.add_group("VBE", "a b", pc::vbe::kDefs); });
  expect_err(Errc::invalid_arg, [&] { (void)stats.add_group("VBE", std::string(60, 'x'), pc::vbe::kDefs); });
  const rs::CounterDef bad[] = {{"Upper", rs::Type::counter, rs::Level::info, rs::Format::integer, "x"}};
  expect_err(Errc::invalid_arg, [&] { (void)stats.add_group("X", "", bad); });
  const rs::CounterDef dup[] = {{"a", rs::Type::counter, rs::Level::info, rs::Format::integer, "x"},
                                {"a", rs::Type::gauge, rs::Level::info, rs::Format::integer, "y"}};
  expect_err(Errc::invalid_arg, [&] { (void)stats.add_group("X", "", dup); });

  auto a = stats.add_group("VBE", "a", pc::vbe::kDefs);
  expect_err(Errc::invalid_arg, [&] { (void)stats.add_group("VBE", "a", pc::vbe::kDefs); });
  auto m = stats.add_group(pc::main::kKind, "", pc::main::kDefs);  // nv + nm slots used
  expect_err(Errc::busy, [&] { (void)stats.add_group("VBE", "b", pc::main::kDefs); });  // only nv left
  auto b = stats.add_group("VBE", "b", pc::vbe::kDefs);  // all slots, 3 of 3 groups
  expect_err(Errc::busy, [&] { (void)stats.add_group("VBE", "c", pc::vbe::kDefs); });
  a.remove();
  auto c = stats.add_group("VBE", "c", pc::vbe::kDefs);  // room again
  EXPECT_EQ(c.name(), "VBE.c");
}

}  // namespace
