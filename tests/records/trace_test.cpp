// Tracing: off by default, a global switch (the Trace tag's mask bit, shared through
// the ring), a per-transaction override that children inherit, and trace points that
// evaluate nothing while off.
#include <gtest/gtest.h>

#include "records_test_util.hpp"
#include "test_util.hpp"

using namespace ringlog;
using ringlog::test::ScratchPath;

namespace {

std::vector<std::vector<std::string>> traces_by_batch(const std::string& path) {
  std::vector<std::vector<std::string>> out;
  for (auto& b : test::read_batches(path)) out.push_back(test::payloads(b, Tag::Trace));
  return out;
}

}  // namespace

TEST(Trace, OffByDefault) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn t = log.begin(TxnType::req, "rxreq");
  EXPECT_FALSE(t.tracing());
  t.trace("step 1");
  RINGLOG_TRACEF(t, "step %d", 2);
  t.end();
  EXPECT_TRUE(traces_by_batch(p)[0].empty());
}

TEST(Trace, PerTransactionOverride) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn a = log.begin(TxnType::req, "rxreq");
  Txn b = log.begin(TxnType::req, "rxreq");
  a.set_trace(true);
  EXPECT_TRUE(a.tracing());
  EXPECT_FALSE(b.tracing());
  a.trace("a1");
  b.trace("b1");
  RINGLOG_TRACEF(a, "a%d", 2);
  a.end();
  b.end();
  auto tr = traces_by_batch(p);
  ASSERT_EQ(tr.size(), 2u);
  EXPECT_EQ(tr[0], (std::vector<std::string>{"a1", "a2"}));
  EXPECT_TRUE(tr[1].empty());
}

TEST(Trace, GlobalSwitchWithPerTransactionOff) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn a = log.begin(TxnType::req, "rxreq");
  Txn quiet = log.begin(TxnType::req, "rxreq");
  quiet.set_trace(false);
  log.set_trace(true);
  EXPECT_TRUE(log.control().enabled(Tag::Trace)) << "the global switch is the Trace tag's mask bit";
  EXPECT_TRUE(a.tracing());
  EXPECT_FALSE(quiet.tracing());
  a.trace("on");
  quiet.trace("off");
  quiet.inherit_trace();
  quiet.trace("follows global again");
  log.set_trace(false);
  a.trace("switched off");
  EXPECT_FALSE(a.tracing());
  a.end();
  quiet.end();
  auto tr = traces_by_batch(p);
  ASSERT_EQ(tr.size(), 2u);
  EXPECT_EQ(tr[0], std::vector<std::string>{"on"});
  EXPECT_EQ(tr[1], std::vector<std::string>{"follows global again"});
}

TEST(Trace, ChildInheritsTheOverride) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn req = log.begin(TxnType::req, "rxreq");
  req.set_trace(true);
  Txn be = req.child(TxnType::bereq, "fetch");
  EXPECT_TRUE(be.tracing());
  be.trace("fetching");
  be.end();
  req.end();
  EXPECT_EQ(traces_by_batch(p)[0], std::vector<std::string>{"fetching"});
}

TEST(Trace, DisabledTracePointEvaluatesNothing) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn t = log.begin(TxnType::req, "rxreq");
  int calls = 0;
  auto costly = [&] { return ++calls; };
  RINGLOG_TRACEF(t, "value %d", costly());
  EXPECT_EQ(calls, 0);
  t.set_trace(true);
  RINGLOG_TRACEF(t, "value %d", costly());
  EXPECT_EQ(calls, 1);
  t.end();
  EXPECT_EQ(traces_by_batch(p)[0], std::vector<std::string>{"value 1"});
}

TEST(Trace, GlobalSwitchIsSharedThroughTheRing) {
  ScratchPath p;
  Log writer = Log::create(p, {.area_size = 1 << 20});
  Log other = Log::open(p.str());  // a second mapping, as another process would have
  Txn t = writer.begin(TxnType::req, "rxreq");
  other.set_mask("+Trace");
  EXPECT_TRUE(t.tracing());
  t.end();
}
