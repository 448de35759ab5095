// The tag mask: defaults, Varnish-style specs, structural tags that cannot be masked,
// changes made by another process, and changes while writers run.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "records_test_util.hpp"
#include "test_util.hpp"

using namespace ringlog;
using ringlog::test::ScratchPath;
using namespace std::chrono_literals;

TEST(TagMask, NewRingHasTheDefaultMask) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  EXPECT_EQ(log.mask(), "default");
  EXPECT_FALSE(log.tag_enabled(Tag::Debug));
  EXPECT_FALSE(log.tag_enabled(Tag::Trace));
  EXPECT_FALSE(log.trace());
  for (const TagInfo& i : builtin_tags()) {
    Tag t = static_cast<Tag>(i.id);
    if (t == Tag::Debug || t == Tag::Trace || t == Tag::VSL) continue;
    EXPECT_TRUE(log.tag_enabled(t)) << i.name;
  }
  EXPECT_TRUE(log.tag_enabled(app_tag(0)));
}

TEST(TagMask, MaskedRecordsAreNotWritten) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn t = log.begin(TxnType::req, "rxreq");
  t.record(Tag::ReqHeader, "A: 1");
  t.record(Tag::Debug, "hidden by default");
  EXPECT_TRUE(log.set_tag_enabled(Tag::ReqHeader, false));
  EXPECT_FALSE(t.enabled(Tag::ReqHeader));
  t.record(Tag::ReqHeader, "B: 2");
  t.recordf(Tag::ReqHeader, "C: %d", 3);
  EXPECT_TRUE(log.set_tag_enabled(Tag::Debug, true));
  t.record(Tag::Debug, "now visible");
  EXPECT_TRUE(log.set_tag_enabled(Tag::ReqHeader, true));
  t.record(Tag::ReqHeader, "D: 4");
  t.end();
  auto b = test::read_batches(p);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(test::payloads(b[0], Tag::ReqHeader), (std::vector<std::string>{"A: 1", "D: 4"}));
  EXPECT_EQ(test::payloads(b[0], Tag::Debug), (std::vector<std::string>{"now visible"}));
}

TEST(TagMask, SpecsFollowVarnishSyntax) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  log.set_mask("-ReqHeader, +Debug");
  EXPECT_EQ(log.mask(), "-ReqHeader,+Debug");
  EXPECT_FALSE(log.tag_enabled(Tag::ReqHeader));
  EXPECT_TRUE(log.tag_enabled(Tag::Debug));
  log.set_mask("default");
  EXPECT_EQ(log.mask(), "default");
  log.set_mask("none,+ReqURL");
  EXPECT_TRUE(log.tag_enabled(Tag::ReqURL));
  EXPECT_FALSE(log.tag_enabled(Tag::RespStatus));
  EXPECT_FALSE(log.tag_enabled(app_tag(3)));
  EXPECT_TRUE(log.tag_enabled(Tag::Begin)) << "structural tags stay on";
  log.set_mask("all");
  EXPECT_TRUE(log.tag_enabled(Tag::Debug));
  EXPECT_TRUE(log.trace());
  log.set_mask("default");

  // A bad spec is refused whole: nothing before the bad item is applied.
  EXPECT_THROW(log.set_mask("-ReqURL,+NoSuchTag"), Error);
  EXPECT_THROW(log.set_mask("-Begin"), Error);
  EXPECT_THROW(log.set_mask("+VSL"), Error);
  EXPECT_EQ(log.mask(), "default");
  EXPECT_FALSE(log.set_tag_enabled(Tag::End, false));
  EXPECT_FALSE(log.set_tag_enabled(Tag::invalid, true));
  EXPECT_FALSE(log.set_tag_enabled(static_cast<Tag>(100), true));
}

TEST(TagMask, GenerationCountsChanges) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  auto g0 = log.control().mask_generation.load();
  log.set_tag_enabled(Tag::Hit, false);
  log.set_trace(true);
  EXPECT_EQ(log.control().mask_generation.load(), g0 + 2);
}

