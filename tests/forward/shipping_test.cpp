// The delivery core of ringlog-forward against an in-process collector: order and
// completeness, reconnects within the at-least-once window, and the two stall policies
// (drop-oldest gives up and counts exactly what it gave up; blocking keeps everything).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "forwarder.hpp"
#include "observe.hpp"
#include "syslog.hpp"

namespace fw = ringlog::forward;
using namespace std::chrono_literals;

namespace {

// A syslog collector on 127.0.0.1: TCP with octet counting, or UDP. Runs its own thread.
class Collector {
 public:
  Collector(bool tcp, std::uint16_t port, int rcvbuf = 0) : tcp_(tcp) {
    lfd_ = ::socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
    int one = 1;
    ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (rcvbuf) ::setsockopt(lfd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("bind");
    if (tcp) ::listen(lfd_, 8);
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    rcvbuf_ = rcvbuf;
    th_ = std::thread([this] { run(); });
  }
  ~Collector() { stop(); }
  void stop() {
    if (!th_.joinable()) return;
    stop_ = true;
    th_.join();
    if (cfd_ >= 0) ::close(cfd_);
    ::close(lfd_);
  }
  std::uint16_t port() const { return port_; }
  // Closes the connection (dropping what it has not parsed) once `total` messages were
  // received; one shot.
  void drop_at(std::size_t total) { drop_at_ = total; }
  std::vector<std::string> messages() {
    std::lock_guard<std::mutex> g(mu_);
    return msgs_;
  }
  std::size_t count() {
    std::lock_guard<std::mutex> g(mu_);
    return msgs_.size();
  }
  int connections() const { return conns_; }
  // Everything the kernel took for it has been read and parsed: its connection holds no
  // unread byte and its thread sleeps in poll(2) again.
  bool quiet() const {
    int fd = cfd_.load(), unread = 0;
    pid_t t = tid_.load();
    if (fd >= 0 && (::ioctl(fd, FIONREAD, &unread) != 0 || unread > 0)) return false;
    return t && (ringlog::test::sleeping_in(t, SYS_poll) || ringlog::test::sleeping_in(t, SYS_ppoll));
  }

 private:
  void run() {
    tid_ = ringlog::test::this_tid();
    std::string pending;
    char buf[65536];
    while (!stop_) {
      const int cfd = cfd_.load();
      pollfd p{tcp_ && cfd < 0 ? lfd_ : (tcp_ ? cfd : lfd_), POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) {
        if (tcp_ && cfd_ >= 0) {  // a new connection replaces a dead one
          pollfd l{lfd_, POLLIN, 0};
          if (::poll(&l, 1, 0) > 0) accept_one(pending);
        }
        continue;
      }
      if (tcp_ && cfd_ < 0) {
        accept_one(pending);
        continue;
      }
      ssize_t n = ::recv(p.fd, buf, sizeof buf, 0);
      if (!tcp_) {
        if (n > 0) {
          std::lock_guard<std::mutex> g(mu_);
          msgs_.emplace_back(buf, static_cast<std::size_t>(n));
        }
        continue;
      }
      if (n <= 0) {
        ::close(cfd_);
        cfd_ = -1;
        pending.clear();
        continue;
      }
      pending.append(buf, static_cast<std::size_t>(n));
      for (;;) {
        std::size_t used = 0;
        bool bad = false;
        auto m = fw::read_frame(pending, fw::Framing::octet_counting, used, bad);
        if (bad) ADD_FAILURE() << "malformed frame";
        if (!m) break;
        pending.erase(0, used);
        std::size_t total;
        {
          std::lock_guard<std::mutex> g(mu_);
          msgs_.push_back(std::move(*m));
          total = msgs_.size();
        }
        if (drop_at_ && total >= drop_at_) {
          drop_at_ = 0;
          ::close(cfd_);  // unread bytes: the peer sees a reset
          cfd_ = -1;
          pending.clear();
          break;
        }
      }
    }
  }
  void accept_one(std::string& pending) {
    int fd = ::accept(lfd_, nullptr, nullptr);
    if (fd < 0) return;
    if (rcvbuf_) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf_, sizeof rcvbuf_);
    if (cfd_ >= 0) ::close(cfd_);
    cfd_ = fd;
    pending.clear();
    ++conns_;
  }

