// Lease semantics of the object reader and the scatter array: 0 means no room, never
// end; END only by flag; kLeaseAgain arms a notification; kLeaseReturnFirst; errors;
// transient objects freeing behind the reader; lease accounting; LRU.
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "delivery_util.hpp"

using namespace ringproxy::delivery;
using namespace dtest;

TEST(ScatterArray, CapacityUsedEndAndDropFront) {
  ScatterArray sa(3);
  EXPECT_EQ(sa.capacity(), 3u);
  EXPECT_TRUE(sa.empty());
  char b[4] = "abc";
  EXPECT_TRUE(sa.add(1, b, 1));
  EXPECT_TRUE(sa.add_noret(b, 0));  // zero-length extents are allowed
  EXPECT_TRUE(sa.add(3, b + 2, 1));
  EXPECT_TRUE(sa.full());
  EXPECT_FALSE(sa.add(4, b, 1));
  EXPECT_EQ(sa.used(), 3u);
  EXPECT_EQ(sa.bytes(), 2u);
  EXPECT_FALSE(sa.end());
  sa.drop_front(2);
  EXPECT_EQ(sa.used(), 1u);
  EXPECT_EQ(sa.lease(0), 3u);
  EXPECT_EQ(sa.at(0).iov_base, b + 2);
  sa.set_end();
  EXPECT_TRUE(sa.end());
  sa.reset();
  EXPECT_TRUE(sa.empty());
  EXPECT_FALSE(sa.end());
}

struct CountSink : LeaseSink {
  std::vector<Lease> got;
  int calls = 0;
  void give_back(std::span<const Lease> l) noexcept override {
    ++calls;
    got.insert(got.end(), l.begin(), l.end());
  }
};

TEST(LeaseBatch, BatchesAndDropsNoReturn) {
  CountSink s;
  {
    LeaseBatch b(s, 4);
    for (Lease l = 10; l < 20; ++l) b.put(l);
    b.put(kLeaseNoReturn);
    EXPECT_EQ(s.calls, 2);  // two full batches of 4
    EXPECT_EQ(b.pending(), 2u);
  }
  EXPECT_EQ(s.calls, 3);  // the rest on destruction
  ASSERT_EQ(s.got.size(), 10u);
  for (Lease l = 10; l < 20; ++l) EXPECT_EQ(s.got[l - 10], l);
}

TEST(Lease, ZeroMeansNoRoomNotEnd) {
  Store st({.capacity = 1 << 20, .segment_size = 100});
  std::string data = random_bytes(1000);
  ObjRef o = make_object(st, data, 37);
  ObjectReader r(o, nullptr);
  ScatterArray sa(4);
  std::string got;
  int zero_without_end = 0;
  while (true) {
    int n = r.lease(sa);
    ASSERT_GE(n, 0);
    if (n == 0 && !sa.end()) {
      ++zero_without_end;
      ASSERT_TRUE(sa.full());  // 0 only when there is no room
    }
    for (std::size_t i = 0; i < sa.used(); ++i) got.append((const char*)sa.at(i).iov_base, sa.at(i).iov_len);
    bool end = sa.end();
    std::vector<Lease> ls(sa.leases().begin(), sa.leases().end());
    r.give_back(ls);
    sa.reset();
    // A full array: the next call adds nothing and says 0, even with data left.
    ScatterArray full(1);
    full.add_noret("x", 1);
    if (!end) {
      EXPECT_EQ(r.lease(full), 0);
    }
    if (end) break;
  }
  EXPECT_TRUE(same(got, data));
  EXPECT_EQ(r.outstanding(), 0u);
  // After the end, more calls keep the END flag and add nothing.
  ScatterArray again(4);
  EXPECT_EQ(r.lease(again), 0);
  EXPECT_TRUE(again.end());
  EXPECT_EQ(again.used(), 0u);
}

TEST(Lease, EmptyObjectIsJustEnd) {
  Store st;
  ObjRef o = st.new_object(false);
  o->finish();
  ObjectReader r(o, nullptr);
  ScatterArray sa(2);
  EXPECT_EQ(r.lease(sa), 0);
  EXPECT_TRUE(sa.end());
}

TEST(Lease, AgainArmsOneShotNotification) {
  Store st({.segment_size = 64});
  ObjRef o = st.new_object(false);
  ReadyNotify n;
  ObjectReader r(o, &n);
  ScatterArray sa(8);
  EXPECT_EQ(r.lease(sa), kLeaseAgain);
  EXPECT_TRUE(n.armed);
  EXPECT_EQ(r.lease(sa), kLeaseAgain);  // arming twice is one notification
  EXPECT_FALSE(n.take());
  o->append("hello", 5);
  EXPECT_TRUE(n.take());  // fired by the fetch side
  EXPECT_FALSE(n.armed);
  EXPECT_FALSE(n.take());  // one-shot, and take() clears the sticky flag
  EXPECT_EQ(r.lease(sa), 1);
  EXPECT_EQ(sa.at(0).iov_len, 5u);
  EXPECT_FALSE(sa.end());
  EXPECT_EQ(r.lease(sa), kLeaseAgain);
  o->append(" world", 6);
  EXPECT_TRUE(n.take());
  o->finish();  // no notification armed now: nothing fires
  EXPECT_FALSE(n.take());
  EXPECT_EQ(r.lease(sa), 1);
  EXPECT_TRUE(sa.end());
  EXPECT_EQ(std::string((char*)sa.at(1).iov_base, 6), " world");
  std::vector<Lease> ls(sa.leases().begin(), sa.leases().end());
  r.give_back(ls);
}