TEST(TagMask, ChangedByAnotherProcessWhileThisOneWrites) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn t = log.begin(TxnType::req, "rxreq");
  t.record(Tag::Debug, "before");
  pid_t child = ::fork();
  if (child == 0) {
    // Another process (say, the proxy's admin command) opens the ring and changes the mask.
    try {
      Ring r = Ring::open(p);
      records_control(r).apply_mask("+Debug,-ReqURL");
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  t.record(Tag::Debug, "after");
  t.record(Tag::ReqURL, "/masked");
  t.end();
  auto b = test::read_batches(p);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(test::payloads(b[0], Tag::Debug), std::vector<std::string>{"after"});
  EXPECT_TRUE(test::payloads(b[0], Tag::ReqURL).empty());
  // A passive reader (read-only mapping) sees the same mask.
  Reader rd = Reader::open(p);
  EXPECT_EQ(records_control(rd).mask_spec(), "-ReqURL,+Debug");
}

TEST(TagMask, ChangesUnderLoadTakeEffectAndNothingTears) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 64u << 20});
  // Writers and the toggler go in rounds, so that the toggles land while the writers
  // write whatever the machine's speed, and nothing waits on a clock: in round g each
  // writer begins one transaction, racing the next change; the toggler changes the
  // mask, opens the round, and opens the next one once a writer has written in this
  // one (it never waits for the other). The last kFinalRounds rounds come after the
  // final change: every transaction begun in them must see it.
  constexpr int kWriters = 2, kToggles = 1000, kFinalRounds = 200;
  std::atomic<int> round{0};       // rounds opened so far
  std::atomic<int> done_round{0};  // the latest round in which a transaction was written
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (int w = 0; w < kWriters; ++w)
    th.emplace_back([&] {
      for (int seen = 0;;) {
        round.wait(seen, std::memory_order_acquire);  // until the next round opens
        const int g = round.load(std::memory_order_acquire);  // pairs with the release below
        if (stop.load(std::memory_order_acquire)) break;
        seen = g;
        Txn t = log.begin(TxnType::req, "rxreq");
        t.recordf(Tag::ReqStart, "%d", g > kToggles ? 1 : 0);
        t.record(Tag::Debug, "d");
        t.record(Tag::ReqURL, "/");
        t.end();
        int prev = done_round.load(std::memory_order_relaxed);
        while (prev < g && !done_round.compare_exchange_weak(prev, g, std::memory_order_release)) {
        }
        done_round.notify_all();
      }
    });
  for (int g = 1; g <= kToggles + kFinalRounds; ++g) {
    if (g <= kToggles) log.set_tag_enabled(Tag::Debug, g % 2 == 0);
    else if (g == kToggles + 1) log.set_tag_enabled(Tag::Debug, false);
    round.store(g, std::memory_order_release);
    round.notify_all();
    for (int d = done_round.load(std::memory_order_acquire); d < g; d = done_round.load(std::memory_order_acquire))
      done_round.wait(d, std::memory_order_acquire);
  }
  stop.store(true, std::memory_order_release);
  round.fetch_add(1, std::memory_order_acq_rel);
  round.notify_all();
  for (auto& t : th) t.join();
  EXPECT_EQ(log.dropped_batches(), 0u);

  auto b = test::read_batches(p);
  std::size_t with_debug = 0, without_debug = 0, final_txns = 0;
  for (auto& batch : b) {
    ASSERT_EQ(batch.status, DecodeStatus::ok);
    ASSERT_GE(batch.records.size(), 4u);
    EXPECT_EQ(batch.records.front().tag, Tag::Begin);
    EXPECT_EQ(batch.records.back().tag, Tag::End);
    EXPECT_EQ(test::payloads(batch, Tag::ReqURL).size(), 1u);
    bool dbg = !test::payloads(batch, Tag::Debug).empty();
    if (test::payloads(batch, Tag::ReqStart)[0] == "1") {
      ++final_txns;
      EXPECT_FALSE(dbg) << "a transaction begun after the final mask change must see it";
    } else {
      (dbg ? with_debug : without_debug)++;
    }
  }
  EXPECT_GE(final_txns, std::size_t(kFinalRounds));
  EXPECT_GT(with_debug, 0u) << "the writers saw Debug enabled at some point";
  EXPECT_GT(without_debug, 0u) << "and disabled at another";
}
