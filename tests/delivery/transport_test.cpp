// Both transports over socketpairs and TCP loopback: many connections in one loop,
// finished and still-streaming objects, filters, partial writes (small send buffers),
// zero-copy sends on TCP; every byte arrives in order and every lease comes back.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "delivery_util.hpp"
#include "observe.hpp"
#include "records_test_util.hpp"
#include "ringlog/log.hpp"
#include "ringproxy/delivery/transport.hpp"
#include "test_util.hpp"

using namespace ringproxy::delivery;
using namespace dtest;

namespace {
// Whether io_uring works here: make_transport falls back to writev (saying why) when
// the kernel or a seccomp filter refuses it. The io_uring cases skip then.
bool uring_here(std::string* why) {
  std::string notice;
  auto t = make_transport({.kind = "io_uring"}, nullptr, &notice);
  *why = notice;
  return std::string(t->name()) == "io_uring";
}

// Whether this kernel has zero-copy sends on io_uring (SEND_ZC and SENDMSG_ZC).
bool zero_copy_here() {
  io_uring_probe* p = io_uring_get_probe();
  if (!p) return false;
  bool ok = io_uring_opcode_supported(p, IORING_OP_SEND_ZC) && io_uring_opcode_supported(p, IORING_OP_SENDMSG_ZC);
  io_uring_free_probe(p);
  return ok;
}

#define SKIP_WITHOUT_URING()                                        \
  do {                                                              \
    std::string why_;                                               \
    if (!uring_here(&why_)) GTEST_SKIP() << "io_uring: " << why_;   \
  } while (0)

void pair_unix(int fds[2]) { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0); }
void pair_tcp(int fds[2]) {
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l, (sockaddr*)&a, sizeof a), 0);
  ASSERT_EQ(::listen(l, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(l, (sockaddr*)&a, &len);
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c, (sockaddr*)&a, sizeof a), 0);
  int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(s, 0);
  ::close(l);
  fds[0] = s;  // sending side
  fds[1] = c;
}

struct Conn {
  int fd[2] = {-1, -1};
  ReadyNotify notify;
  std::unique_ptr<Chain> chain;
  std::unique_ptr<Sender> sender;
  std::string expect;
  std::string got;
  std::thread rx;
  bool chunked = false;
  Crc32Filter* crc = nullptr;
};

struct Result {
  std::uint64_t syscalls = 0, zc = 0;
  bool ok = true;
};

// Sends every connection's response through t in one loop (this thread).
Result run(Transport& t, std::vector<std::unique_ptr<Conn>>& cs, LoopWaker& w) {
  Result res;
  std::vector<Sender*> ready;
  for (auto& c : cs) ready.push_back(c->sender.get());
  std::size_t left = cs.size();
  std::vector<Sender*> changed;
  while (left) {
    for (Sender* s : ready) {
      if (s->finished()) continue;
      auto st = t.pump(*s);
      if (st == Sender::Status::done || st == Sender::Status::error) {
        --left;
        if (st == Sender::Status::error) res.ok = false;
      }
    }
    ready.clear();
    t.flush();  // io_uring: one submission for every connection's send
    // Senders with a prefill fill their next array now that the kernel has the current one.
    for (auto& c : cs)
      if (c->sender->inflight() && c->sender->prefill_pending()) t.pump(*c->sender);
    if (!left) break;
    std::vector<pollfd> p{{w.fd(), POLLIN, 0}};
    if (t.completion_fd() >= 0) p.push_back({t.completion_fd(), POLLIN, 0});
    for (auto& c : cs)
      if (c->sender->status() == Sender::Status::wait_write) p.push_back({c->sender->fd(), POLLOUT, 0});
    if (::poll(p.data(), p.size(), 20000) == 0) {
      ADD_FAILURE() << "stalled: no event in 20 s";
      res.ok = false;
      break;
    }
    if (p[0].revents) w.drain();
    for (auto& c : cs) {
      Sender* s = c->sender.get();
      if (s->finished()) continue;
      if (s->inflight()) {  // new bytes while a send is in flight: prefill (no-op without it)
        if (c->notify.take()) t.pump(*s);
        continue;
      }
      if (s->status() == Sender::Status::wait_data && c->notify.take()) ready.push_back(s);
    }
    for (std::size_t i = 1; i < p.size(); ++i) {
      if (!p[i].revents) continue;
      if (int(i) == 1 && t.completion_fd() >= 0) {
        changed.clear();
        t.reap(changed);
        for (Sender* s : changed) {
          if (s->finished()) {
            --left;
            if (s->status() == Sender::Status::error) res.ok = false;
          } else {
            ready.push_back(s);
          }
        }
        continue;
      }
      for (auto& c : cs)
        if (c->sender->fd() == p[i].fd && c->sender->status() == Sender::Status::wait_write) ready.push_back(c->sender.get());
    }
  }
  res.syscalls = t.syscalls();
  res.zc = t.zc_sends();
  return res;
}

