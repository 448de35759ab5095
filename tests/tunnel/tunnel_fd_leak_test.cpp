// Thousands of tunnels (spliced, copied, reset, timed out) leave no file descriptor
// behind: /proc/self/fd counts the same before and after, once the pool is trimmed.
// And the pool itself: bounded, reuses only empty pipes.
#include <gtest/gtest.h>
#include <sys/ioctl.h>

#include "tunnel_harness.hpp"

namespace ringproxy::tunnel::test {
namespace {

using namespace std::chrono_literals;

TEST(PipePool, BoundedAndReusesOnlyEmptyPipes) {
  std::size_t fds0 = count_fds();
  {
    PipePool pool({.pipe_size = 128 * 1024, .max_pipes = 3, .max_idle = 1});
    auto a = pool.acquire(), b = pool.acquire(), c = pool.acquire();
    ASSERT_TRUE(a && b && c);
    EXPECT_FALSE(pool.acquire()) << "past max_pipes";
    EXPECT_EQ(pool.refused(), 1u);
    EXPECT_EQ(count_fds(), fds0 + 6);  // two fds per pipe
    EXPECT_GE(a->size, 64u * 1024);
    // A pipe with data in it is closed, never handed to the next tunnel.
    ASSERT_EQ(::write(a->wr, "x", 1), 1);
    pool.release(*a, false);
    pool.release(*b, true);
    pool.release(*c, true);  // beyond max_idle: closed
    EXPECT_EQ(pool.idle(), 1u);
    EXPECT_EQ(pool.in_use(), 0u);
    EXPECT_EQ(count_fds(), fds0 + 2);
    auto d = pool.acquire();
    ASSERT_TRUE(d);
    EXPECT_EQ(pool.reused(), 1u);
    int pending = -1;
    ASSERT_EQ(::ioctl(d->rd, FIONREAD, &pending), 0);
    EXPECT_EQ(pending, 0);
    pool.release(*d, true);
  }
  EXPECT_EQ(count_fds(), fds0);
}

TEST(TunnelFdLeak, ThousandsOfTunnelsLeaveNoFd) {
  std::size_t fds0 = count_fds();
  {
    // The tunnels left to the idle timeout run on a loop of their own with a short one;
    // the others must not time out while a loaded machine gets round to them.
    TunnelOptions o, short_idle;
    o.idle_timeout = 60s;
    short_idle.idle_timeout = 100ms;
    EpollLoop loop({.pipe_size = 64 * 1024, .max_pipes = 16, .max_idle = 8}, o);
    EpollLoop idle_loop({.pipe_size = 64 * 1024, .max_pipes = 16, .max_idle = 8}, short_idle);
    loop.start();
    idle_loop.start();
    constexpr int kRounds = 250, kBatch = 8;  // 2000 tunnels, 8 at a time (some copy: pool of 16 pipes)
    auto left_idle = [](int round, int i) { return (round * kBatch + i) % 4 == 3 && round % 25 == 0; };
    std::string msg = pattern(3000, 5);
    std::vector<Result> all;
    for (int round = 0; round < kRounds; ++round) {
      std::vector<Wiring> ws;
      std::vector<std::size_t> ids;
      for (int i = 0; i < kBatch; ++i) {
        ws.push_back(Wiring::make());
        ids.push_back((left_idle(round, i) ? idle_loop : loop).add(start_of(ws.back())));
      }
      for (int i = 0; i < kBatch; ++i) {
        Wiring& w = ws[std::size_t(i)];
        int kind = (round * kBatch + i) % 4;
        if (left_idle(round, i)) continue;  // a few are left to the idle timeout
        ASSERT_TRUE(write_all(w.client_peer, msg.data(), msg.size()));
        char buf[3000];
        ASSERT_EQ(::recv(w.backend_peer, buf, sizeof buf, MSG_WAITALL), 3000);
        if (kind == 2) {  // abrupt
          linger lg{1, 0};
          ::setsockopt(w.client_peer, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
          ::close(w.client_peer);
          w.client_peer = -1;
        } else {
          ::shutdown(w.client_peer, SHUT_WR);
          ::shutdown(w.backend_peer, SHUT_WR);
        }
      }
      for (std::size_t i = 0; i < ids.size(); ++i) {
        Result r;
        ASSERT_TRUE((left_idle(round, int(i)) ? idle_loop : loop).wait(ids[i], &r, 30s))
            << "tunnel " << ids[i] << " never ended";
        all.push_back(r);
      }
      for (auto& w : ws) {
        if (w.client_peer >= 0) ::close(w.client_peer);
        ::close(w.backend_peer);
      }
    }
    int eof = 0, err = 0, tmo = 0, fb = 0;
    for (auto& r : all) {
      eof += r.reason == EndReason::eof;
      err += r.reason == EndReason::error;
      tmo += r.reason == EndReason::timeout;
      fb += r.fell_back;
    }
    EXPECT_EQ(all.size(), std::size_t(kRounds * kBatch));
    EXPECT_GT(eof, 1000);
    EXPECT_GT(err, 0);
    EXPECT_GT(tmo, 0);
    EXPECT_EQ(eof + err + tmo, int(all.size()));
    EXPECT_EQ(loop.live(), 0u);
    EXPECT_EQ(idle_loop.live(), 0u);
    std::size_t in_use = 0, idle = 0;
    loop.call([&] {
      in_use = loop.pool().in_use();
      idle = loop.pool().idle();
    });
    EXPECT_EQ(in_use, 0u);
    EXPECT_LE(idle, 8u);
    loop.stop();
    loop.pool().trim();
    idle_loop.stop();
    idle_loop.pool().trim();
    (void)fb;
  }
  EXPECT_EQ(count_fds(), fds0);
}

}  // namespace
}  // namespace ringproxy::tunnel::test
