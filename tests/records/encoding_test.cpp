// Record encoding: round trips through the encoder and the one decoder, varint length
// boundaries, truncation marks, the tag table, and safety of the decoder on cut or
// malformed batches.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "records_test_util.hpp"
#include "ringlog/record.hpp"
#include "ringlog/tags.hpp"
#include "test_util.hpp"

using namespace ringlog;
using ringlog::test::ScratchPath;

namespace {

std::vector<std::byte> make_batch(std::uint64_t vxid, VxidKind kind, std::uint8_t flags,
                                  const std::vector<std::pair<Tag, std::string>>& recs) {
  std::vector<std::uint8_t> b(kBatchHeaderMax);
  b.resize(encode_batch_header(b.data(), vxid, kind, flags));
  for (auto& [t, p] : recs) {
    std::uint8_t h[kRecordHeaderMax];
    std::size_t n = encode_record_header(h, t, p.size(), false);
    b.insert(b.end(), h, h + n);
    b.insert(b.end(), p.begin(), p.end());
  }
  std::vector<std::byte> out(b.size());
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

}  // namespace

TEST(Encoding, RoundTripAcrossVarintBoundaries) {
  std::vector<std::pair<Tag, std::string>> recs;
  for (std::size_t len : {0, 1, 119, 120, 121, 239, 240, 1000, 4095, 70000}) {
    std::string s(len, '\0');
    for (std::size_t i = 0; i < len; ++i) s[i] = static_cast<char>(i * 7 + len);
    recs.push_back({Tag::ReqHeader, s});
  }
  recs.push_back({app_tag(5), "app"});
  for (std::uint64_t vxid : {1ULL, 239ULL, 240ULL, 1ULL << 40, ~0ULL}) {
    for (VxidKind k : {VxidKind::none, VxidKind::session, VxidKind::client, VxidKind::backend}) {
      auto msg = make_batch(vxid, k, kBatchFirst, recs);
      auto d = test::decode(msg);
      EXPECT_EQ(d.status, DecodeStatus::ok);
      EXPECT_EQ(d.hdr.vxid, vxid);
      EXPECT_EQ(d.hdr.kind, k);
      EXPECT_TRUE(d.hdr.first);
      EXPECT_FALSE(d.hdr.last);
      ASSERT_EQ(d.records.size(), recs.size());
      for (std::size_t i = 0; i < recs.size(); ++i) {
        EXPECT_EQ(d.records[i].tag, recs[i].first);
        EXPECT_EQ(d.records[i].payload, recs[i].second) << "record " << i;
        EXPECT_FALSE(d.records[i].truncated);
      }
    }
  }
}

TEST(Encoding, TruncatedFlagRoundTrips) {
  std::uint8_t h[kRecordHeaderMax];
  for (std::size_t len : {0, 5, 119, 120, 5000}) {
    std::size_t n = encode_record_header(h, Tag::ReqURL, len, true);
    std::vector<std::byte> msg(kBatchHeaderMax + n + len);
    auto* m = reinterpret_cast<std::uint8_t*>(msg.data());
    std::size_t hl = encode_batch_header(m, 9, VxidKind::client, 0);
    std::memcpy(m + hl, h, n);
    msg.resize(hl + n + len);
    auto d = test::decode(msg);
    ASSERT_EQ(d.records.size(), 1u);
    EXPECT_TRUE(d.records[0].truncated);
    EXPECT_EQ(d.records[0].payload.size(), len);
  }
}

TEST(Encoding, TxnTruncatesLongRecordsAndMarksThem) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  log.control().set_max_record(100);
  {
    Txn t = log.begin(TxnType::req, "rxreq");
    t.record(Tag::ReqURL, std::string(100, 'a'));   // exactly the limit: kept whole
    t.record(Tag::ReqURL, std::string(101, 'b'));   // one over: cut
    t.recordf(Tag::ReqHeader, "X: %0200d", 7);      // formatted and cut
    t.record(Tag::ReqURL, "short");
    t.end();
  }
  log.control().set_max_record(0);  // back to the default
  Txn t2 = log.begin(TxnType::req, "rxreq");
  t2.record(Tag::ReqURL, std::string(kDefaultMaxRecordLen + 10, 'c'));
  t2.end();