void receive(Conn* c, std::size_t n) {
  c->got.reserve(std::min<std::size_t>(n, 8 << 20));
  char buf[65536];
  while (c->got.size() < n) {
    ssize_t r = ::read(c->fd[1], buf, sizeof buf);
    if (r <= 0) break;
    c->got.append(buf, std::size_t(r));
  }
}

// prefill: every chain ends in a crc32 filter and its Sender fills a second array
// while the first is in flight (Sender::enable_prefill); the CRCs are checked too.
void exercise(const char* kind, bool tcp, std::size_t zc_threshold, bool prefill = false,
              ringlog::Log* log = nullptr) {
  ::signal(SIGPIPE, SIG_IGN);
  Store st({.segment_size = 32 << 10});
  std::string big = random_bytes(3 << 20, 21);
  ObjRef cached = make_object(st, big, 100000);
  ObjRef live = st.new_object(false);
  std::string streamed = random_bytes(1 << 20, 22);
  LoopWaker w;
  std::vector<std::unique_ptr<Conn>> cs;
  for (int i = 0; i < 6; ++i) {
    auto c = std::make_unique<Conn>();
    tcp ? pair_tcp(c->fd) : pair_unix(c->fd);
    int sndbuf = 64 << 10;
    ::setsockopt(c->fd[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    ::fcntl(c->fd[0], F_SETFL, ::fcntl(c->fd[0], F_GETFL) | O_NONBLOCK);
    c->notify.waker = &w;
    std::string head = "HTTP/1.1 200 OK\r\nX-Conn: " + std::to_string(i) + "\r\n\r\n";
    const ObjRef& o = i % 2 ? live : cached;
    const std::string& body = i % 2 ? streamed : big;
    if (i == 4) {  // head only
      c->sender = std::make_unique<Sender>(c->fd[0], head, nullptr);
      c->expect = head;
    } else {
      c->chain = std::make_unique<Chain>(o, &c->notify);
      if (i == 2 || i == 3) {
        c->chain->push(std::make_unique<ChunkedFilter>());
        c->chunked = true;
      }
      if (prefill) {
        auto f = std::make_unique<Crc32Filter>();
        c->crc = f.get();
        c->chain->push(std::move(f));
      }
      c->sender = std::make_unique<Sender>(c->fd[0], head, c->chain.get(), 32);
      if (prefill) c->sender->enable_prefill();
      c->expect = head + body;
    }
    cs.push_back(std::move(c));
  }
  std::string notice;
  auto t = make_transport({.kind = kind, .zc_threshold = zc_threshold}, log, &notice);
  ASSERT_EQ(std::string(t->name()), kind) << notice;  // the io_uring cases skip where it is refused
  // The live object arrives in pieces; every 100 kB the producer waits until this
  // (the loop) thread sleeps in poll(2): every sender has sent what there was and
  // waits for the object's notification, the path under test.
  const pid_t loop_tid = ringlog::test::this_tid();
  std::atomic<bool> loop_done{false};
  std::thread producer([&] {
    for (std::size_t i = 0; i < streamed.size(); i += 10000) {
      live->append(streamed.data() + i, std::min<std::size_t>(10000, streamed.size() - i));
      if (i % 100000 == 0)
        ringlog::test::wait_until([&] {
          return loop_done.load() || ringlog::test::sleeping_in(loop_tid, SYS_poll) ||
                 ringlog::test::sleeping_in(loop_tid, SYS_ppoll);
        });
    }
    live->finish();
  });
  for (auto& c : cs) {
    std::size_t n = c->chunked ? SIZE_MAX : c->expect.size();
    Conn* cp = c.get();
    cp->rx = std::thread([cp, n] { receive(cp, n); });
  }
  Result r = run(*t, cs, w);
  loop_done = true;
  producer.join();
  std::uint64_t prefilled = 0;
  for (auto& c : cs) {
    prefilled += c->sender->prefilled_arrays();
    c->sender.reset();  // gives back what it holds; the chain must have nothing out
    if (c->chain) {
      EXPECT_EQ(c->chain->reader().outstanding(), 0u);
    }
    ::shutdown(c->fd[0], SHUT_WR);
    c->rx.join();
    ::close(c->fd[0]);
    ::close(c->fd[1]);
  }
  EXPECT_TRUE(r.ok);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    Conn& c = *cs[i];
    if (c.chunked) {
      std::size_t h = c.got.find("\r\n\r\n") + 4;
      bool ok;
      EXPECT_TRUE(same(c.got.substr(0, h) + dechunk(c.got.substr(h), &ok), c.expect)) << kind << " conn " << i;
      EXPECT_TRUE(ok);
    } else {
      EXPECT_TRUE(same(c.got, c.expect)) << kind << " conn " << i;
    }
    if (c.crc) {  // the filter saw exactly the bytes sent after the head
      std::size_t h = c.got.find("\r\n\r\n") + 4;
      std::string sent = c.got.substr(h);
      EXPECT_EQ(c.crc->bytes(), sent.size()) << kind << " conn " << i;
      EXPECT_EQ(c.crc->crc(), std::uint32_t(crc32_z(0, reinterpret_cast<const Bytef*>(sent.data()), sent.size())))
          << kind << " conn " << i;
    }
  }
  std::printf("%s: %llu arrays filled while the one before was in flight\n", t->name(), (unsigned long long)prefilled);
  if (prefill && std::string(t->name()) == "io_uring") {
    EXPECT_GT(prefilled, 0u);  // the second array was used
  }
  if (std::string(t->name()) == "writev") {
    EXPECT_EQ(prefilled, 0u);  // writev sends at once: no second array
  }
  std::printf("%s over %s: %llu send system calls, %llu zero-copy sends\n", t->name(), tcp ? "tcp" : "unix",
              (unsigned long long)r.syscalls, (unsigned long long)r.zc);
  if (std::string(kind) == "io_uring" && tcp && zc_threshold) {
    EXPECT_GT(r.zc, 0u) << "no zero-copy send went through";
  } else {
    EXPECT_EQ(r.zc, 0u) << "zero-copy sends without zero-copy";  // off, writev, or refused (unix)
  }
}
}  // namespace