  bool tcp_;
  int lfd_ = -1, rcvbuf_ = 0;
  std::atomic<int> cfd_{-1};  // read by quiet() from the test thread
  std::atomic<pid_t> tid_{0};
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> drop_at_{0};
  std::atomic<int> conns_{0};
  std::mutex mu_;
  std::vector<std::string> msgs_;
  std::thread th_;
};

std::uint16_t free_port(bool tcp) {
  Collector c(tcp, 0);
  std::uint16_t p = c.port();
  c.stop();
  return p;
}

fw::Endpoint endpoint(bool tcp, std::uint16_t port, const std::string& name = "") {
  std::string err;
  std::string spec = (name.empty() ? "" : name + "=") + (tcp ? "tcp" : "udp") + "://127.0.0.1:" + std::to_string(port);
  auto ep = fw::parse_endpoint(spec, err);
  EXPECT_TRUE(ep) << err;
  return *ep;
}

std::string msg(std::size_t i) { return "<134>1 - h ringlog - t - message " + std::to_string(i) + std::string(60, 'x'); }

fw::ForwarderOptions small_opts() {
  fw::ForwarderOptions o;
  o.backoff_min = 10ms;
  o.backoff_max = 50ms;
  o.queue_bytes = 64 << 10;
  o.send_buffer = 8 << 10;
  return o;
}

// Polls until pred() or a deadline of wall-clock time (generous: a loaded machine may
// leave the collector's thread off the CPU for long; the condition, not the time, is
// what the tests check).
constexpr auto kDeadline = 60s;
template <class Pred>
bool poll_until(fw::Forwarder& f, Pred pred) {
  const auto end = std::chrono::steady_clock::now() + kDeadline;
  while (!pred() && std::chrono::steady_clock::now() < end) f.poll(5ms);
  return pred();
}
template <class Pred>
bool wait_until(Pred pred) {
  return ringlog::test::wait_until(pred, kDeadline);
}

std::vector<std::string> quiet_log;
auto logger() {
  return [](const std::string& s) { quiet_log.push_back(s); };
}

}  // namespace

TEST(Delivery, EveryMessageInOrderOverTcp) {
  Collector c(true, 0);
  fw::Forwarder f(small_opts(), {endpoint(true, c.port())}, logger());
  const std::size_t n = 3000;
  for (std::size_t i = 0; i < n; ++i) {
    f.push(msg(i));
    if (f.full()) {
      ASSERT_TRUE(poll_until(f, [&] { return !f.full(); }));
    }
  }
  ASSERT_TRUE(poll_until(f, [&] { return f.drained(); }));
  ASSERT_TRUE(wait_until([&] { return c.count() >= n; }));
  auto got = c.messages();
  ASSERT_EQ(got.size(), n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], msg(i));
  EXPECT_EQ(f.counts(0).sent, n);
  EXPECT_EQ(f.counts(0).lost, 0u);
  EXPECT_EQ(f.counts(0).reconnects, 0u);
  EXPECT_EQ(f.queued_messages(), 0u);
}

