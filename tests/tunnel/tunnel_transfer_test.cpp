// Tunnels move bytes exactly, both ways, over real loopback TCP: MB payloads in both
// directions at once, half-close of each direction, initial bytes first, a slow reader
// holding the writer back, and the copy fallback (pool exhausted, splice refused) still
// byte-exact. Each case runs spliced and copied.
#include <sys/ioctl.h>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <future>

#include "ringlog/log.hpp"
#include "observe.hpp"
#include "records_test_util.hpp"
#include "test_util.hpp"
#include "tunnel_harness.hpp"

namespace ringproxy::tunnel::test {
namespace {

// The loop thread sleeps in epoll_wait: it has done all it can for now.
bool loop_sleeps(const EpollLoop& loop) {
  const pid_t t = loop.tid();
  return t && (ringlog::test::sleeping_in(t, SYS_epoll_wait) || ringlog::test::sleeping_in(t, SYS_epoll_pwait));
}

using namespace std::chrono_literals;

TunnelOptions opts_for(Mode m) {
  TunnelOptions o;
  o.splice = m == Mode::splice;
  return o;
}

// Runs a full exchange: client sends up_n bytes and half-closes, backend sends down_n
// bytes and half-closes, at the same time; checks both sides byte for byte.
void exchange(Wiring w, std::size_t up_n, std::size_t down_n) {
  std::string up = pattern(up_n, 1), down = pattern(down_n, 2);
  auto cw = std::async(std::launch::async, [&] {
    bool ok = write_all(w.client_peer, up.data(), up.size());
    ::shutdown(w.client_peer, SHUT_WR);
    return ok;
  });
  auto bw = std::async(std::launch::async, [&] {
    bool ok = write_all(w.backend_peer, down.data(), down.size());
    ::shutdown(w.backend_peer, SHUT_WR);
    return ok;
  });
  auto br = std::async(std::launch::async, [&] { return read_all(w.backend_peer); });
  std::string got_down = read_all(w.client_peer);
  std::string got_up = br.get();
  EXPECT_TRUE(cw.get());
  EXPECT_TRUE(bw.get());
  EXPECT_EQ(got_up.size(), up.size());
  EXPECT_TRUE(got_up == up) << "client -> backend bytes differ";
  EXPECT_EQ(got_down.size(), down.size());
  EXPECT_TRUE(got_down == down) << "backend -> client bytes differ";
  ::close(w.client_peer);
  ::close(w.backend_peer);
}

class TunnelTransfer : public ::testing::TestWithParam<Mode> {};

TEST_P(TunnelTransfer, MegabytesBothWaysAtOnceByteExact) {
  EpollLoop loop({}, opts_for(GetParam()));
  loop.start();
  Wiring w = Wiring::make();
  auto id = loop.add(start_of(w));
  exchange(w, 8u << 20, 6u << 20);
  Result r;
  ASSERT_TRUE(loop.wait(id, &r));
  EXPECT_EQ(r.reason, EndReason::eof) << r.detail;
  EXPECT_EQ(r.to_backend, 8u << 20);
  EXPECT_EQ(r.to_client, 6u << 20);
  EXPECT_FALSE(r.fell_back);
  if (GetParam() == Mode::splice) {
    EXPECT_EQ(r.up, Mode::splice);
    EXPECT_EQ(r.down, Mode::splice);
    EXPECT_EQ(r.spliced, 14u << 20);
    EXPECT_EQ(r.copied, 0u);
    EXPECT_GT(r.pipe_max, 0u);
    EXPECT_LE(r.pipe_max, loop.pool().options().pipe_size);
  } else {
    EXPECT_EQ(r.spliced, 0u);
    EXPECT_EQ(r.copied, 14u << 20);
  }
}

TEST_P(TunnelTransfer, HalfCloseEachDirectionKeepsTheOtherOpen) {
  EpollLoop loop({}, opts_for(GetParam()));
  loop.start();
  for (int order = 0; order < 2; ++order) {
    Wiring w = Wiring::make();
    auto id = loop.add(start_of(w));
    // order 0: the client finishes first (a request, then the response); order 1: the
    // backend finishes first and the client keeps sending after seeing its EOF.
    int first_w = order == 0 ? w.client_peer : w.backend_peer;
    int first_r = order == 0 ? w.backend_peer : w.client_peer;
    std::string a = pattern(1u << 20, 10 + order), b = pattern(2u << 20, 20 + order);
    auto wr = std::async(std::launch::async, [&] {
      bool ok = write_all(first_w, a.data(), a.size());
      ::shutdown(first_w, SHUT_WR);
      return ok;
    });
    std::string got_a = read_all(first_r);  // EOF arrives while the other way is open
    ASSERT_TRUE(wr.get());
    EXPECT_TRUE(got_a == a) << "first direction: " << got_a.size() << " bytes";
    // The other direction still works after the half-close.
    auto wr2 = std::async(std::launch::async, [&] {
      bool ok = write_all(first_r, b.data(), b.size());
      ::shutdown(first_r, SHUT_WR);
      return ok;
    });
    std::string got_b = read_all(first_w);
    ASSERT_TRUE(wr2.get());
    EXPECT_TRUE(got_b == b) << "second direction: " << got_b.size() << " bytes";
    Result r;
    ASSERT_TRUE(loop.wait(id, &r));
    EXPECT_EQ(r.reason, EndReason::eof) << r.detail;
    EXPECT_EQ(r.to_backend + r.to_client, a.size() + b.size());
    ::close(w.client_peer);
    ::close(w.backend_peer);
  }
}

TEST_P(TunnelTransfer, InitialBytesGoFirst) {
  EpollLoop loop({}, opts_for(GetParam()));
  loop.start();
  Wiring w = Wiring::make();
  std::string hello = "HTTP/1.1 200 Connection established\r\n\r\n";
  std::string early = pattern(100000, 7);  // read by the host past the request head
  TunnelStart ts = start_of(w);
  ts.to_backend = early;
  ts.to_client = hello;
  auto id = loop.add(std::move(ts));
  std::string up = pattern(3u << 20, 8), down = pattern(3u << 20, 9);
  auto cw = std::async(std::launch::async, [&] {
    write_all(w.client_peer, up.data(), up.size());
    ::shutdown(w.client_peer, SHUT_WR);
  });
  auto bw = std::async(std::launch::async, [&] {
    write_all(w.backend_peer, down.data(), down.size());
    ::shutdown(w.backend_peer, SHUT_WR);
  });
  auto br = std::async(std::launch::async, [&] { return read_all(w.backend_peer); });
  std::string got_down = read_all(w.client_peer);
  std::string got_up = br.get();
  cw.get();
  bw.get();
  EXPECT_TRUE(got_up == early + up);
  EXPECT_TRUE(got_down == hello + down);
  Result r;
  ASSERT_TRUE(loop.wait(id, &r));
  EXPECT_EQ(r.to_backend, early.size() + up.size());
  EXPECT_EQ(r.to_client, hello.size() + down.size());
  EXPECT_EQ(r.spliced + r.copied, r.to_backend + r.to_client);
  EXPECT_GE(r.copied, early.size() + hello.size());  // the initial bytes are copied once
  ::close(w.client_peer);
  ::close(w.backend_peer);
}

// A client that does not read holds the backend back: the tunnel keeps at most one
// pipe (or one buffer) per direction, so the backend's writes stop once the socket
// buffers on the way are full; then a slow reader gets every byte.
TEST_P(TunnelTransfer, SlowReaderBackpressure) {
  EpollLoop loop({}, opts_for(GetParam()));
  loop.start();
  Wiring w = Wiring::make();
  int small = 64 * 1024;  // the kernel doubles it
  for (int fd : {w.client_peer, w.client_fd, w.backend_fd, w.backend_peer}) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  }
  auto id = loop.add(start_of(w));
  const std::size_t total = 8u << 20;
  std::string down = pattern(total, 3);
  set_nonblock(w.backend_peer, true);
  std::size_t accepted = 0;
  // Write without blocking until the path is full: the backend's sends fail (EAGAIN)
  // while the loop thread sleeps in epoll_wait with bytes unread on the tunnel's
  // backend socket, i.e. the tunnel stopped reading, held back by the client. Seen
  // twice in a row with nothing moving in between, so that it is not the instant
  // before the loop wakes up.
  int last_unread = -1;
  std::size_t last_accepted = 0;
  const bool full = ringlog::test::wait_until([&] {
    for (;;) {
      ssize_t n = ::send(w.backend_peer, down.data() + accepted, total - accepted, MSG_NOSIGNAL);
      if (n <= 0) break;
      accepted += std::size_t(n);
    }
    int unread = 0;
    const bool held = ::ioctl(w.backend_fd, FIONREAD, &unread) == 0 && unread > 0 && loop_sleeps(loop);
    const bool again = held && unread == last_unread && accepted == last_accepted;
    last_unread = held ? unread : -1;
    last_accepted = accepted;
    return accepted == total || again;
  });
  EXPECT_TRUE(full) << "the path never filled";
  EXPECT_LT(accepted, 3u << 20) << "the tunnel took bytes its reader never asked for";
  EXPECT_GT(accepted, 0u);
  set_nonblock(w.backend_peer, false);
  auto bw = std::async(std::launch::async, [&] {
    bool ok = write_all(w.backend_peer, down.data() + accepted, total - accepted, 64 * 1024);
    ::shutdown(w.backend_peer, SHUT_WR);
    return ok;
  });
  ::shutdown(w.client_peer, SHUT_WR);
  // A slow reader: after each 64 KiB it waits until the tunnel has refilled its socket
  // and gone back to sleep (or has finished), so that the tunnel stops and resumes
  // over and over.
  std::string got = read_all(w.client_peer, nullptr, 64 * 1024, [&] {
    ringlog::test::wait_until([&] {
      int unread = 0;
      ::ioctl(w.client_peer, FIONREAD, &unread);
      return loop.wait(id, nullptr, 0ms) || (unread > 0 && loop_sleeps(loop));
    });
  });
  EXPECT_TRUE(bw.get());
  EXPECT_EQ(got.size(), total);
  EXPECT_TRUE(got == down);
  Result r;
  ASSERT_TRUE(loop.wait(id, &r));
  EXPECT_EQ(r.reason, EndReason::eof) << r.detail;
  EXPECT_EQ(r.to_client, total);
  if (GetParam() == Mode::splice) {
    EXPECT_LE(r.pipe_max, loop.pool().options().pipe_size);
  }
  ::close(w.client_peer);
  ::close(w.backend_peer);
}

INSTANTIATE_TEST_SUITE_P(Modes, TunnelTransfer, ::testing::Values(Mode::splice, Mode::copy),
                         [](const auto& i) { return std::string(to_string(i.param)); });

// A TunnelStats sink that only counts what the tunnels report (read after the loop
// thread has stopped).
struct CountingStats final : TunnelStats {
  std::atomic<std::uint64_t> started{0}, ended{0}, fell_back{0}, idle{0}, spliced{0}, copied{0};
  void tunnel_started() noexcept override { ++started; }
  void tunnel_ended() noexcept override { ++ended; }
  void tunnel_fell_back() noexcept override { ++fell_back; }
  void tunnel_idle_timeout() noexcept override { ++idle; }
  void tunnel_bytes(std::uint64_t s, std::uint64_t c) noexcept override {
    spliced += s;
    copied += c;
  }
};

// A pool with room for one tunnel's two pipes: the next tunnels copy, are counted as
// fallbacks, and still move every byte.
TEST(TunnelFallback, PoolExhaustedCopiesAndCounts) {
  CountingStats stats;
  EpollLoop loop({.pipe_size = 64 * 1024, .max_pipes = 2, .max_idle = 2});
  loop.env().stats = &stats;
  loop.start();
  std::vector<Wiring> ws;
  std::vector<std::size_t> ids;
  for (int i = 0; i < 3; ++i) {
    ws.push_back(Wiring::make());
    ids.push_back(loop.add(start_of(ws.back())));
  }
  std::vector<std::future<void>> fs;
  for (auto& w : ws) fs.push_back(std::async(std::launch::async, [w] { exchange(w, 2u << 20, 3u << 20); }));
  for (auto& f : fs) f.get();
  std::vector<Result> rs(3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop.wait(ids[i], &rs[i]));
  EXPECT_FALSE(rs[0].fell_back);
  EXPECT_EQ(rs[0].spliced, 5u << 20);
  for (int i = 1; i < 3; ++i) {
    EXPECT_TRUE(rs[i].fell_back);
    EXPECT_EQ(rs[i].up, Mode::copy);
    EXPECT_EQ(rs[i].copied, 5u << 20);
    EXPECT_EQ(rs[i].reason, EndReason::eof) << rs[i].detail;
  }
  loop.stop();
  EXPECT_EQ(stats.fell_back.load(), 2u);
  EXPECT_EQ(stats.started.load(), 3u);
  EXPECT_EQ(stats.ended.load(), 3u);
  EXPECT_EQ(stats.idle.load(), 0u);
  EXPECT_EQ(stats.spliced.load(), 5u << 20);
  EXPECT_EQ(stats.copied.load(), 10u << 20);
  EXPECT_EQ(loop.pool().in_use(), 0u);
}

// The kernel refusing splice(2) part-way (EINVAL), with bytes already in the pipe:
// they are read back out and the direction copies from then on.
std::atomic<int> g_calls{0};
std::atomic<int> g_fail_at{0};
std::atomic<bool> g_fail_out{false};
ssize_t flaky_splice(int in, loff_t* oi, int out, loff_t* oo, std::size_t len, unsigned flags) {
  struct stat st{};
  bool from_pipe = ::fstat(in, &st) == 0 && S_ISFIFO(st.st_mode);
  if (from_pipe == g_fail_out.load() && g_calls.fetch_add(1) >= g_fail_at.load()) {
    errno = EINVAL;
    return -1;
  }
  return ::splice(in, oi, out, oo, len, flags);
}

TEST(TunnelFallback, SpliceRefusedMidStreamStaysByteExact) {
  for (bool fail_out : {false, true}) {
    for (int at : {0, 5}) {
      SCOPED_TRACE(testing::Message() << "fail " << (fail_out ? "pipe->socket" : "socket->pipe") << " at call " << at);
      g_calls = 0;
      g_fail_at = at;
      g_fail_out = fail_out;
      EpollLoop loop;
      loop.env().splice_fn = &flaky_splice;
      loop.start();
      Wiring w = Wiring::make();
      auto id = loop.add(start_of(w));
      exchange(w, 4u << 20, 4u << 20);
      Result r;
      ASSERT_TRUE(loop.wait(id, &r));
      EXPECT_EQ(r.reason, EndReason::eof) << r.detail;
      EXPECT_TRUE(r.fell_back);
      EXPECT_EQ(r.up, Mode::copy);
      EXPECT_EQ(r.down, Mode::copy);
      EXPECT_EQ(r.spliced + r.copied, 8u << 20);
      if (at == 0) {
        EXPECT_EQ(r.spliced, 0u);
      }
      loop.stop();
      EXPECT_EQ(loop.pool().in_use(), 0u);
    }
  }
}

// The pipe transaction: Begin bereq <parent> pipe, Timestamp Pipe, PipeAcct with the
// bytes each way, Timestamp PipeSess, End.
TEST(TunnelLog, PipeTransactionRecords) {
  ringlog::test::ScratchPath rp("ring");
  auto log = ringlog::Log::create(rp.str(), {.area_size = 1 << 20});
  EpollLoop loop;
  loop.env().log = &log;
  loop.start();
  Wiring w = Wiring::make();
  TunnelStart ts = start_of(w);
  ts.client_hdr_bytes = 120;
  ts.backend_hdr_bytes = 140;
  ts.parent_vxid = 1001;
  auto id = loop.add(std::move(ts));
  exchange(w, 1u << 20, 123457);
  ASSERT_TRUE(loop.wait(id, nullptr));
  loop.stop();
  auto batches = ringlog::test::read_batches(rp.str());
  const ringlog::test::DecodedBatch* pipe = nullptr;
  for (auto& b : batches)
    for (auto& rec : b.records)
      if (rec.tag == ringlog::Tag::Begin && rec.payload == "bereq 1001 pipe") pipe = &b;
  ASSERT_NE(pipe, nullptr);
  std::vector<std::string> seq;
  for (auto& rec : pipe->records) {
    std::string s(ringlog::tag_name(rec.tag));
    if (rec.tag == ringlog::Tag::Timestamp) s += " " + rec.payload.substr(0, rec.payload.find(':'));
    if (rec.tag == ringlog::Tag::PipeAcct) s += " " + rec.payload;
    seq.push_back(s);
  }
  std::vector<std::string> want = {"Begin", "Timestamp Pipe", "Notice", "PipeAcct 120 140 1048576 123457",
                                   "Timestamp PipeSess", "Notice", "End"};
  EXPECT_EQ(seq, want);
  auto notes = ringlog::test::payloads(*pipe, ringlog::Tag::Notice);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].rfind("tunnel splice", 0), 0u) << notes[0];
  EXPECT_EQ(notes[1].rfind("tunnel end eof", 0), 0u) << notes[1];
}

}  // namespace
}  // namespace ringproxy::tunnel::test
