// Transactions and batching: one ring message per transaction, a full buffer ships in
// pieces that read back as one transaction, vxids unique across threads and logs,
// timestamps, links and children, and the lifetime rules (destructor ends, moves).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <cctype>
#include <thread>

#include "records_test_util.hpp"
#include "test_util.hpp"

using namespace ringlog;
using ringlog::test::ScratchPath;

TEST(TxnBatching, OneRingMessagePerTransaction) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  auto before = log.ring().stats().msgs_written;
  Txn t = log.begin(TxnType::req, "rxreq", 1000);
  for (int i = 0; i < 15; ++i) t.recordf(Tag::ReqHeader, "X-N: %d", i);
  EXPECT_EQ(log.ring().stats().msgs_written, before) << "nothing reaches the ring before end()";
  std::uint64_t vxid = t.vxid();
  t.end();
  EXPECT_FALSE(t.active());
  EXPECT_EQ(log.ring().stats().msgs_written, before + 1);

  auto b = test::read_batches(p);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].hdr.vxid, vxid);
  EXPECT_EQ(b[0].hdr.kind, VxidKind::client);
  EXPECT_TRUE(b[0].hdr.first);
  EXPECT_TRUE(b[0].hdr.last);
  ASSERT_EQ(b[0].records.size(), 17u);
  EXPECT_EQ(b[0].records.front().tag, Tag::Begin);
  EXPECT_EQ(b[0].records.front().payload, "req 1000 rxreq");
  EXPECT_EQ(b[0].records.back().tag, Tag::End);
  EXPECT_EQ(b[0].records[5].payload, "X-N: 4");
}

TEST(TxnBatching, FullBufferShipsInPiecesThatReadBackAsOne) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20}, {.txn_buffer = 1024});
  EXPECT_EQ(log.txn_buffer(), 1024u);
  Txn t = log.begin(TxnType::bereq, "fetch", 7);
  for (int i = 0; i < 200; ++i) t.recordf(Tag::BerespHeader, "X-Seq: %04d %s", i, std::string(40, 'h').c_str());
  t.end();

  auto b = test::read_batches(p);
  ASSERT_GT(b.size(), 5u);
  std::vector<std::string> seq;
  for (std::size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i].status, DecodeStatus::ok);
    EXPECT_EQ(b[i].hdr.first, i == 0);
    EXPECT_EQ(b[i].hdr.last, i + 1 == b.size());
    EXPECT_EQ(b[i].hdr.kind, VxidKind::backend);
    for (auto& s : test::payloads(b[i], Tag::BerespHeader)) seq.push_back(s.substr(7, 4));
  }
  ASSERT_EQ(seq.size(), 200u);
  for (int i = 0; i < 200; ++i) {
    char want[16];
    std::snprintf(want, sizeof want, "%04d", i);
    EXPECT_EQ(seq[static_cast<std::size_t>(i)], want);
  }
  // The grouper joins the pieces into one transaction.
  std::string out = test::print_ring(p, Grouping::vxid);
  EXPECT_EQ(std::count(out.begin(), out.end(), '*'), 1) << out.substr(0, 300);
  EXPECT_EQ(out.find("VSL"), std::string::npos) << "no synthetic record for a complete transaction";
}

TEST(TxnBatching, VxidsAreUniqueAcrossThreadsAndLogs) {
  ScratchPath p;
  Log a = Log::create(p, {.area_size = 1 << 22}, {.vxid_chunk = 64});
  Log b = Log::open(p.str(), {.vxid_chunk = 64});
  constexpr int kThreads = 4, kPer = 2000;
  std::vector<std::vector<std::uint64_t>> got(kThreads);
  std::vector<std::thread> th;
  for (int i = 0; i < kThreads; ++i)
    th.emplace_back([&, i] {
      Log& log = i % 2 ? b : a;
      for (int k = 0; k < kPer; ++k) got[static_cast<std::size_t>(i)].push_back(log.new_vxid());
    });
  for (auto& t : th) t.join();
  std::set<std::uint64_t> all;
  for (auto& v : got)
    for (auto x : v) {
      EXPECT_NE(x, 0u);
      all.insert(x);
    }
  EXPECT_EQ(all.size(), std::size_t{kThreads} * kPer);
  // Chunks, not a shared counter: the ring's allocator moved once per 64 ids per thread.
  EXPECT_LE(records_control(a.ring()).next_vxid.load(), std::uint64_t{kThreads} * kPer + 64 * (kThreads + 2));
}

