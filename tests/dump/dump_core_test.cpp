// ringlog-dump core: layout detection (ringlog, HAProxy v1/v2/v2a), the message walk,
// and repair of each state a crash can leave (stale lock, torn batch, dead reader,
// damaged head, damaged framing), checked against rings built byte by byte.
#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include "dump_test_util.hpp"
#include "ringlog/group.hpp"
#include "ringlog/printer.hpp"
#include "ringlog/record.hpp"
#include "test_util.hpp"

using namespace ringlog;
using namespace ringlog::test;
namespace rd = ringlog::dump;

namespace {

std::unique_ptr<Bytes> fresh_ring(std::uint64_t area = 8192) {
  ScratchPath p("dump");
  { Ring::create(p, {.area_size = area}); }
  return slurp(p);
}

rd::Image parsed(Bytes& b) {
  rd::Image img;
  std::string e = rd::parse(b.span(), std::nullopt, false, img);
  EXPECT_EQ(e, "");
  return img;
}

rd::WalkResult walk_of(Bytes& b, bool scan = false) {
  rd::Image img = parsed(b);
  return rd::walk(img, {.scan = scan});
}

rd::RepairStatus repair_of(Bytes& b, rd::RepairReport& rep, bool in_place = false) {
  rd::Image img = parsed(b);
  std::string err;
  auto st = rd::repair(img, {.in_place = in_place}, rep, err);
  if (st == rd::RepairStatus::unrecoverable) ADD_FAILURE() << err;
  return st;
}

bool report_mentions(const rd::RepairReport& r, const std::string& s) {
  for (auto& f : r.fixed)
    if (f.find(s) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(DumpWalk, MatchesTheLibraryReaderAfterManyWraps) {
  ScratchPath p("wrap");
  std::vector<std::string> written;
  {
    Ring r = Ring::create(p, {.area_size = 4096});
    for (int i = 0; i < 500; ++i) {
      std::string s = "message " + std::to_string(i) + std::string(static_cast<std::size_t>(i % 90), 'x');
      ASSERT_EQ(r.write(s), WriteStatus::ok);
      written.push_back(s);
    }
  }
  auto b = slurp(p);
  rd::WalkResult w = walk_of(*b);
  EXPECT_TRUE(w.complete) << w.stop_reason;
  std::vector<std::string> got = payloads(w);
  ASSERT_GT(got.size(), 10u);
  // The newest messages, in order, exactly.
  std::vector<std::string> tail(written.end() - static_cast<long>(got.size()), written.end());
  EXPECT_EQ(got, tail);
  // The same as a passive reader from the oldest.
  Reader rdr = Reader::open(p, {.start = StartAt::oldest});
  std::vector<std::string> lib;
  std::vector<std::byte> buf;
  while (rdr.next(buf).status == ReadStatus::message) lib.emplace_back(reinterpret_cast<char*>(buf.data()), buf.size());
  EXPECT_EQ(got, lib);
}

TEST(DumpWalk, RecordsPrintLikeGroupRaw) {
  auto b = fresh_ring();
  RawRing rr(*b);
  std::uint8_t hdr[kBatchHeaderMax], rec[kRecordHeaderMax];
  std::string msg(reinterpret_cast<char*>(hdr), encode_batch_header(hdr, 32770, VxidKind::client, kBatchFirst));
  std::string url = "/index.html";
  msg.append(reinterpret_cast<char*>(rec), encode_record_header(rec, Tag::ReqURL, url.size(), false));
  msg += url;
  rr.append(msg);
  rr.append("ringlog: 3 messages (60 bytes) dropped", format::MsgKind::notice);
  rd::Image img = parsed(*b);
  rd::WalkResult w = rd::walk(img, {});
  ASSERT_EQ(w.messages.size(), 2u);
  std::string out = rd::format_messages(img, w, {.mode = rd::Mode::records});
  std::string want;
  Grouper g(GroupOptions{.mode = Grouping::raw}, [&](const Group& gr) { print_group(want, gr); });
  g.feed(std::as_bytes(std::span(msg.data(), msg.size())), Grouper::Clock::now());
  g.notice("ringlog: 3 messages (60 bytes) dropped", Grouper::Clock::now());
  g.flush();
  EXPECT_EQ(out, want);
  EXPECT_NE(out.find("ReqURL"), std::string::npos);
  EXPECT_NE(out.find("/index.html"), std::string::npos);
}

TEST(DumpOutput, LfRemapAndJsonEscapes) {
  auto b = fresh_ring();
  RawRing rr(*b);
  rr.append("two\nlines");
  rr.append(std::string("q\"\\\x01\xff", 5));
  rd::Image img = parsed(*b);
  rd::WalkResult w = rd::walk(img, {});
  EXPECT_EQ(rd::format_messages(img, w, {.lf_remap = true}), std::string("two\r\vlines\nq\"\\\x01\xff\n", 17));
  std::string j = rd::format_messages(img, w, {.json = true});
  EXPECT_NE(j.find(R"("payload":"two\nlines")"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("payload":"q\"\\\u0001\u00ff")"), std::string::npos) << j;
}

TEST(DumpLayouts, HaproxyV2UnalignedAndAlignedWithWrapAndLock) {
  std::vector<std::string> msgs = {"first", "second message", std::string(300, 'z'), "last"};
  for (bool aligned : {false, true}) {
    auto b = hap_v2(aligned, 1024, 900, msgs, /*locked=*/true);  // wraps past the end
    rd::Image img;
    ASSERT_EQ(rd::parse(b->span(), std::nullopt, false, img), "");
    EXPECT_EQ(img.layout, aligned ? rd::Layout::haproxy_v2a : rd::Layout::haproxy_v2);
    EXPECT_EQ(img.header_len, aligned ? 192u : 32u);
    EXPECT_TRUE(img.locked);
    rd::WalkResult w = rd::walk(img, {});
    EXPECT_TRUE(w.complete) << w.stop_reason;
    EXPECT_EQ(payloads(w), msgs);
    // Repair clears the lock bit and nothing else.
    rd::RepairReport rep;
    std::string err;
    EXPECT_EQ(rd::repair(img, {}, rep, err), rd::RepairStatus::repaired) << err;
    EXPECT_TRUE(report_mentions(rep, "tail lock"));
    rd::Image again;
    ASSERT_EQ(rd::parse(b->span(), std::nullopt, false, again), "");
    EXPECT_FALSE(again.locked);
    EXPECT_EQ(payloads(rd::walk(again, {})), msgs);
  }
}

TEST(DumpLayouts, HaproxyV1FromTheAreaPointer) {
  std::vector<std::string> msgs = {"hello /p1", "hello /p2"};
  auto b = hap_v1(72, 4096 - 72, 4000, msgs);
  rd::Image img;
  ASSERT_EQ(rd::parse(b->span(), std::nullopt, false, img), "");
  EXPECT_EQ(img.layout, rd::Layout::haproxy_v1);
  EXPECT_EQ(img.header_len, 72u);
  EXPECT_EQ(payloads(rd::walk(img, {})), msgs);
}

TEST(DumpLayouts, MismatchedSizesNeedForce) {
  auto b = hap_v1(72, 2048, 0, {"a"});  // header + size < file size
  Bytes big(b->n + 100);
  std::memcpy(big.p, b->p, b->n);
  rd::Image img;
  std::string e = rd::parse(big.span(), std::nullopt, false, img);
  EXPECT_NE(e.find("-f"), std::string::npos) << e;
  EXPECT_EQ(rd::parse(big.span(), std::nullopt, true, img), "");
  EXPECT_FALSE(img.warnings.empty());
  EXPECT_EQ(payloads(rd::walk(img, {})), std::vector<std::string>{"a"});
  // A forced layout on a ringlog file needs -f too.
  auto r = fresh_ring();
  EXPECT_NE(rd::parse(r->span(), rd::Layout::haproxy_v2, false, img), "");
}

TEST(DumpLayouts, GarbageIsRefusedWithAReason) {
  for (std::size_t n : {0u, 7u, 31u, 100u, 5000u}) {
    Bytes b(n);
    for (std::size_t i = 0; i < n; ++i) b.p[i] = static_cast<std::uint8_t>(i * 37 + 11);
    rd::Image img;
    std::string e = rd::parse(b.span(), std::nullopt, false, img);
    if (e.empty()) (void)rd::walk(img, {.scan = true});  // must end, whatever it finds
    else EXPECT_NE(e.find("not a ringlog ring"), std::string::npos) << e;
  }
}

TEST(DumpRepair, CleanRingIsLeftByteForByte) {
  auto b = fresh_ring();
  RawRing rr(*b);
  for (int i = 0; i < 20; ++i) rr.append("m" + std::to_string(i));
  std::vector<std::uint8_t> before(b->p, b->p + b->n);
  rd::RepairReport rep;
  EXPECT_EQ(repair_of(*b, rep), rd::RepairStatus::clean);
  EXPECT_EQ(rep.kept_msgs, 20u);
  EXPECT_EQ(std::vector<std::uint8_t>(b->p, b->p + b->n), before);
}

TEST(DumpRepair, TornBatchOfADeadWriterIsSkippedThenPadded) {
  auto b = fresh_ring();
  RawRing rr(*b);
  rr.append("before 1");
  rr.append("before 2");
  // A dead writer reserved a batch, copied half of it and died before exposing it.
  std::uint64_t t = rr.tail();
  std::uint32_t dead = dead_pid();
  std::uint64_t x = rr.append("torn message that was never exposed", format::MsgKind::data, 6);
  ASSERT_EQ(x, t - 1);
  rr.at(x) = format::kRcWriting;
  auto& ws = rr.h.writers[7];
  ws.pid = dead;
  ws.inflight_pos = x + 1;
  ws.inflight_end = rr.tail();
  ws.saved_rc = 0;
  rr.append("after 1");
  rr.append("after 2");

  rd::WalkResult w = walk_of(*b);
  EXPECT_TRUE(w.complete) << w.stop_reason;
  EXPECT_EQ(payloads(w), (std::vector<std::string>{"before 1", "before 2", "after 1", "after 2"}));
  ASSERT_EQ(w.skipped.size(), 1u);
  EXPECT_NE(w.skipped[0].why.find("torn batch of dead writer"), std::string::npos);

  rd::RepairReport rep;
  EXPECT_EQ(repair_of(*b, rep), rd::RepairStatus::repaired);
  EXPECT_EQ(rep.torn_batches, 1u);
  EXPECT_EQ(rep.kept_msgs, 4u);
  EXPECT_EQ(rep.discarded_msgs, 1u);
  EXPECT_EQ(rr.at(x), 0);
  EXPECT_EQ(rr.h.writers[7].pid.load(), 0u);
  EXPECT_EQ(rr.h.torn_discarded.load(), 1u);
  rd::WalkResult w2 = walk_of(*b);
  EXPECT_TRUE(w2.complete);
  EXPECT_TRUE(w2.skipped.empty());
  EXPECT_EQ(payloads(w2), payloads(w));
  EXPECT_GE(w2.pads, 1u);
  // The library's own reader agrees.
  ScratchPath p("torn");
  {
    FILE* f = std::fopen(p.str().c_str(), "wb");
    ASSERT_TRUE(f);
    std::fwrite(b->p, 1, b->n, f);
    std::fclose(f);
  }
  Reader rdr = Reader::open(p, {.start = StartAt::oldest});
  std::vector<std::byte> buf;
  int n = 0;
  while (rdr.next(buf).status == ReadStatus::message) ++n;
  EXPECT_EQ(n, 4);
}

TEST(DumpRepair, StaleLockOfADeadOwnerIsCleared) {
  auto b = fresh_ring();
  RawRing rr(*b);
  rr.append("a");
  rr.append("b");
  std::uint32_t dead = dead_pid();
  std::uint64_t t = rr.tail();
  rr.h.writers[3].pid = dead;
  rr.h.owner = format::owner_word(dead, 3);
  rr.h.owner_saved_rc = 0;
  rr.at(t - 1) = format::kRcWriting;  // it had tagged the tail
  rr.h.tail = t | format::kTailLock;

  rd::Image img = parsed(*b);
  EXPECT_TRUE(img.locked);
  rd::WalkResult w = rd::walk(img, {});
  EXPECT_TRUE(w.complete);
  EXPECT_EQ(payloads(w), (std::vector<std::string>{"a", "b"}));
  EXPECT_NE(rd::format_info(img, w, false).find("dead"), std::string::npos);

  rd::RepairReport rep;
  EXPECT_EQ(repair_of(*b, rep), rd::RepairStatus::repaired);
  EXPECT_TRUE(report_mentions(rep, "stale tail lock of pid " + std::to_string(dead)));
  EXPECT_EQ(rr.h.tail.load(), t);
  EXPECT_EQ(rr.h.owner.load(), 0u);
  EXPECT_EQ(rr.at(t - 1), 0);
  EXPECT_EQ(rr.h.writers[3].pid.load(), 0u);
  // A writer can use the ring again.
  ScratchPath p("lock");
  {
    FILE* f = std::fopen(p.str().c_str(), "wb");
    std::fwrite(b->p, 1, b->n, f);
    std::fclose(f);
  }
  Ring r = Ring::open(p);
  EXPECT_EQ(r.write("c"), WriteStatus::ok);
}

TEST(DumpRepair, DeadReadersLoseTheirPins) {
  auto b = fresh_ring();
  RawRing rr(*b);
  std::uint64_t first = rr.append("held");
  rr.append("next");
  std::uint32_t dead = dead_pid();
  rr.h.readers[2].pid = dead;
  rr.h.readers[2].mode = 1;
  rr.h.readers[2].pos = first;
  rr.at(first) = 1;
  rr.at(rr.tail() - 1) = 1;  // a leaked count of a reader that died while moving
  rr.h.pinned = 1;
  rd::RepairReport rep;
  EXPECT_EQ(repair_of(*b, rep), rd::RepairStatus::repaired);
  EXPECT_TRUE(report_mentions(rep, "reader slot 2 of dead pid"));
  EXPECT_TRUE(report_mentions(rep, "readers-count"));
  EXPECT_EQ(rr.at(first), 0);
  EXPECT_EQ(rr.at(rr.tail() - 1), 0);
  EXPECT_EQ(rr.h.readers[2].pid.load(), 0u);
  EXPECT_EQ(rr.h.pinned.load(), 0u);
}

TEST(DumpRepair, UntrustworthyHeadIsRebuiltByScanning) {
  auto b = fresh_ring(4096);
  RawRing rr(*b);
  for (int i = 0; i < 10; ++i) rr.append("msg " + std::to_string(i));
  rr.h.head = rr.tail() + 12345;  // nonsense
  rd::Image img;
  ASSERT_EQ(rd::parse(b->span(), std::nullopt, false, img), "");
  EXPECT_FALSE(img.positions_ok);
  rd::WalkResult w = rd::walk(img, {});
  EXPECT_TRUE(w.head_rebuilt);
  EXPECT_EQ(w.messages.size(), 10u);
  rd::RepairReport rep;
  EXPECT_EQ(repair_of(*b, rep), rd::RepairStatus::repaired);
  EXPECT_TRUE(report_mentions(rep, "rebuilt by scanning"));
  EXPECT_EQ(rr.h.head.load(), 0u);
  EXPECT_EQ(rep.kept_msgs, 10u);
}

TEST(DumpRepair, DamagedFramingStopsTheDumpAndIsPaddedByRepair) {
  auto b = fresh_ring();
  RawRing rr(*b);
  rr.append("A");
  std::uint64_t bad = rr.append(std::string(40, '\xff'));
  rr.append("C");
  rr.append("D");
  rr.at(bad + 1) = 0xF5;  // a varint that now claims a huge length
  rr.at(bad + 2) = 0xFF;
  rr.at(bad + 3) = 0xFF;
  rd::WalkResult w = walk_of(*b);
  EXPECT_FALSE(w.complete);
  EXPECT_EQ(payloads(w), std::vector<std::string>{"A"});
  rd::WalkResult s = walk_of(*b, /*scan=*/true);
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(payloads(s), (std::vector<std::string>{"A", "C", "D"}));
  rd::RepairReport rep;
  EXPECT_EQ(repair_of(*b, rep), rd::RepairStatus::repaired);
  EXPECT_EQ(rep.kept_msgs, 3u);
  EXPECT_EQ(rep.discarded_msgs, 1u);
  rd::WalkResult after = walk_of(*b);
  EXPECT_TRUE(after.complete);
  EXPECT_EQ(payloads(after), (std::vector<std::string>{"A", "C", "D"}));
}

TEST(DumpRepair, HaproxyDamageMovesHeadPastIt) {
  auto b = hap_v2(false, 2048, 10, {"old 1", "old 2", "new 1", "new 2"});
  // Break "old 2"'s length: HAProxy readers know no pad, so head moves past it.
  std::size_t p = 32 + 10 + 7;  // RC of "old 2"
  b->p[p] = 0xFF;
  b->p[p + 1] = 0xFF;
  rd::Image img;
  ASSERT_EQ(rd::parse(b->span(), std::nullopt, false, img), "");
  rd::WalkResult w0 = rd::walk(img, {});
  EXPECT_NE(w0.stop_reason.find(" at offset 17"), std::string::npos) << w0.stop_reason;  // as in the file
  rd::RepairReport rep;
  std::string err;
  EXPECT_EQ(rd::repair(img, {}, rep, err), rd::RepairStatus::repaired) << err;
  rd::Image again;
  ASSERT_EQ(rd::parse(b->span(), std::nullopt, false, again), "");
  rd::WalkResult w = rd::walk(again, {});
  EXPECT_TRUE(w.complete);
  EXPECT_EQ(payloads(w), (std::vector<std::string>{"new 1", "new 2"}));
}

TEST(DumpRepair, InPlaceIsRefusedWhileAWriterLives) {
  auto b = fresh_ring();
  RawRing rr(*b);
  rr.append("x");
  pid_t child = fork_child();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  rr.h.writers[0].pid = static_cast<std::uint32_t>(child);
  rr.h.writers[0].start_time = process_start_time(child);
  rd::RepairReport rep;
  rd::Image img = parsed(*b);
  std::string err;
  EXPECT_EQ(rd::repair(img, {.in_place = true}, rep, err), rd::RepairStatus::refused);
  EXPECT_NE(err.find(std::to_string(child)), std::string::npos) << err;
  // A copy may still be made: the live writer's slot is not carried into it.
  EXPECT_EQ(rd::repair(img, {.in_place = false}, rep, err), rd::RepairStatus::repaired) << err;
  EXPECT_EQ(rr.h.writers[0].pid.load(), 0u);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(DumpLayouts, HaproxyTailOutsideTheAreaCannotBeRead) {
  for (bool aligned : {false, true}) {
    auto b = hap_v2(aligned, 1024, 100, {"a", "b"});
    std::uint64_t bad = 5000;
    std::memcpy(b->p + (aligned ? 64 : 16), &bad, 8);
    rd::Image img;
    ASSERT_EQ(rd::parse(b->span(), std::nullopt, false, img), "");  // --info still describes it
    EXPECT_FALSE(img.tail_ok);
    EXPECT_NE(img.positions_why.find("where the messages end is unknown"), std::string::npos) << img.positions_why;
    rd::WalkResult w = rd::walk(img, {.scan = true});
    EXPECT_TRUE(w.messages.empty());  // zero bytes are not empty messages
    EXPECT_FALSE(w.complete);
    EXPECT_NE(rd::format_info(img, w, true).find("\"positions_ok\":false"), std::string::npos);
    rd::RepairReport rep;
    std::string err;
    EXPECT_EQ(rd::repair(img, {}, rep, err), rd::RepairStatus::unrecoverable);
    EXPECT_NE(err.find("unknown"), std::string::npos) << err;
  }
  // v1 keeps no tail: a head or data out of range leaves nothing to go by.
  auto v1 = hap_v1(72, 1024, 10, {"a"});
  std::uint64_t data = 5000;
  std::memcpy(v1->p + 16, &data, 8);
  rd::Image img;
  ASSERT_EQ(rd::parse(v1->span(), std::nullopt, false, img), "");
  EXPECT_FALSE(img.tail_ok);
  EXPECT_TRUE(rd::walk(img, {.scan = true}).messages.empty());
}

TEST(DumpRepair, HaproxyHeadOutsideTheAreaIsRebuiltByScanning) {
  std::vector<std::string> msgs = {"GET /1", "GET /2", "GET /3"};
  for (int c = 0; c < 3; ++c) {
    const bool aligned = c == 1;
    auto b = hap_v2(aligned, 1024, 1000, msgs);  // wraps
    std::uint64_t bad = 77777;
    if (c == 2) std::memcpy(&bad, b->p + 16, 8);  // head == tail: impossible, the tail still tells
    std::memcpy(b->p + (aligned ? 128 : 24), &bad, 8);
    rd::Image img;
    ASSERT_EQ(rd::parse(b->span(), std::nullopt, false, img), "");
    EXPECT_TRUE(img.tail_ok);
    EXPECT_FALSE(img.positions_ok);
    rd::WalkResult w = rd::walk(img, {});
    EXPECT_TRUE(w.head_rebuilt);
    EXPECT_TRUE(w.complete) << w.stop_reason;
    EXPECT_EQ(payloads(w), msgs);
    rd::RepairReport rep;
    std::string err;
    EXPECT_EQ(rd::repair(img, {}, rep, err), rd::RepairStatus::repaired) << err;
    EXPECT_TRUE(report_mentions(rep, "rebuilt by scanning"));
    EXPECT_EQ(rep.kept_msgs, 3u);
    rd::Image again;
    ASSERT_EQ(rd::parse(b->span(), std::nullopt, false, again), "");
    EXPECT_TRUE(again.positions_ok);
    std::uint64_t head = 0;
    std::memcpy(&head, b->p + (aligned ? 128 : 24), 8);
    EXPECT_EQ(head, 1000u);
    EXPECT_EQ(payloads(rd::walk(again, {})), msgs);
  }
}

TEST(DumpLayouts, HaproxyHeaderLengthErrorsNameTheirSource) {
  auto v1 = hap_v1(72, 1024, 0, {"a"});
  std::uint64_t areap = 0x7f3e5a000000ULL + 8;  // header length 8: impossible
  std::memcpy(v1->p + 8, &areap, 8);
  rd::Image img;
  std::string e = rd::parse(v1->span(), rd::Layout::haproxy_v1, false, img);
  EXPECT_NE(e.find("header length 8 (from the area pointer 0x7f3e5a000008)"), std::string::npos) << e;
  auto v2 = hap_v2(false, 1024, 0, {"a"});
  e = rd::parse(v2->span(), rd::Layout::haproxy_v2a, true, img);  // rsvd 32 cannot be a 192-byte header
  EXPECT_NE(e.find("header length 32 (rsvd) is impossible for haproxy-v2a"), std::string::npos) << e;
}

TEST(DumpRepair, InPlaceTakesADeadOwnersLockOverAndReleasesItAtTheEnd) {
  auto b = fresh_ring();
  RawRing rr(*b);
  rr.append("a");
  std::uint32_t dead = dead_pid();
  std::uint64_t t = rr.tail();
  rr.h.writers[1].pid = dead;
  rr.h.owner = format::owner_word(dead, 1);
  rr.h.owner_saved_rc = 0;
  rr.at(t - 1) = format::kRcWriting;
  rr.h.tail = t | format::kTailLock;
  rr.h.readers[0].pid = dead;  // more to repair after the lock
  rr.h.readers[0].pos = rr.h.head.load();
  rr.at(rr.h.head.load()) = 1;
  rd::RepairReport rep;
  EXPECT_EQ(repair_of(*b, rep, /*in_place=*/true), rd::RepairStatus::repaired);
  EXPECT_TRUE(report_mentions(rep, "stale tail lock of pid " + std::to_string(dead)));
  EXPECT_TRUE(report_mentions(rep, "reader slot 0 of dead pid"));
  EXPECT_EQ(rr.h.tail.load(), t);  // unlocked, at the same tail
  EXPECT_EQ(rr.h.owner.load(), 0u);
  EXPECT_EQ(rr.h.owner_saved_rc.load(), 0x100u);
  EXPECT_EQ(rr.at(t - 1), 0);
  EXPECT_EQ(rr.h.lock_recoveries.load(), 1u);
}

TEST(DumpRepair, DamagedTailIsRebuiltFromBytesWritten) {
  ScratchPath p("tailctr");
  std::vector<std::string> msgs;
  {
    Ring r = Ring::create(p, {.area_size = 4096});
    for (int i = 0; i < 200; ++i) {  // wraps: the area holds old messages below head
      msgs.push_back("message " + std::to_string(i));
      ASSERT_EQ(r.write(msgs.back()), WriteStatus::ok);
    }
  }
  auto b = slurp(p);
  RawRing rr(*b);
  std::uint64_t t = rr.tail();
  rd::WalkResult good = walk_of(*b);
  ASSERT_TRUE(good.complete);
  rr.h.tail = t + (1ULL << 40);  // damaged: far past head
  rd::Image img = parsed(*b);
  EXPECT_TRUE(img.tail_rebuilt);
  EXPECT_EQ(img.tail, t);
  EXPECT_NE(img.tail_why.find("bytes_written"), std::string::npos) << img.tail_why;
  rd::WalkResult w = rd::walk(img, {});
  EXPECT_TRUE(w.complete) << w.stop_reason;
  EXPECT_EQ(payloads(w), payloads(good));
  rd::RepairReport rep;
  EXPECT_EQ(repair_of(*b, rep), rd::RepairStatus::repaired);
  EXPECT_TRUE(report_mentions(rep, "tail " + std::to_string(t + (1ULL << 40)) + " is damaged"));
  EXPECT_EQ(rr.h.tail.load(), t);
  EXPECT_EQ(rep.kept_msgs, good.messages.size());
  rd::Image again = parsed(*b);
  EXPECT_FALSE(again.tail_rebuilt);
  EXPECT_TRUE(again.positions_ok);
  // Head damaged instead (tail agrees with bytes_written): head is rebuilt, as before.
  rr.h.head = t + 5;
  rd::Image img2 = parsed(*b);
  EXPECT_FALSE(img2.tail_rebuilt);
  EXPECT_FALSE(img2.positions_ok);
  EXPECT_EQ(payloads(rd::walk(img2, {})).back(), msgs.back());
}

TEST(DumpRepair, UndecodableRecordBatchesAreFoundAndKeptNotFixed) {
  auto b = fresh_ring();
  RawRing rr(*b);
  rr.append(std::string("\xb1\x05garbage", 9));  // the batch marker, then nothing that decodes
  std::uint8_t hdr[kBatchHeaderMax], rec[kRecordHeaderMax];
  std::string ok(reinterpret_cast<char*>(hdr), encode_batch_header(hdr, 7, VxidKind::client, kBatchFirst | kBatchLast));
  ok.append(reinterpret_cast<char*>(rec), encode_record_header(rec, Tag::ReqURL, 2, false));
  ok += "/x";
  rr.append(ok);
  std::vector<std::uint8_t> before(b->p, b->p + b->n);
  rd::RepairReport rep;
  EXPECT_EQ(repair_of(*b, rep), rd::RepairStatus::clean);  // nothing to change: a second repair agrees
  EXPECT_EQ(rep.bad_records, 1u);
  EXPECT_EQ(rep.kept_msgs, 2u);
  EXPECT_EQ(std::vector<std::uint8_t>(b->p, b->p + b->n), before);
  std::string text = rd::format_report(rep, false);
  EXPECT_NE(text.find("found: 1 messages start like record batches but do not decode"), std::string::npos) << text;
  EXPECT_NE(rd::format_report(rep, true).find("\"bad_records\":1"), std::string::npos);
}

TEST(DumpRepair, LockOwnerIsJudgedByPidAndStartTime) {
  pid_t child = fork_child();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  for (bool reused : {false, true}) {
    auto b = fresh_ring();
    RawRing rr(*b);
    rr.append("a");
    std::uint64_t t = rr.tail();
    rr.h.owner = format::owner_word(static_cast<std::uint32_t>(child), 2);
    // The slot is the recorded owner's; a pid reused by another process has another start time.
    rr.h.writers[2].start_time = reused ? 1 : process_start_time(child);
    rr.h.tail = t | format::kTailLock;
    rd::Image img = parsed(*b);
    EXPECT_EQ(rd::lock_owner(img).alive, !reused);
    EXPECT_EQ(rd::lock_owner(img).slot, 2);
    std::string info = rd::format_info(img, rd::walk(img, {}), false);
    EXPECT_NE(info.find(reused ? "writer slot 2, dead" : "writer slot 2, alive"), std::string::npos) << info;
    rd::RepairReport rep;
    std::string err;
    EXPECT_EQ(rd::repair(img, {.in_place = true}, rep, err), reused ? rd::RepairStatus::repaired : rd::RepairStatus::refused)
        << err;
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}
