// For the tests of the server's stages: a started Server with the demo origin as its
// backend (its own worker thread idles), plus a Worker the test drives on its own
// thread: a Session over a real loopback connection gets its events from the test
// (Session::on_event), so every step runs at once and in order, without the loop.
// The records are read back from the instance's ring (a transaction once it ended or
// sent a batch).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "records_test_util.hpp"
#include "ringlog/ring.hpp"
#include "server.hpp"
#include "session.hpp"
#include "worker.hpp"

namespace ringproxy::test {

// A transaction read back from the ring: its Begin ("bereq 5 fetch") and its records.
struct LoggedTxn {
  std::string begin;
  std::vector<std::pair<ringlog::Tag, std::string>> records;
  std::vector<std::string> all(ringlog::Tag t) const {
    std::vector<std::string> v;
    for (const auto& [tag, p] : records)
      if (tag == t) v.push_back(p);
    return v;
  }
  std::string first(ringlog::Tag t) const {
    auto v = all(t);
    return v.empty() ? std::string("<none>") : v.front();
  }
};

class StageHarness {
 public:
  explicit StageHarness(Config c = {}) {
    static int n = 0;
    c.instance = "server-stage-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
    c.listen = {parse_hostport("127.0.0.1:0", true)};
    c.threads = 1;
    c.health_path = "/";
    srv_ = std::make_unique<Server>(std::move(c));
    srv_->start();
    worker_ = std::make_unique<Worker>(*srv_, 1);
    worker_->bind_thread();
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd_, 8) != 0 ||
        ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &al) != 0)
      throw std::runtime_error("loopback listener");
    laddr_ = a;
  }
  ~StageHarness() {
    for (Session* s : sessions_)
      if (!s->closed()) s->close_session("TEST_END");
    for (int fd : client_fds_) ::close(fd);
    worker_.reset();  // frees the retired sessions
    srv_->stop();
    ::close(lfd_);
    ring_path_ = ringlog::instance_dir(srv_->config().instance);
    srv_.reset();
    std::error_code ec;
    std::filesystem::remove_all(ring_path_, ec);
  }

  Server& server() { return *srv_; }
  Worker& worker() { return *worker_; }

  // A new client connection and the Session serving its other end; returns the
  // client's socket (blocking, in the test's hands).
  int connect(Session** out) {
    int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(c, reinterpret_cast<const sockaddr*>(&laddr_), sizeof laddr_) != 0) throw std::runtime_error("connect");
    SockAddr peer;
    peer.len = sizeof peer.ss;
    int s = ::accept4(lfd_, reinterpret_cast<sockaddr*>(&peer.ss), &peer.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    SockAddr local = sockaddr_of_fd(s, false);
    auto* session = new Session(*worker_, s, peer, local, "a0");
    worker_->add_fd(s, session, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
    sessions_.push_back(session);
    client_fds_.push_back(c);
    *out = session;
    return c;
  }

  static void send_all(int fd, std::string_view s) {
    while (!s.empty()) {
      ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("send");
      s.remove_prefix(std::size_t(n));
    }
  }
  // What the client can read now (nothing waits: loopback bytes are there once sent);
  // *eof when the session closed its end.
  static std::string read_now(int fd, bool* eof = nullptr) {
    std::string out;
    char buf[65536];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        out.append(buf, std::size_t(n));
        continue;
      }
      if (n == 0 && eof) *eof = true;
      return out;
    }
  }
  // Drives the session (as the loop would on its events) and reads what it sent, until
  // `want` bytes came or the session closed. Bounded: a session that stops making
  // progress ends the loop.
  static std::string exchange(Session* s, int fd, std::size_t want, bool* eof = nullptr) {
    std::string got;
    bool closed = false;
    for (int i = 0; i < 10000 && got.size() < want && !closed; ++i) {
      if (!s->closed()) s->on_event(EPOLLIN | EPOLLOUT);
      std::string more = read_now(fd, &closed);
      if (more.empty() && !closed && s->closed()) break;
      got += more;
    }
    if (eof) *eof = closed;
    return got;
  }

  // Every transaction in the ring so far, in the order of their first batches; those of one
  // (a session's is sent each time it goes idle) are joined by vxid.
  std::vector<LoggedTxn> txns() {
    std::vector<LoggedTxn> out;
    std::map<std::uint64_t, std::size_t> at;  // vxid -> index in out
    std::string path = ringlog::instance_dir(srv_->config().instance) + "/ring";
    for (const auto& b : ringlog::test::read_batches(path)) {
      auto [it, fresh] = at.try_emplace(b.hdr.vxid, out.size());
      if (fresh) out.emplace_back();
      LoggedTxn& t = out[it->second];
      for (const auto& r : b.records) {
        if (r.tag == ringlog::Tag::Begin) t.begin = r.payload;
        t.records.emplace_back(r.tag, r.payload);
      }
    }
    std::erase_if(out, [](const LoggedTxn& t) { return t.begin.empty(); });
    return out;
  }
  std::vector<LoggedTxn> txns_of(std::string_view begin_prefix) {
    std::vector<LoggedTxn> v;
    for (auto& t : txns())
      if (t.begin.rfind(begin_prefix, 0) == 0) v.push_back(std::move(t));
    return v;
  }

 private:
  std::unique_ptr<Server> srv_;
  std::unique_ptr<Worker> worker_;
  int lfd_ = -1;
  sockaddr_in laddr_{};
  std::vector<Session*> sessions_;
  std::vector<int> client_fds_;
  std::string ring_path_;
};

}  // namespace ringproxy::test