TEST(TxnBatching, ConcurrentTransactionsArriveWhole) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 32u << 20});
  constexpr int kThreads = 3, kTxns = 400;
  std::vector<std::thread> th;
  for (int i = 0; i < kThreads; ++i)
    th.emplace_back([&, i] {
      for (int k = 0; k < kTxns; ++k) {
        Txn t = log.begin(TxnType::req, "rxreq");
        for (int r = 0; r < 13; ++r) t.recordf(Tag::ReqHeader, "t%d k%d r%d", i, k, r);
        t.end();
      }
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(log.dropped_batches(), 0u);
  auto b = test::read_batches(p);
  ASSERT_EQ(b.size(), std::size_t{kThreads} * kTxns);
  std::set<std::uint64_t> vx;
  for (auto& batch : b) {
    ASSERT_EQ(batch.records.size(), 15u);
    EXPECT_TRUE(batch.hdr.first && batch.hdr.last);
    EXPECT_TRUE(vx.insert(batch.hdr.vxid).second);
    int ti = -1, ki = -1, ri = -1;
    ASSERT_EQ(std::sscanf(batch.records[1].payload.c_str(), "t%d k%d r%d", &ti, &ki, &ri), 3);
    for (int r = 0; r < 13; ++r) {
      char want[64];
      std::snprintf(want, sizeof want, "t%d k%d r%d", ti, ki, r);
      EXPECT_EQ(batch.records[static_cast<std::size_t>(r) + 1].payload, want);
    }
  }
}

TEST(TxnBatching, TimestampsSinceStartAndPrevious) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn t = log.begin(TxnType::req, "rxreq");
  const std::uint64_t t0 = 1795990488752601000ULL;
  t.timestamp("Start", t0);
  t.timestamp("Req", t0 + 1'500'000);
  t.timestamp("Resp", t0 + 2'000'001'000ULL);
  t.timestamp("Back", t0 + 2'000'000'000ULL);  // the realtime clock stepped back 1 us
  t.timestamp("Now");
  t.end();
  auto ts = test::payloads(test::read_batches(p)[0], Tag::Timestamp);
  ASSERT_EQ(ts.size(), 5u);
  EXPECT_EQ(ts[0], "Start: 1795990488.752601 0.000000 0.000000");
  EXPECT_EQ(ts[1], "Req: 1795990488.754101 0.001500 0.001500");
  EXPECT_EQ(ts[2], "Resp: 1795990490.752602 2.000001 1.998501");
  EXPECT_EQ(ts[3], "Back: 1795990490.752601 2.000000 -0.000001");
  // "Now: <10 digits>.<6 digits> <d>.<6 digits> <d>.<6 digits>" (std::regex trips GCC 12 warnings).
  auto seconds_field = [](const std::string& f, bool allow_minus) {
    std::size_t i = allow_minus && !f.empty() && f[0] == '-' ? 1 : 0;
    auto dot = f.find('.');
    if (dot == std::string::npos || dot == i || f.size() - dot - 1 != 6) return false;
    for (std::size_t k = i; k < f.size(); ++k)
      if (k != dot && !std::isdigit(static_cast<unsigned char>(f[k]))) return false;
    return true;
  };
  ASSERT_EQ(ts[4].substr(0, 5), "Now: ");
  std::istringstream fields(ts[4].substr(5));
  std::string abs, since_start, since_prev, extra;
  fields >> abs >> since_start >> since_prev;
  EXPECT_TRUE(seconds_field(abs, false) && abs.find('.') == 10) << ts[4];
  EXPECT_TRUE(seconds_field(since_start, true)) << ts[4];
  EXPECT_TRUE(seconds_field(since_prev, true)) << ts[4];
  EXPECT_FALSE(fields >> extra) << ts[4];
}

// Timestamps formatted in place must read exactly as "%s: %llu.%06llu ..." did, for any
// label length (cut at 64; the longest payloads need a 3-byte record header), any clock
// value and step, and whether the record fits the buffer or ships it first.
TEST(TxnBatching, TimestampsMatchPrintfFormatting) {
  auto sec = [](std::uint64_t ns) {
    char b[48];
    std::snprintf(b, sizeof b, "%llu.%06llu", (unsigned long long)(ns / 1000000000),
                  (unsigned long long)(ns / 1000 % 1000000));
    return std::string(b);
  };
  auto delta = [&](std::uint64_t now, std::uint64_t then) { return now >= then ? sec(now - then) : "-" + sec(then - now); };
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 22}, {.txn_buffer = 4096});
  std::mt19937_64 rng(3);
  std::vector<std::string> want;
  Txn t = log.begin(TxnType::req, "rxreq");
  std::uint64_t start = 0, prev = 0;
  const std::string long_label(80, 'L');
  for (int i = 0; i < 3000; ++i) {
    std::uint64_t ns;
    switch (i % 5) {
      case 0: ns = prev + rng() % 2000000; break;                     // under a second later
      case 1: ns = prev - std::min<std::uint64_t>(prev, rng() % 5000); break;  // the clock stepped back
      case 2: ns = rng() >> (rng() % 64); break;                      // anything
      case 3: ns = UINT64_MAX - rng() % 1000; break;                  // the longest numbers
      default: ns = 1795990488752601000ULL + rng() % 100000000000ULL; break;
    }
    if (i == 0) ns = 1;  // the start: deltas of ~1.8e10 s later on
    std::string label = i % 7 == 0 ? long_label : std::string(std::size_t(i % 13), char('a' + i % 26));
    t.timestamp(label, ns);
    if (i == 0) start = prev = ns;
    want.push_back(label.substr(0, 64) + ": " + sec(ns) + " " + delta(ns, start) + " " + delta(ns, prev));
    prev = ns;
  }
  t.end();
  std::vector<std::string> got;
  for (const auto& b : test::read_batches(p))
    for (const auto& s : test::payloads(b, Tag::Timestamp)) got.push_back(s);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  EXPECT_GT(test::read_batches(p).size(), 10u) << "the buffer filled and shipped many times";
}