TEST(Delivery, ReconnectsResendWithinTheWindowAndLoseNothing) {
  // The collector drops its connection twice with data in hand; --replay covers what
  // its small receive buffer may have acknowledged without reading.
  Collector c(true, 0, 4096);
  auto o = small_opts();
  o.replay = 1000;
  o.queue_bytes = 1 << 20;
  fw::Forwarder f(o, {endpoint(true, c.port())}, logger());
  const std::size_t n = 4000;
  c.drop_at(700);
  std::size_t next_drop = 2000;
  for (std::size_t i = 0; i < n; ++i) {
    f.push(msg(i));
    if (i % 50 == 0) f.poll(0ms);
    if (c.connections() == 2 && next_drop) {
      c.drop_at(next_drop);
      next_drop = 0;
    }
  }
  ASSERT_TRUE(poll_until(f, [&] { return f.drained() && c.connections() >= 2; }));
  if (next_drop) c.drop_at(0);
  ASSERT_TRUE(wait_until([&] { return c.count() >= n; }));
  // Late copies (resent ones) count as duplicates: wait until the collector has read
  // every byte the kernel acknowledged.
  ASSERT_TRUE(wait_until([&] { return c.quiet(); }));
  std::map<std::string, int> seen;
  for (const auto& m : c.messages()) ++seen[m];
  std::size_t dups = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto it = seen.find(msg(i));
    ASSERT_NE(it, seen.end()) << "message " << i << " lost";
    dups += static_cast<std::size_t>(it->second - 1);
  }
  EXPECT_GE(f.counts(0).reconnects, 1u);
  EXPECT_LE(dups, f.counts(0).resent) << "duplicates beyond the resent window";
  EXPECT_EQ(f.counts(0).lost, 0u);
  EXPECT_EQ(f.counts(0).sent, n);
}

TEST(StallPolicy, DropOldestGivesUpTheOldestAndCountsThem) {
  std::uint16_t port = free_port(true);
  auto o = small_opts();
  fw::Forwarder f(o, {endpoint(true, port)}, logger());
  std::size_t pushed = 0;
  while (!f.full()) f.push(msg(pushed++));
  ASSERT_TRUE(poll_until(f, [&] { return f.counts(0).failed >= 1; }));  // connection refused
  EXPECT_FALSE(f.connected(0));
  std::size_t dropped = f.drop_oldest(o.queue_bytes / 2);
  EXPECT_GT(dropped, 0u);
  EXPECT_FALSE(f.full());
  EXPECT_EQ(f.counts(0).lost, dropped);
  EXPECT_EQ(f.pending(0), pushed - dropped);
  Collector c(true, port);
  ASSERT_TRUE(poll_until(f, [&] { return f.drained(); }));
  ASSERT_TRUE(wait_until([&] { return c.count() >= pushed - dropped; }));
  auto got = c.messages();
  ASSERT_EQ(got.size(), pushed - dropped);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], msg(dropped + i)) << "the newest are kept, in order";
  EXPECT_EQ(f.counts(0).sent + f.counts(0).lost, pushed);
}

TEST(StallPolicy, BlockingKeepsEverythingUntilTheCollectorReturns) {
  std::uint16_t port = free_port(true);
  fw::Forwarder f(small_opts(), {endpoint(true, port)}, logger());
  std::size_t pushed = 0;
  while (!f.full()) f.push(msg(pushed++));
  ASSERT_TRUE(poll_until(f, [&] { return f.counts(0).failed >= 2; }));  // refused, and refused again
  EXPECT_TRUE(f.full()) << "nothing leaves the queue while the collector is down";
  EXPECT_EQ(f.pending(0), pushed);
  Collector c(true, port);
  ASSERT_TRUE(poll_until(f, [&] { return f.drained(); }));
  ASSERT_TRUE(wait_until([&] { return c.count() >= pushed; }));
  auto got = c.messages();
  ASSERT_EQ(got.size(), pushed);
  for (std::size_t i = 0; i < pushed; ++i) ASSERT_EQ(got[i], msg(i));
  EXPECT_EQ(f.counts(0).lost, 0u);
  EXPECT_EQ(f.counts(0).sent, pushed);
}

TEST(StallPolicy, OnlyTheDestinationThatHoldsTheQueueLoses) {
  Collector up(true, 0);
  std::uint16_t down_port = free_port(true);
  auto o = small_opts();
  fw::Forwarder f(o, {endpoint(true, up.port(), "up"), endpoint(true, down_port, "down")}, logger());
  std::size_t pushed = 0;
  while (!f.full()) {
    f.push(msg(pushed++));
    f.poll(0ms);
  }
  ASSERT_TRUE(poll_until(f, [&] { return f.pending(0) == 0; }));
  std::size_t dropped = f.drop_oldest(0);
  EXPECT_EQ(dropped, pushed);
  EXPECT_EQ(f.counts(0).lost, 0u);
  EXPECT_EQ(f.counts(1).lost, pushed);
  EXPECT_TRUE(f.drained());
  ASSERT_TRUE(wait_until([&] { return up.count() >= pushed; }));
  EXPECT_EQ(up.count(), pushed);
}

