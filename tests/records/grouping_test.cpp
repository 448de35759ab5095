// Grouping: raw, vxid, request and session modes over transactions written by real
// Logs; children that end before their parents; groups that cannot complete closed
// by timeout, by the pending limit and at end of input with synthetic records; lost
// data; hostile input (junk, link cycles).
#include <gtest/gtest.h>

#include <algorithm>

#include "records_test_util.hpp"
#include "test_util.hpp"

using namespace ringlog;
using ringlog::test::ScratchPath;
using namespace std::chrono_literals;
using Msg = std::vector<std::byte>;

namespace {

std::vector<Msg> messages(const std::string& path) {
  Reader rd = Reader::open(path, {.kind = ReaderKind::passive, .start = StartAt::oldest});
  std::vector<Msg> out;
  Msg buf;
  for (;;) {
    ReadResult r = rd.next(buf);
    if (r.status == ReadStatus::empty) break;
    if (r.status == ReadStatus::message) out.push_back(buf);
  }
  return out;
}

struct Collected {
  std::vector<std::string> text;  // one printed group each
  std::vector<std::vector<std::pair<std::uint64_t, unsigned>>> shape;  // (vxid, level) per group
  Grouper::Sink sink() {
    return [this](const Group& g) {
      std::string s;
      print_group(s, g);
      text.push_back(s);
      std::vector<std::pair<std::uint64_t, unsigned>> sh;
      for (auto* t : g.txns) sh.emplace_back(t->vxid, t->level);
      shape.push_back(sh);
    };
  }
};

// A session with one request that fetched from a backend, written the way a proxy
// does: the fetch ends first, then the request, then the session.
struct Session3 {
  std::uint64_t s, r, b;
  std::vector<Msg> msgs;  // in ring order: bereq, req, sess
};

Session3 write_session(Log& log, const std::string& path) {
  Txn sess = log.begin(TxnType::sess, "HTTP/1");
  Txn req = sess.child(TxnType::req, "rxreq");
  req.record(Tag::ReqURL, "/");
  Txn be = req.child(TxnType::bereq, "fetch");
  be.record(Tag::BereqURL, "/");
  Session3 s{sess.vxid(), req.vxid(), be.vxid(), {}};
  be.end();
  req.end();
  sess.end();
  s.msgs = messages(path);
  return s;
}

}  // namespace

TEST(Grouping, VxidModeReportsEachTransactionAsItEnds) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  auto s = write_session(log, p);
  Collected c;
  Grouper g({.mode = Grouping::vxid}, c.sink());
  for (auto& m : s.msgs) g.feed(m, Grouper::Clock::now());
  ASSERT_EQ(c.shape.size(), 3u);
  EXPECT_EQ(c.shape[0], (std::vector<std::pair<std::uint64_t, unsigned>>{{s.b, 1}}));
  EXPECT_EQ(c.shape[1], (std::vector<std::pair<std::uint64_t, unsigned>>{{s.r, 1}}));
  EXPECT_EQ(c.shape[2], (std::vector<std::pair<std::uint64_t, unsigned>>{{s.s, 1}}));
  EXPECT_EQ(g.pending(), 0u);
}

TEST(Grouping, RequestModeJoinsFetchesWhicheverEndsFirst) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  auto s = write_session(log, p);
  for (bool reversed : {false, true}) {
    auto msgs = s.msgs;
    if (reversed) std::reverse(msgs.begin(), msgs.end());  // parent before child this time
    Collected c;
    Grouper g({.mode = Grouping::request}, c.sink());
    for (auto& m : msgs) g.feed(m, Grouper::Clock::now());
    ASSERT_EQ(c.shape.size(), 1u) << "sessions are not part of request groups (as varnishlog -g request)";
    EXPECT_EQ(c.shape[0], (std::vector<std::pair<std::uint64_t, unsigned>>{{s.r, 1}, {s.b, 2}}));
    EXPECT_EQ(c.text[0].find("VSL"), std::string::npos);
    EXPECT_EQ(g.pending(), 0u);
  }
}