namespace {
// A clock that counts its reads: each read is 1 ms after the previous one.
std::atomic<int> g_clock_reads{0};
std::uint64_t counting_clock() noexcept {
  return 1000000000000000000ULL + std::uint64_t(g_clock_reads.fetch_add(1) + 1) * 1'000'000;
}
}  // namespace

TEST(TxnBatching, TimestampReadsTheLogsClock) {
  ScratchPath p;
  g_clock_reads = 0;
  Log log = Log::create(p, {.area_size = 1 << 20}, {.realtime_ns = counting_clock});
  Txn t = log.begin(TxnType::req, "rxreq");
  t.timestamp("Start");
  t.timestamp("Resp");
  EXPECT_EQ(g_clock_reads.load(), 2);
  t.end();
  auto ts = test::payloads(test::read_batches(p)[0], Tag::Timestamp);
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts[0], "Start: 1000000000.001000 0.000000 0.000000");
  EXPECT_EQ(ts[1], "Resp: 1000000000.002000 0.001000 0.001000");
}

TEST(TxnBatching, TimestampWhileMaskedReadsNoClock) {
  ScratchPath p;
  g_clock_reads = 0;
  Log log = Log::create(p, {.area_size = 1 << 20}, {.realtime_ns = counting_clock});
  Txn t = log.begin(TxnType::req, "rxreq");
  t.timestamp("Start");  // read 1: ...001000
  ASSERT_EQ(g_clock_reads.load(), 1);
  log.set_tag_enabled(Tag::Timestamp, false);
  t.timestamp("Hidden");
  EXPECT_EQ(g_clock_reads.load(), 1) << "a masked timestamp read the clock";
  log.set_tag_enabled(Tag::Timestamp, true);
  t.timestamp("Resp");  // read 2: ...002000
  EXPECT_EQ(g_clock_reads.load(), 2);
  t.end();
  auto ts = test::payloads(test::read_batches(p)[0], Tag::Timestamp);
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts[0], "Start: 1000000000.001000 0.000000 0.000000");
  // "since previous" counts from Start, the previous timestamp logged.
  EXPECT_EQ(ts[1], "Resp: 1000000000.002000 0.001000 0.001000");
}

