// Streaming busy objects: a slow producer thread, many consumers on two event-loop
// threads woken through eventfd. Each consumer arms a one-shot notification when it
// has caught up; a lost wake-up hangs a consumer, which the bounded wait turns into a
// failure. Run under TSan.
#include <poll.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "delivery_util.hpp"
#include "observe.hpp"

using namespace ringproxy::delivery;
using namespace dtest;

namespace {
struct Consumer {
  ReadyNotify notify;
  std::unique_ptr<Chain> chain;
  std::string got;
  Crc32Filter* crc = nullptr;
  bool done = false;
  bool error = false;
};

// One event loop: runs its consumers until all are done or nothing happens for 20 s.
void loop(std::vector<Consumer*> cs, LoopWaker* w, std::atomic<int>* stuck, std::atomic<pid_t>* tid) {
  tid->store(ringlog::test::this_tid());
  ScatterArray sa(4);
  std::size_t left = cs.size();
  for (auto* c : cs) c->notify.ready.store(true);  // first pass: everyone pulls
  while (left) {
    for (auto* c : cs) {
      if (c->done || !c->notify.take()) continue;
      while (true) {
        int r = c->chain->pull(sa);
        for (std::size_t i = 0; i < sa.used(); ++i) c->got.append((char*)sa.at(i).iov_base, sa.at(i).iov_len);
        bool end = sa.end();
        c->chain->give_all(sa);
        c->chain->flush_returns();
        if (end || r == kLeaseError) {
          c->done = true;
          c->error = r == kLeaseError;
          --left;
          break;
        }
        if (r == kLeaseAgain) break;  // armed: the producer will wake us
      }
    }
    if (!left) break;
    pollfd p{w->fd(), POLLIN, 0};
    if (::poll(&p, 1, 20000) == 0) {  // no wake-up for 20 s: one was lost
      stuck->fetch_add(1);
      break;
    }
    w->drain();
  }
  tid->store(0);  // done: nothing left to wait for
}

// A loop is idle when it sleeps in poll(2) on its waker (each of its consumers has
// everything fetched so far and is armed on the object) or has finished.
bool idle(const std::atomic<pid_t>& tid) {
  pid_t t = tid.load();
  return t == 0 || ringlog::test::sleeping_in(t, SYS_poll) || ringlog::test::sleeping_in(t, SYS_ppoll);
}
}  // namespace

TEST(Streaming, SlowProducerManyConsumers) {
  Store st({.segment_size = 1000});
  ObjRef o = st.new_object(false);
  const std::size_t kConsumers = 16;
  std::string body = random_bytes(300000, 11);
  std::uint32_t crc = crc32_z(0, (const Bytef*)body.data(), body.size());
  LoopWaker w[2];
  std::vector<std::unique_ptr<Consumer>> cs;
  std::vector<Consumer*> per[2];
  for (std::size_t i = 0; i < kConsumers; ++i) {
    auto c = std::make_unique<Consumer>();
    c->notify.waker = &w[i % 2];
    c->chain = std::make_unique<Chain>(o, &c->notify);
    if (i % 4 == 1) c->chain->push(std::make_unique<ChunkedFilter>());
    if (i % 4 == 2) {
      auto f = std::make_unique<Crc32Filter>(crc);
      c->crc = f.get();
      c->chain->push(std::move(f));
    }
    if (i % 4 == 3) c->chain->push(std::make_unique<ZlibFilter>(ZlibFilter::Mode::gzip));
    per[i % 2].push_back(c.get());
    cs.push_back(std::move(c));
  }
  std::atomic<int> stuck{0};
  std::atomic<pid_t> tid0{-1}, tid1{-1};  // -1: not started yet
  std::thread t0(loop, per[0], &w[0], &stuck, &tid0), t1(loop, per[1], &w[1], &stuck, &tid1);
  std::thread producer([&] {
    std::mt19937 g(5);
    for (std::size_t i = 0; i < body.size();) {
      std::size_t k = std::min<std::size_t>(1 + g() % 3000, body.size() - i);
      ASSERT_EQ(o->append(body.data() + i, k), ssize_t(k));
      i += k;
      if (g() % 4 == 0) std::this_thread::yield();
      // Now and then the consumers catch up and wait for the object's notification:
      // the wake-up path under test (seen in /proc, not hoped for after a sleep).
      if (g() % 32 == 0) ringlog::test::wait_until([&] { return tid0 >= 0 && tid1 >= 0 && idle(tid0) && idle(tid1); });
    }
    o->finish();
  });
  producer.join();
  t0.join();
  t1.join();
  EXPECT_EQ(stuck.load(), 0) << "a consumer waited 20 s for a wake-up that never came";
  for (std::size_t i = 0; i < kConsumers; ++i) {
    Consumer& c = *cs[i];
    ASSERT_TRUE(c.done && !c.error) << i;
    bool ok = true;
    if (i % 4 == 1) {
      EXPECT_TRUE(same(dechunk(c.got, &ok), body)) << i;
      EXPECT_TRUE(ok);
    } else if (i % 4 == 3) {
      EXPECT_TRUE(same(gunzip(c.got), body)) << i;
    } else {
      EXPECT_TRUE(same(c.got, body)) << i;
    }
    if (c.crc) {
      EXPECT_FALSE(c.crc->mismatch());
    }
  }
}