  auto batches = test::read_batches(p);
  ASSERT_EQ(batches.size(), 2u);
  auto urls = batches[0].records;
  std::vector<test::OwnedRecord> got;
  for (auto& r : urls)
    if (r.tag == Tag::ReqURL || r.tag == Tag::ReqHeader) got.push_back(r);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].payload, std::string(100, 'a'));
  EXPECT_FALSE(got[0].truncated);
  EXPECT_EQ(got[1].payload, std::string(100, 'b'));
  EXPECT_TRUE(got[1].truncated);
  EXPECT_EQ(got[2].payload.size(), 100u);
  EXPECT_EQ(got[2].payload.substr(0, 5), "X: 00");
  EXPECT_TRUE(got[2].truncated);
  EXPECT_EQ(got[3].payload, "short");
  EXPECT_FALSE(got[3].truncated);
  auto big = test::payloads(batches[1], Tag::ReqURL);
  ASSERT_EQ(big.size(), 1u);
  EXPECT_EQ(big[0].size(), kDefaultMaxRecordLen);
}

TEST(Encoding, DecoderRejectsWhatIsNotABatch) {
  std::string junk = "hello world";
  auto d = test::decode(std::as_bytes(std::span(junk)));
  EXPECT_EQ(d.status, DecodeStatus::not_batch);
  EXPECT_TRUE(d.records.empty());

  std::vector<std::byte> unknown_flags = make_batch(5, VxidKind::client, 0, {{Tag::ReqURL, "/"}});
  unknown_flags[1] = std::byte(0x40);
  EXPECT_EQ(test::decode(unknown_flags).status, DecodeStatus::not_batch);

  std::vector<std::byte> bad_vxid = {std::byte(kBatchMarker), std::byte(0), std::byte(0xF5), std::byte(0x80)};
  EXPECT_EQ(test::decode(bad_vxid).status, DecodeStatus::bad_header);
}

TEST(Encoding, EveryCutOfABatchDecodesSafely) {
  auto msg = make_batch(70000, VxidKind::backend, kBatchFirst | kBatchLast,
                        {{Tag::Begin, "bereq 69999 fetch"}, {Tag::BereqURL, std::string(300, 'u')},
                         {Tag::Hash, std::string("\0\1\2", 3)}, {Tag::End, ""}});
  ASSERT_EQ(test::decode(msg).records.size(), 4u);
  std::size_t full_ok = 0;
  for (std::size_t cut = 0; cut < msg.size(); ++cut) {
    // A copy of exactly `cut` bytes, so ASan catches any read past it.
    std::vector<std::byte> part(msg.begin(), msg.begin() + static_cast<std::ptrdiff_t>(cut));
    BatchDecoder d(part);
    Record r;
    std::size_t n = 0;
    while (d.next(r)) {
      ++n;
      EXPECT_LE(static_cast<std::size_t>(r.payload.data() + r.payload.size() - reinterpret_cast<const char*>(part.data())), cut);
    }
    EXPECT_LT(n, 4u) << "a cut batch cannot hold every record";
    if (d.status() == DecodeStatus::ok) ++full_ok;
  }
  // Cuts that fall exactly between records decode cleanly (with fewer records); others say so.
  EXPECT_GT(full_ok, 0u);
}

TEST(Tags, TableIsConsistent) {
  std::set<unsigned> ids;
  std::set<std::string> names;
  for (const TagInfo& i : builtin_tags()) {
    EXPECT_TRUE(ids.insert(i.id).second) << "duplicate id " << unsigned(i.id);
    EXPECT_TRUE(names.insert(i.name).second) << "duplicate name " << i.name;
    EXPECT_GT(i.id, 0u);
    EXPECT_LT(i.id, kAppTagFirst);
    EXPECT_EQ(tag_name(static_cast<Tag>(i.id)), i.name);
    EXPECT_EQ(tag_by_name(i.name), static_cast<Tag>(i.id));
    EXPECT_NE(std::string(i.description), "");
  }
  // Every tag that proxies and tools rely on exists.
  for (const char* n : {"Begin", "End", "Link", "SessOpen", "SessClose", "ReqStart", "ReqMethod", "ReqURL",
                        "ReqProtocol", "ReqHeader", "ReqUnset", "RespProtocol", "RespStatus", "RespReason",
                        "RespHeader", "BereqMethod", "BereqURL", "BereqProtocol", "BereqHeader", "BerespProtocol",
                        "BerespStatus", "BerespReason", "BerespHeader", "Timestamp", "ReqAcct", "BereqAcct",
                        "PipeAcct", "Hit", "HitPass", "HitMiss", "TTL", "Storage", "Length", "Filters",
                        "BackendOpen", "BackendClose", "FetchError", "Error", "Notice", "Debug", "Trace"})
    EXPECT_TRUE(tag_by_name(n).has_value()) << n;
  EXPECT_EQ(tag_by_name("requrl"), Tag::ReqURL);  // case-insensitive, like varnishlog -i
  EXPECT_EQ(tag_by_name("App3"), app_tag(3));
  EXPECT_FALSE(tag_by_name("NoSuchTag").has_value());
  EXPECT_TRUE(tag_flags(Tag::ReqHeader) & kTagUnsafe);
  EXPECT_TRUE(tag_flags(Tag::Hash) & kTagBinary);
  EXPECT_TRUE(tag_flags(Tag::Begin) & kTagStructural);
}