TEST(Lease, FailedObjectIsAnErrorAfterItsData) {
  Store st;
  ObjRef o = st.new_object(false);
  o->append("abc", 3);
  ReadyNotify n;
  ObjectReader r(o, &n);
  ScatterArray sa(8);
  EXPECT_EQ(r.lease(sa), 1);
  EXPECT_EQ(r.lease(sa), kLeaseAgain);
  o->fail();
  EXPECT_TRUE(n.take());
  EXPECT_EQ(r.lease(sa), kLeaseError);
  EXPECT_FALSE(sa.end());
  std::vector<Lease> ls(sa.leases().begin(), sa.leases().end());
  r.give_back(ls);
}

TEST(Lease, ReturnLeasesFirst) {
  Store st({.segment_size = 10});
  ObjRef o = make_object(st, random_bytes(100), 10);
  ObjectReader r(o, nullptr, 3);
  ScatterArray sa(16);
  EXPECT_EQ(r.lease(sa), 10);  // one call may pass the limit; the next is refused
  ScatterArray sa2(4);
  EXPECT_EQ(r.lease(sa2), kLeaseReturnFirst);
  std::vector<Lease> ls(sa.leases().begin(), sa.leases().end());
  r.give_back(std::span(ls).first(8));
  EXPECT_EQ(r.outstanding(), 2u);
  ScatterArray sb(4);
  EXPECT_EQ(r.lease(sb), 0);
  EXPECT_TRUE(sb.end());
  r.give_back(std::span(ls).subspan(8));
}

TEST(Lease, NoReturnValueIsIgnoredOnReturn) {
  Store st;
  ObjRef o = make_object(st, "xyz");
  ObjectReader r(o, nullptr);
  Lease l[2] = {kLeaseNoReturn, kLeaseNoReturn};
  r.give_back(l);
  EXPECT_EQ(r.outstanding(), 0u);
}

TEST(Lease, SkipStartsLater) {
  Store st({.segment_size = 16});
  std::string d = random_bytes(100);
  ObjRef o = make_object(st, d, 7);
  Chain c(o, nullptr);
  c.reader().skip(45);
  std::string got;
  ASSERT_TRUE(drain(c, &got));
  EXPECT_TRUE(same(got, d.substr(45)));
}

#ifdef RINGPROXY_LEASE_ACCOUNTING
TEST(LeaseAccountingDeathTest, DoubleReturnAsserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Store st;
        ObjRef o = make_object(st, "abc");
        ObjectReader r(o, nullptr);
        ScatterArray sa(2);
        r.lease(sa);
        Lease l = sa.lease(0);
        r.give_back({&l, 1});
        r.give_back({&l, 1});
      },
      "lease accounting");
}
TEST(LeaseAccountingDeathTest, UnreturnedLeaseAssertsAtRelease) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Store st;
        ObjRef o = make_object(st, "abc");
        ObjectReader r(o, nullptr);
        ScatterArray sa(2);
        r.lease(sa);
      },
      "lease accounting");
}
#endif

TEST(Transient, PassResponseStaysInsideItsWindow) {
  // A 1 GiB pass body through a 1 MiB window: the producer stops when the window is
  // full and goes on when the reader's returned leases free segments behind it.
  const std::size_t kTotal = std::size_t(1) << 30, kWin = 1 << 20, kSeg = 64 << 10;
  Store st({.capacity = 4 << 20, .segment_size = kSeg, .transient_window = kWin});
  ObjRef o = st.new_object(true);
  ReadyNotify space;
  Chain c(o, nullptr);
  ScatterArray sa(16);
  std::string chunk = random_bytes(100000, 7);
  std::size_t produced = 0, consumed = 0;
  std::uint32_t crc_in = 0, crc_out = 0;
  while (consumed < kTotal) {
    while (produced < kTotal) {
      std::size_t k = std::min(chunk.size() - produced % chunk.size(), kTotal - produced);
      ssize_t n = o->append(chunk.data() + produced % chunk.size(), k);
      ASSERT_GE(n, 0);
      crc_in = crc32_z(crc_in, (const Bytef*)chunk.data() + produced % chunk.size(), std::size_t(n));
      produced += std::size_t(n);
      if (std::size_t(n) < k) {
        ASSERT_TRUE(o->arm_space(&space));  // full: wait for the reader
        break;
      }
    }
    if (produced == kTotal) o->finish();
    int r = c.pull(sa);
    ASSERT_TRUE(r > 0 || sa.end()) << r;
    for (std::size_t i = 0; i < sa.used(); ++i) {
      crc_out = crc32_z(crc_out, (const Bytef*)sa.at(i).iov_base, sa.at(i).iov_len);
      consumed += sa.at(i).iov_len;
    }
    ASSERT_LE(o->held_bytes(), kWin);
    c.give_all(sa);
    c.flush_returns();
    if (produced < kTotal) {
      EXPECT_TRUE(space.take());  // the returns made room and fired the producer's notification
    }
  }
  EXPECT_EQ(consumed, kTotal);
  EXPECT_EQ(crc_in, crc_out);
  EXPECT_LE(o->peak_held_bytes(), kWin);
  EXPECT_LE(o->held_bytes(), kSeg);  // all but the last segment freed already
  EXPECT_EQ(st.used(), 0u);          // pass objects never touch the cached pool
}