TEST(TxnBatching, ChildBeginsAndParentLinks) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn sess = log.begin(TxnType::sess, "HTTP/1");
  Txn req = sess.child(TxnType::req, "rxreq");
  Txn be = req.child(TxnType::bereq, "fetch");
  EXPECT_NE(be.vxid(), req.vxid());
  std::uint64_t sv = sess.vxid(), rv = req.vxid(), bv = be.vxid();
  be.end();
  req.end();
  sess.end();
  auto b = test::read_batches(p);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(test::payloads(b[0], Tag::Begin)[0], "bereq " + std::to_string(rv) + " fetch");
  EXPECT_EQ(b[0].hdr.kind, VxidKind::backend);
  EXPECT_EQ(test::payloads(b[1], Tag::Begin)[0], "req " + std::to_string(sv) + " rxreq");
  EXPECT_EQ(test::payloads(b[1], Tag::Link)[0], "bereq " + std::to_string(bv) + " fetch");
  EXPECT_EQ(test::payloads(b[2], Tag::Link)[0], "req " + std::to_string(rv) + " rxreq");
  EXPECT_EQ(b[2].hdr.kind, VxidKind::session);
}

TEST(TxnBatching, LifetimeRules) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  { Txn t = log.begin(TxnType::req, "rxreq"); t.record(Tag::ReqURL, "/dtor"); }  // destructor ends it
  Txn a = log.begin(TxnType::req, "rxreq");
  a.record(Tag::ReqURL, "/moved");
  Txn b = std::move(a);
  EXPECT_FALSE(a.active());
  a.record(Tag::ReqURL, "/ignored");  // inactive: nothing
  a.end();
  b = log.begin(TxnType::req, "rxreq");  // ends "/moved" first
  b.record(Tag::ReqURL, "/second");
  b.end();
  Txn none;
  none.record(Tag::ReqURL, "/nothing");
  none.trace("nothing");
  none.timestamp("Start");
  EXPECT_FALSE(none.child(TxnType::bereq, "fetch").active());
  none.end();

  auto batches = test::read_batches(p);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(test::payloads(batches[0], Tag::ReqURL), std::vector<std::string>{"/dtor"});
  EXPECT_EQ(test::payloads(batches[1], Tag::ReqURL), std::vector<std::string>{"/moved"});
  EXPECT_EQ(test::payloads(batches[2], Tag::ReqURL), std::vector<std::string>{"/second"});
  for (auto& x : batches) EXPECT_EQ(x.records.back().tag, Tag::End);
}

TEST(TxnBatching, RecordOutsideTransactionIsItsOwnBatch) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  log.record(Tag::Notice, "starting");
  log.record(Tag::Debug, "masked by default");
  auto b = test::read_batches(p);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].hdr.vxid, 0u);
  ASSERT_EQ(b[0].records.size(), 1u);
  EXPECT_EQ(b[0].records[0].payload, "starting");
}

TEST(TxnBatching, OpensByInstanceName) {
  std::string name = "records-test-" + std::to_string(::getpid());
  std::string path = resolve_ring_path(name);
  { Log created = Log::create(path, {.area_size = 1 << 20}); }
  {
    Log log = Log::open(name);
    log.begin(TxnType::req, "rxreq").end();
  }
  EXPECT_EQ(test::read_batches(path).size(), 1u);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

// A transaction kept in static storage ends after the thread's buffer cache is gone.
namespace {
struct StaticTxnFixture {
  ScratchPath path{"static-txn"};
  Log log = Log::create(path, {.area_size = 1 << 20});
  Txn txn;
};
StaticTxnFixture* g_static = nullptr;
}  // namespace

TEST(TxnBatching, TransactionOutlivingItsThreadIsEnded) {
  std::thread([] {
    static thread_local Txn late;  // destroyed with this thread, after or before the cache
    g_static = new StaticTxnFixture;
    late = g_static->log.begin(TxnType::req, "rxreq");
    late.record(Tag::ReqURL, "/late");
  }).join();
  auto b = test::read_batches(g_static->path);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(test::payloads(b[0], Tag::ReqURL), std::vector<std::string>{"/late"});
  EXPECT_EQ(b[0].records.back().tag, Tag::End);
  delete g_static;
}

TEST(TxnBatching, ParkedTransactionSendsHoldsNoBufferAndGoesOn) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  auto before = log.ring().stats().msgs_written;
  Txn s = log.begin(TxnType::sess, "HTTP/1");
  std::uint64_t vxid = s.vxid();
  s.record(Tag::SessOpen, "127.0.0.1 4000 a0");
  s.park();  // what it holds goes out now, and its buffer back
  EXPECT_TRUE(s.active());
  EXPECT_TRUE(s.parked());
  EXPECT_EQ(s.buffered(), 0u);
  EXPECT_EQ(log.ring().stats().msgs_written, before + 1);
  s.park();  // nothing held: nothing sent
  EXPECT_EQ(log.ring().stats().msgs_written, before + 1);
  {
    Txn r = s.child(TxnType::req, "rxreq");  // the Link takes a buffer again
    EXPECT_FALSE(s.parked());
    r.record(Tag::ReqURL, "/");
  }
  s.park();
  s.timestamp("Idle");  // every kind of record unparks
  s.park();
  s.recordf(Tag::Debug, "n=%d", 3);
  s.end();
  EXPECT_FALSE(s.active());

  auto b = test::read_batches(p);
  std::vector<test::DecodedBatch> mine;
  for (auto& x : b)
    if (x.hdr.vxid == vxid) mine.push_back(x);
  ASSERT_EQ(mine.size(), 4u);  // SessOpen, Link, Timestamp, Debug + End
  for (std::size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].hdr.first, i == 0);
    EXPECT_EQ(mine[i].hdr.last, i + 1 == mine.size());
    EXPECT_EQ(mine[i].hdr.kind, VxidKind::session);
  }
  EXPECT_EQ(mine[0].records.front().tag, Tag::Begin);
  EXPECT_EQ(test::payloads(mine[1], Tag::Link).size(), 1u);
  EXPECT_EQ(mine[3].records.back().tag, Tag::End);
  std::string out = test::print_ring(p, Grouping::session);
  EXPECT_EQ(out.find("VSL"), std::string::npos) << "the pieces read back as whole transactions\n" << out;
}