TEST(Tags, AppTagsCanBeNamed) {
  Tag t = app_tag(7);
  EXPECT_EQ(tag_name(t), "App7");
  EXPECT_TRUE(define_app_tag(t, "MyQueue", kTagUnsafe, "Queue depth"));
  EXPECT_EQ(tag_name(t), "MyQueue");
  EXPECT_EQ(tag_by_name("myqueue"), t);
  EXPECT_EQ(tag_by_name("App7"), t);
  EXPECT_TRUE(tag_flags(t) & kTagUnsafe);
  EXPECT_FALSE(define_app_tag(Tag::ReqURL, "Nope", 0));
}

TEST(Tags, DefaultMaskIsEverythingButDebugAndTrace) {
  auto on = [](Tag t) { unsigned i = std::uint8_t(t); return ((kDefaultTagMask[i >> 6] >> (i & 63)) & 1) != 0; };
  for (const TagInfo& i : builtin_tags()) {
    Tag t = static_cast<Tag>(i.id);
    bool expect = t != Tag::Debug && t != Tag::Trace && t != Tag::VSL;
    EXPECT_EQ(on(t), expect) << i.name;
  }
  EXPECT_TRUE(on(app_tag(0)));
  EXPECT_FALSE(on(Tag::invalid));
  EXPECT_FALSE(on(static_cast<Tag>(255)));
  EXPECT_FALSE(on(static_cast<Tag>(100)));
}

TEST(Encoding, RecordLargerThanTheBufferIsCutToWhatOneBatchHolds) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20}, {.txn_buffer = 300});
  Txn t = log.begin(TxnType::req, "rxreq");
  t.record(Tag::ReqURL, std::string(1000, 'r'));
  t.recordf(Tag::ReqURL, "%s", std::string(1000, 'f').c_str());
  t.end();
  std::vector<test::OwnedRecord> urls;
  for (auto& b : test::read_batches(p))
    for (auto& r : b.records)
      if (r.tag == Tag::ReqURL) urls.push_back(r);
  ASSERT_EQ(urls.size(), 2u);
  EXPECT_TRUE(urls[0].truncated && urls[1].truncated);
  EXPECT_EQ(urls[0].payload.size(), urls[1].payload.size()) << "record() and recordf() cut at the same length";
  EXPECT_GT(urls[0].payload.size(), 250u);
  EXPECT_LT(urls[0].payload.size(), 300u);
}

// record_with formats in the buffer: payloads on either side of the two-byte header's
// limit, one cut by the record limit, one that does not fit the buffer's rest, one on
// a parked transaction; each reads back as record() would have written it.
TEST(Encoding, RecordWithWritesWhatRecordWould) {
  ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20}, {.txn_buffer = 1024});
  auto fill = [](std::size_t n, char c) {
    return [n, c](char* o) {
      std::memset(o, c, n);
      return n;
    };
  };
  std::vector<std::string> want;
  {
    Txn t = log.begin(TxnType::req, "rxreq");
    for (std::size_t n : {0, 1, 119, 120, 200}) {
      t.record_with<200>(Tag::ReqURL, fill(n, 'a'));
      want.push_back(std::string(n, 'a'));
    }
    t.record_with<20>(Tag::Length, [](char* o) { return format_u64(o, 1234567); });
    want.push_back("1234567");
    while (t.buffered() < 1024 - 300) t.record(Tag::ReqURL, std::string(100, 'f'));
    t.record_with<400>(Tag::ReqURL, fill(300, 'b'));  // no room left: the buffer ships first
    t.park();
    t.record_with<200>(Tag::ReqURL, fill(5, 'c'));  // parked: takes a buffer again
    t.end();
  }
  log.control().set_max_record(100);
  {
    Txn t = log.begin(TxnType::req, "rxreq");
    t.record_with<200>(Tag::ReqURL, fill(150, 'd'));  // over the record limit: cut
    t.end();
  }
  log.control().set_max_record(0);

  std::vector<std::string> urls;
  bool cut = false;
  for (auto& b : test::read_batches(p))
    for (auto& r : b.records) {
      if (r.tag == Tag::Length) urls.push_back(std::string(r.payload));
      if (r.tag != Tag::ReqURL || r.payload == std::string(100, 'f')) continue;
      urls.push_back(std::string(r.payload));
      if (!r.payload.empty() && r.payload[0] == 'd') cut = r.truncated;
    }
  want.push_back(std::string(300, 'b'));
  want.push_back("ccccc");
  want.push_back(std::string(100, 'd'));
  EXPECT_EQ(urls, want);
  EXPECT_TRUE(cut);
}