TEST(Store, LruEvictsLeastRecentlyUsedAndCounts) {
  Store st({.capacity = 4 * 1024, .segment_size = 1024});
  std::vector<ObjRef> idx;
  std::vector<std::uint64_t> nuked;
  st.set_nuke_hook([&](ObjRef o) {
    nuked.push_back(o->id());
    for (auto& p : idx)
      if (p == o) p.reset();
  });
  for (int i = 0; i < 4; ++i) {
    idx.push_back(make_object(st, std::string(1000, char('a' + i))));
    st.lru_insert(*idx.back());
  }
  EXPECT_EQ(st.used(), 4096u);
  std::uint64_t first = idx[0]->id(), second = idx[1]->id();
  st.lru_touch(*idx[0]);  // 0 is now the most recently used: 1 goes first
  ObjRef extra = make_object(st, std::string(1000, 'z'));
  ASSERT_TRUE(extra);
  EXPECT_EQ(st.n_lru_nuked(), 1u);
  ASSERT_EQ(nuked.size(), 1u);
  EXPECT_EQ(nuked[0], second);
  EXPECT_TRUE(idx[0] && idx[0]->id() == first);
  EXPECT_LE(st.used(), 4096u);
  for (auto& p : idx)
    if (p) st.lru_remove(*p);
}

TEST(Store, ObjectsBeingFetchedAreNotEvictedAndFailWhenFull) {
  Store st({.capacity = 2048, .segment_size = 1024});
  ObjRef a = st.new_object(false);  // busy: not in the LRU
  std::string big(3000, 'x');
  EXPECT_EQ(a->append(big.data(), big.size()), -1);
  EXPECT_TRUE(a->failed());
  EXPECT_GE(st.n_alloc_fail(), 1u);
}

TEST(Transient, VectoredReceiveSpansKeepTheBytesInOrder) {
  // A receive into several segments at once (write_spans, io_uring recvmsg) that fills
  // only part of them: the reader, pulling while the spans are out, must neither skip
  // the partly filled segment at the write position (segments follow it) nor see the
  // segments added ahead; commit() frees those the bytes did not reach.
  const std::size_t kTotal = 8 << 20, kWin = 1 << 20;
  Store st({.capacity = 4 << 20, .segment_size = 64 << 10, .transient_window = kWin});
  ObjRef o = st.new_object(true);
  Chain c(o, nullptr);
  ScatterArray sa(16);
  std::string src = random_bytes(kTotal, 11), got;
  std::mt19937 g(5);
  std::size_t produced = 0;
  int multi = 0;
  while (got.size() < kTotal) {
    iovec iov[8];
    std::size_t n = produced < kTotal ? o->write_spans(iov, 8, kTotal - produced) : 0;
    if (n > 1) ++multi;
    if (n > 0 && g() % 4 == 0) {
      // A receive that was not queued: the next call starts at the same place.
      iovec again[8];
      ASSERT_GE(o->write_spans(again, 8, kTotal - produced), 1u);
      ASSERT_EQ(again[0].iov_base, iov[0].iov_base);
    }
    std::size_t room = 0;
    for (std::size_t i = 0; i < n; ++i) room += iov[i].iov_len;
    // The reader runs while the spans are out.
    int r = c.pull(sa);
    ASSERT_TRUE(r >= 0 || r == kLeaseAgain) << r;
    for (std::size_t i = 0; i < sa.used(); ++i) got.append(static_cast<const char*>(sa.at(i).iov_base), sa.at(i).iov_len);
    c.give_all(sa);
    c.flush_returns();
    if (n == 0) continue;  // window full: the pull above freed room
    // The "kernel" fills a random prefix of the spans.
    std::size_t fill = std::min<std::size_t>(room, 1 + g() % (room + room / 2));
    std::size_t left = fill, off = produced;
    for (std::size_t i = 0; i < n && left > 0; ++i) {
      std::size_t k = std::min(left, iov[i].iov_len);
      std::memcpy(iov[i].iov_base, src.data() + off, k);
      off += k;
      left -= k;
    }
    o->commit(fill);
    produced += fill;
    ASSERT_LE(o->held_bytes(), kWin);
    if (produced == kTotal) o->finish();
  }
  EXPECT_GT(multi, 0);
  EXPECT_TRUE(same(got, src));
}