TEST(Grouping, SessionModeNestsThreeLevels) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  auto s = write_session(log, p);
  Collected c;
  Grouper g({.mode = Grouping::session}, c.sink());
  for (auto& m : s.msgs) g.feed(m, Grouper::Clock::now());
  ASSERT_EQ(c.shape.size(), 1u);
  EXPECT_EQ(c.shape[0], (std::vector<std::pair<std::uint64_t, unsigned>>{{s.s, 1}, {s.r, 2}, {s.b, 3}}));
  EXPECT_NE(c.text[0].find("*** << BeReq    >> "), std::string::npos) << c.text[0];
  EXPECT_NE(c.text[0].find("--- BereqURL       /"), std::string::npos) << c.text[0];
}

TEST(Grouping, RawModePrintsEveryRecordAsRead) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  auto s = write_session(log, p);
  std::string out;
  Grouper g({.mode = Grouping::raw}, [&](const Group& grp) { print_group(out, grp); });
  for (auto& m : s.msgs) g.feed(m, Grouper::Clock::now());
  char want[64];
  std::snprintf(want, sizeof want, "%10llu BereqURL       b /\n", static_cast<unsigned long long>(s.b));
  EXPECT_NE(out.find(want), std::string::npos) << out;
  std::snprintf(want, sizeof want, "%10llu ReqURL         c /\n", static_cast<unsigned long long>(s.r));
  EXPECT_NE(out.find(want), std::string::npos) << out;
  std::snprintf(want, sizeof want, "%10llu End            - \n", static_cast<unsigned long long>(s.s));
  EXPECT_NE(out.find(want), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3 + 4 + 3);
}

TEST(Grouping, IncompleteGroupClosedByTimeoutWithSyntheticRecords) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn req = log.begin(TxnType::req, "rxreq");
  Txn be = req.child(TxnType::bereq, "fetch");
  req.link(TxnType::bereq, 999999, "fetch");  // a child that never shows up
  be.record(Tag::BereqURL, "/slow");
  be.flush();  // the backend is still fetching: a partial batch, no End
  std::uint64_t rv = req.vxid(), bv = be.vxid();
  req.end();
  auto msgs = messages(p);
  ASSERT_EQ(msgs.size(), 2u);

  Collected c;
  Grouper g({.mode = Grouping::request, .timeout = 5s}, c.sink());
  auto t0 = Grouper::Clock::now();
  for (auto& m : msgs) g.feed(m, t0);
  g.tick(t0 + 4s);
  EXPECT_TRUE(c.text.empty()) << "waits until the timeout";
  EXPECT_EQ(g.pending(), 2u);
  g.tick(t0 + 6s);
  ASSERT_EQ(c.text.size(), 1u);
  EXPECT_EQ(c.shape[0], (std::vector<std::pair<std::uint64_t, unsigned>>{{rv, 1}, {bv, 2}}));
  EXPECT_NE(c.text[0].find("--  VSL            timeout\n"), std::string::npos) << c.text[0];
  EXPECT_NE(c.text[0].find("-   VSL            link to 999999 not seen\n"), std::string::npos) << c.text[0];
  EXPECT_EQ(g.pending(), 0u);

  // The rest of the fetch arrives later: reported on its own, saying what is missing.
  be.end();
  auto later = messages(p);
  g.feed(later.back(), t0 + 7s);
  ASSERT_EQ(c.text.size(), 2u);
  EXPECT_EQ(c.shape[1], (std::vector<std::pair<std::uint64_t, unsigned>>{{bv, 1}}));
  EXPECT_NE(c.text[1].find("-   End"), std::string::npos) << c.text[1];
  EXPECT_NE(c.text[1].find(std::string(kSynthNoBegin)), std::string::npos) << c.text[1];
  EXPECT_EQ(g.pending(), 0u);
}

TEST(Grouping, TooManyPendingClosesTheOldest) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  std::vector<Txn> open;
  for (int i = 0; i < 5; ++i) {
    open.push_back(log.begin(TxnType::req, "rxreq"));
    open.back().recordf(Tag::ReqURL, "/%d", i);
    open.back().flush();
  }
  auto msgs = messages(p);
  Collected c;
  Grouper g({.mode = Grouping::vxid, .max_pending = 3}, c.sink());
  for (auto& m : msgs) g.feed(m, Grouper::Clock::now());
  ASSERT_EQ(c.text.size(), 2u);
  EXPECT_NE(c.text[0].find("ReqURL         /0"), std::string::npos);
  EXPECT_NE(c.text[0].find("VSL            store overflow"), std::string::npos) << c.text[0];
  EXPECT_NE(c.text[1].find("ReqURL         /1"), std::string::npos);
  EXPECT_EQ(g.pending(), 3u);
  g.flush();
  ASSERT_EQ(c.text.size(), 5u);
  EXPECT_NE(c.text[4].find("VSL            incomplete: end of input"), std::string::npos) << c.text[4];
  for (auto& t : open) t.end();
}