TEST(Streaming, FailedFetchReachesEveryWaiter) {
  Store st({.segment_size = 1000});
  ObjRef o = st.new_object(false);
  LoopWaker w;
  std::vector<std::unique_ptr<Consumer>> cs;
  std::vector<Consumer*> ptrs;
  for (int i = 0; i < 4; ++i) {
    auto c = std::make_unique<Consumer>();
    c->notify.waker = &w;
    c->chain = std::make_unique<Chain>(o, &c->notify);
    ptrs.push_back(c.get());
    cs.push_back(std::move(c));
  }
  std::atomic<int> stuck{0};
  std::atomic<pid_t> tid{0};
  std::thread t(loop, ptrs, &w, &stuck, &tid);
  std::thread producer([&] {
    std::string part(5000, 'p');
    for (int i = 0; i < 20; ++i) {
      o->append(part.data(), part.size());
      std::this_thread::yield();
    }
    o->fail();
  });
  producer.join();
  t.join();
  EXPECT_EQ(stuck.load(), 0);
  for (auto& c : cs) {
    EXPECT_TRUE(c->done);
    EXPECT_TRUE(c->error);
    EXPECT_EQ(c->got, std::string(100000, 'p'));  // everything fetched before the failure
  }
}

TEST(Streaming, PassObjectProducerWaitsForTheReader) {
  // The transient window across threads: the producer sleeps on its space
  // notification, the reader frees segments behind it.
  const std::size_t kTotal = 64 << 20, kWin = 256 << 10;
  Store st({.segment_size = 16 << 10, .transient_window = kWin});
  ObjRef o = st.new_object(true);
  LoopWaker pw, cw;
  ReadyNotify space(&pw);
  Consumer c;
  c.notify.waker = &cw;
  c.chain = std::make_unique<Chain>(o, &c.notify);
  auto f = std::make_unique<Crc32Filter>();
  Crc32Filter* crcf = f.get();
  c.chain->push(std::move(f));
  std::uint32_t crc_in = 0;
  std::atomic<int> stuck{0};
  std::thread producer([&] {
    std::string chunk = random_bytes(7000, 12);
    std::size_t done = 0;
    while (done < kTotal) {
      std::size_t k = std::min(chunk.size(), kTotal - done);
      ssize_t n = o->append(chunk.data(), k);
      ASSERT_GE(n, 0);
      crc_in = crc32_z(crc_in, (const Bytef*)chunk.data(), std::size_t(n));
      done += std::size_t(n);
      if (std::size_t(n) < k) {
        if (o->arm_space(&space)) {
          pollfd p{pw.fd(), POLLIN, 0};
          while (!space.take()) {
            if (::poll(&p, 1, 20000) == 0) {
              stuck.fetch_add(1);
              o->fail();
              return;
            }
            pw.drain();
          }
        }
      }
    }
    o->finish();
  });
  std::atomic<pid_t> tid{0};
  loop({&c}, &cw, &stuck, &tid);
  producer.join();
  EXPECT_EQ(stuck.load(), 0);
  EXPECT_TRUE(c.done && !c.error);
  EXPECT_EQ(c.got.size(), kTotal);
  EXPECT_EQ(crcf->crc(), crc_in);
  EXPECT_LE(o->peak_held_bytes(), kWin);
}