// Begin and Link spell each transaction type as type_name() does (the writer keeps its
// own padded copy of the names).
TEST(TxnBatching, BeginAndLinkSpellTypesAsTypeName) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  const TxnType types[] = {TxnType::unknown, TxnType::sess, TxnType::req, TxnType::bereq};
  for (TxnType ty : types) {
    Txn t = log.begin(ty, "why", 123456789);
    t.link(ty, 42, "because");
    t.end();
  }
  auto b = test::read_batches(p);
  ASSERT_EQ(b.size(), std::size(types));
  for (std::size_t i = 0; i < b.size(); ++i) {
    std::string tn(type_name(types[i]));
    EXPECT_EQ(test::payloads(b[i], Tag::Begin), std::vector<std::string>{tn + " 123456789 why"});
    EXPECT_EQ(test::payloads(b[i], Tag::Link), std::vector<std::string>{tn + " 42 because"});
  }
}

TEST(TxnBatching, EndedTransactionsBuffersAreKeptForTheNextAndTrimmed) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 22});
  std::thread([&] {
    EXPECT_EQ(trim_txn_buffers(), 0u);  // a new thread keeps nothing
    {
      std::vector<Txn> busy;  // more alive at once than the thread keeps
      for (std::size_t i = 0; i < kTxnBuffersKept + 6; ++i) busy.push_back(log.begin(TxnType::req, "rxreq"));
    }
    EXPECT_EQ(trim_txn_buffers(10), kTxnBuffersKept - 10);  // the bound held, 10 stay
    {
      Txn a = log.begin(TxnType::req, "rxreq");  // taken from the ten kept
      Txn b = log.begin(TxnType::req, "rxreq");
      a.record(Tag::ReqURL, "/a");
      b.record(Tag::ReqURL, "/b");
    }
    Txn s = log.begin(TxnType::sess, "HTTP/1");
    s.park();  // a parked transaction's buffer is kept too
    EXPECT_EQ(trim_txn_buffers(), 10u);  // the ten again: a parked one gives its buffer back
    s.record(Tag::SessClose, "REM_CLOSE 0.001");  // and it takes one again
    s.end();
    EXPECT_EQ(trim_txn_buffers(), 1u);
  }).join();
  auto b = test::read_batches(p);
  ASSERT_EQ(b.size(), kTxnBuffersKept + 6 + 2 + 2);  // the session: one batch at park, one at end
  std::vector<std::string> urls;
  for (auto& t : b)
    for (auto& u : test::payloads(t, Tag::ReqURL)) urls.push_back(u);
  EXPECT_EQ(urls, (std::vector<std::string>{"/b", "/a"}));
}