TEST(Delivery, UdpOneDatagramPerMessage) {
  Collector c(false, 0);
  auto o = small_opts();
  o.udp_max = 512;
  fw::Forwarder f(o, {endpoint(false, c.port())}, logger());
  const std::size_t n = 200;
  for (std::size_t i = 0; i < n; ++i) {
    f.push(msg(i));
    f.poll(0ms);
  }
  f.push(std::string(2000, 'L'));
  ASSERT_TRUE(poll_until(f, [&] { return f.drained(); }));
  ASSERT_TRUE(wait_until([&] { return c.count() >= n + 1; }));
  auto got = c.messages();
  ASSERT_EQ(got.size(), n + 1);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(got[i], msg(i));
  EXPECT_EQ(got[n], std::string(512, 'L')) << "cut to --udp-max";
  EXPECT_EQ(f.counts(0).sent, n + 1);
}

TEST(Delivery, UdpToAClosedPortIsCountedNotSilent) {
  std::uint16_t port = free_port(false);
  fw::Forwarder f(small_opts(), {endpoint(false, port)}, logger());
  for (std::size_t i = 0; i < 20; ++i) {
    f.push(msg(i));
    for (int k = 0; k < 3; ++k) f.poll(2ms);
  }
  // An ICMP port unreachable fails the next send (on loopback, before send returns).
  ASSERT_TRUE(poll_until(f, [&] { return f.counts(0).failed >= 1 && f.counts(0).lost >= 1; }));
  EXPECT_GE(f.counts(0).lost, 1u) << "refused datagrams are counted";
  EXPECT_LE(f.counts(0).sent + f.pending(0), 20u);
}

TEST(Reconnect, BacksOffExponentiallyWhileTheCollectorIsDown) {
  // 100 ms doubled per failed attempt up to 800 ms, each wait jittered 0.8-1.2 times:
  // the waits the forwarder chose, read after each attempt (not timed, so a loaded
  // machine cannot change them); a fixed delay would give the same wait every time.
  std::uint16_t port = free_port(true);
  auto o = small_opts();
  o.backoff_min = 100ms;
  o.backoff_max = 800ms;
  std::vector<std::string> said;
  fw::Forwarder f(o, {endpoint(true, port)}, [&](const std::string& s) { said.push_back(s); });
  f.push(msg(0));
  const long long base_ms[] = {100, 200, 400, 800, 800, 800};
  for (std::uint64_t k = 1; k <= std::size(base_ms); ++k) {
    ASSERT_TRUE(poll_until(f, [&] { return f.counts(0).failed >= k; })) << "attempt " << k;
    // The next attempt is at least 80 ms away: each poll of 5 ms sees every failure.
    ASSERT_EQ(f.counts(0).failed, k);
    const long long wait = f.retry_wait(0).count(), base = base_ms[k - 1];
    EXPECT_GE(wait, base * 8 / 10) << "wait after attempt " << k;
    EXPECT_LT(wait, base * 12 / 10) << "wait after attempt " << k;
  }
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said.front().find("retrying in"), std::string::npos) << said.front();
  EXPECT_EQ(f.pending(0), 1u) << "the message waits";
  // Back up: delivered; after a success the next failure waits the shortest delay again.
  {
    Collector c(true, port);
    ASSERT_TRUE(poll_until(f, [&] { return f.drained(); }));
    ASSERT_TRUE(wait_until([&] { return c.count() >= 1; }));
  }
  EXPECT_EQ(f.counts(0).sent, 1u);
  EXPECT_EQ(f.counts(0).lost, 0u);
  const std::uint64_t failed = f.counts(0).failed;
  f.push(msg(1));
  ASSERT_TRUE(poll_until(f, [&] { return f.counts(0).failed > failed; })) << "the collector is gone again";
  EXPECT_GE(f.retry_wait(0).count(), 80);
  EXPECT_LT(f.retry_wait(0).count(), 120) << "the back-off starts again from 100 ms";
}