// The io_uring cases are named Uring* (their own ctest entry, which skips as a whole
// where io_uring is refused).
TEST(Transport, WritevUnix) { exercise("writev", false, 0); }
TEST(Transport, WritevTcp) { exercise("writev", true, 0); }
TEST(Transport, UringUnix) {
  SKIP_WITHOUT_URING();
  exercise("io_uring", false, 0);
}
TEST(Transport, UringTcp) {
  SKIP_WITHOUT_URING();
  exercise("io_uring", true, 0);
}
TEST(Transport, UringZeroCopyTcp) {
  SKIP_WITHOUT_URING();
  if (!zero_copy_here()) GTEST_SKIP() << "this kernel has no io_uring zero-copy send";
  exercise("io_uring", true, 16 << 10);
}
TEST(Transport, UringZeroCopyRefusedOnUnixFallsBackToSendmsg) {
  // Unix sockets refuse zero-copy: the first such send fails with EOPNOTSUPP, the
  // transport says so (a Notice) and sends plain sendmsg from then on. No zero-copy
  // send goes through (exercise asserts it) and every byte still arrives.
  SKIP_WITHOUT_URING();
  if (!zero_copy_here()) GTEST_SKIP() << "this kernel has no io_uring zero-copy send to refuse";
  ringlog::test::ScratchPath p("log");
  {
    ringlog::Log log = ringlog::Log::create(p, {.area_size = 1 << 20});
    exercise("io_uring", false, 16 << 10, false, &log);
  }
  std::size_t refused = 0;
  for (auto& b : ringlog::test::read_batches(p))
    for (auto& n : ringlog::test::payloads(b, ringlog::Tag::Notice))
      refused += n.find("zero-copy send refused, using plain sendmsg") != std::string::npos;
  // Sends queued in the same submission as the first one are refused too: at least one.
  EXPECT_GE(refused, 1u) << "the refusal was not noticed";
}
TEST(Transport, UringPrefillUnix) {
  SKIP_WITHOUT_URING();
  exercise("io_uring", false, 0, true);
}
TEST(Transport, UringPrefillTcp) {
  SKIP_WITHOUT_URING();
  exercise("io_uring", true, 0, true);
}
TEST(Transport, WritevWithPrefillEnabledIgnoresIt) { exercise("writev", true, 0, true); }

static void peer_gone_is_an_error(const char* kind) {
  ::signal(SIGPIPE, SIG_IGN);
  {
    Store st;
    ObjRef o = make_object(st, random_bytes(4 << 20, 3), 1 << 20);
    int fd[2];
    pair_unix(fd);
    ::close(fd[1]);
    LoopWaker w;
    auto c = std::make_unique<Conn>();
    c->fd[0] = fd[0];
    c->notify.waker = &w;
    c->chain = std::make_unique<Chain>(o, &c->notify);
    c->sender = std::make_unique<Sender>(fd[0], "HTTP/1.1 200 OK\r\n\r\n", c->chain.get());
    auto t = make_transport({.kind = kind});
    std::vector<std::unique_ptr<Conn>> cs;
    cs.push_back(std::move(c));
    Result r = run(*t, cs, w);
    EXPECT_FALSE(r.ok) << kind;
    EXPECT_EQ(cs[0]->sender->status(), Sender::Status::error) << kind;
    cs[0]->sender.reset();
    ::close(fd[0]);
  }
}

TEST(Transport, PeerGoneIsAnError) { peer_gone_is_an_error("writev"); }
TEST(Transport, UringPeerGoneIsAnError) {
  SKIP_WITHOUT_URING();
  peer_gone_is_an_error("io_uring");
}