TEST(Grouping, LostDataIsReportedAndMarksPendingTransactions) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn t = log.begin(TxnType::req, "rxreq");
  t.flush();
  auto first = messages(p);
  t.end();
  auto all = messages(p);
  Collected c;
  Grouper g({.mode = Grouping::vxid}, c.sink());
  g.feed(first[0], Grouper::Clock::now());
  g.lost(4096, Grouper::Clock::now());
  ASSERT_EQ(c.text.size(), 1u);
  EXPECT_NE(c.text[0].find("<< Record   >> 0"), std::string::npos) << c.text[0];
  EXPECT_NE(c.text[0].find("VSL            overrun: 4096 bytes lost"), std::string::npos) << c.text[0];
  g.feed(all.back(), Grouper::Clock::now());
  ASSERT_EQ(c.text.size(), 2u);
  EXPECT_NE(c.text[1].find(std::string(kSynthOverrun)), std::string::npos) << c.text[1];
  g.notice("dropped 3 messages", Grouper::Clock::now());
  ASSERT_EQ(c.text.size(), 3u);
  EXPECT_NE(c.text[2].find("ring: dropped 3 messages"), std::string::npos);
}

TEST(Grouping, HostileInputNeverHangsOrVanishes) {
  Collected c;
  Grouper g({.mode = Grouping::request}, c.sink());
  std::string junk = "not a batch at all";
  g.feed(std::as_bytes(std::span(junk)), Grouper::Clock::now());
  ASSERT_EQ(c.text.size(), 1u);
  EXPECT_NE(c.text[0].find("not a record batch"), std::string::npos);

  // Two requests that each claim the other as parent and link to each other.
  auto batch = [](std::uint64_t vxid, std::uint64_t other) {
    std::vector<std::uint8_t> b(kBatchHeaderMax);
    b.resize(encode_batch_header(b.data(), vxid, VxidKind::client, kBatchFirst | kBatchLast));
    auto add = [&](Tag t, const std::string& s) {
      std::uint8_t h[kRecordHeaderMax];
      std::size_t n = encode_record_header(h, t, s.size(), false);
      b.insert(b.end(), h, h + n);
      b.insert(b.end(), s.begin(), s.end());
    };
    add(Tag::Begin, "req " + std::to_string(other) + " esi");
    add(Tag::Link, "req " + std::to_string(other) + " esi");
    add(Tag::End, "");
    Msg m(b.size());
    std::memcpy(m.data(), b.data(), b.size());
    return m;
  };
  g.feed(batch(10, 11), Grouper::Clock::now());
  g.feed(batch(11, 10), Grouper::Clock::now());
  g.flush();
  std::size_t seen = 0;
  for (auto& sh : c.shape) seen += sh.size();
  EXPECT_EQ(seen, 1u + 2u) << "the junk record and both transactions are reported";
  EXPECT_EQ(g.pending(), 0u);
}

TEST(Grouping, ParentsThatNeverAppearLeaveNothingBehind) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  for (int i = 0; i < 50; ++i) log.begin(TxnType::req, "rxreq", 1000000 + i).end();  // sessions never logged
  auto msgs = messages(p);
  for (Grouping mode : {Grouping::vxid, Grouping::request, Grouping::session}) {
    Collected c;
    Grouper g({.mode = mode}, c.sink());
    for (auto& m : msgs) g.feed(m, Grouper::Clock::now());
    g.flush();
    EXPECT_EQ(c.text.size(), 50u) << grouping_name(mode);
    if (mode == Grouping::session) {  // held until the end, then reported saying why
      EXPECT_NE(c.text[0].find("VSL            parent 1000000 not seen"), std::string::npos) << c.text[0];
    }
    EXPECT_EQ(g.pending(), 0u);
    EXPECT_EQ(g.held_links(), 0u) << grouping_name(mode);
  }
}
