// Writers and readers in separate forked processes on one ring file: the tail lock,
// the readers-count bytes and the futex all live in the file, so they must work across
// processes exactly as across threads.
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "observe.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;
using namespace ringlog::test;

namespace {

constexpr unsigned kProcs = 3, kThreads = 2;
#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t kPerThread = 5000;
#else
constexpr std::uint64_t kPerThread = 30000;
#endif

// Child: writes kPerThread messages from each of kThreads threads, then sends the
// accepted bitmap of each thread through the pipe.
[[noreturn]] void writer_child(const std::string& path, unsigned proc, int fd) {
  int rc = 0;
  try {
    Ring ring = Ring::open(path);
    std::vector<std::vector<std::uint8_t>> acc(kThreads, std::vector<std::uint8_t>(kPerThread));
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < kThreads; ++t)
      ts.emplace_back([&, t] {
        unsigned id = proc * kThreads + t;
        for (std::uint64_t s = 0; s < kPerThread; ++s)
          acc[t][s] = ring.write(make_stress(id, s, mix_len(s))) == WriteStatus::ok;
      });
    for (auto& t : ts) t.join();
    for (auto& a : acc)
      if (::write(fd, a.data(), a.size()) != static_cast<ssize_t>(a.size())) rc = 3;
  } catch (...) {
    rc = 2;
  }
  ::close(fd);
  ::_exit(rc);
}

// Child: a passive reader in its own process. Exits 0 if it saw only whole messages
// in order per writer, and at least one message.
[[noreturn]] void passive_child(const std::string& path, int go_fd) {
  int rc = 0;
  try {
    Reader rd = Reader::open(path);
    char c = 1;
    if (::write(go_fd, &c, 1) != 1) ::_exit(5);  // attached
    ::close(go_fd);
    std::vector<std::int64_t> last(kProcs * kThreads, -1);
    std::vector<std::byte> buf;
    std::uint64_t seen = 0;
    int idle = 0;
    while (idle < 200) {  // 200 x 10 ms of silence: the writers are done
      ReadResult r = rd.next(buf);
      if (r.status == ReadStatus::empty) {
        ++idle;
        rd.wait(std::chrono::milliseconds(10));
        continue;
      }
      idle = 0;
      if (r.status != ReadStatus::message || r.kind != format::MsgKind::data) continue;
      StressMsg m;
      if (!check_stress(buf.data(), buf.size(), m) || m.writer >= last.size()) rc = 10;
      else if (static_cast<std::int64_t>(m.seq) <= last[m.writer]) rc = 11;
      else last[m.writer] = static_cast<std::int64_t>(m.seq);
      ++seen;
    }
    if (seen == 0) rc = 12;
  } catch (...) {
    rc = 4;
  }
  ::_exit(rc);
}

}  // namespace

TEST(MultiProcess, WritersAndReadersInSeparateProcesses) {
  ScratchPath p;
  Ring ring = Ring::create(p, {.area_size = 1 << 18});
  // The parent is a pinned reader attached before any writer starts.
  Reader pinned = Reader::attach(ring, {.kind = ReaderKind::pinned});
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t reader_pid = fork_child();
  if (reader_pid == 0) {
    ::close(go[0]);
    passive_child(p, go[1]);
  }
  ::close(go[1]);
  char c;
  ASSERT_EQ(::read(go[0], &c, 1), 1);
  ::close(go[0]);

  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (unsigned i = 0; i < kProcs; ++i) {
    int fd[2];
    ASSERT_EQ(::pipe(fd), 0);
    pid_t pid = fork_child();
    if (pid == 0) {
      ::close(fd[0]);
      writer_child(p, i, fd[1]);
    }
    ::close(fd[1]);
    pids.push_back(pid);
    fds.push_back(fd[0]);
  }
  // Read in the parent while the children write; also collect their bitmaps.
  std::vector<std::vector<std::uint64_t>> seqs(kProcs * kThreads);
  std::vector<std::vector<std::uint8_t>> accepted(kProcs * kThreads);
  std::thread collector([&] {
    for (unsigned i = 0; i < kProcs; ++i)
      for (unsigned t = 0; t < kThreads; ++t) {
        auto& a = accepted[i * kThreads + t];
        a.resize(kPerThread);
        std::size_t got = 0;
        while (got < a.size()) {
          ssize_t n = ::read(fds[i], a.data() + got, a.size() - got);
          if (n <= 0) break;
          got += static_cast<std::size_t>(n);
        }
      }
  });
  std::vector<std::byte> buf;
  std::uint64_t torn = 0;
  unsigned exited = 0;
  std::vector<int> status(kProcs, -1);
  int idle_after_exit = 0;
  while (idle_after_exit < 5) {
    ReadResult r = pinned.next(buf);
    if (r.status == ReadStatus::message && r.kind == format::MsgKind::data) {
      StressMsg m;
      if (!check_stress(buf.data(), buf.size(), m) || m.writer >= seqs.size()) ++torn;
      else seqs[m.writer].push_back(m.seq);
      continue;
    }
    ASSERT_NE(r.status, ReadStatus::lost);
    if (r.status == ReadStatus::empty) {
      for (unsigned i = 0; i < kProcs; ++i)
        if (status[i] == -1) {
          int st;
          if (::waitpid(pids[i], &st, WNOHANG) == pids[i]) {
            status[i] = st;
            ++exited;
          }
        }
      if (exited == kProcs) ++idle_after_exit;
      pinned.wait(std::chrono::milliseconds(5));
    }
  }
  collector.join();
  for (int fd : fds) ::close(fd);
  for (unsigned i = 0; i < kProcs; ++i) {
    ASSERT_TRUE(WIFEXITED(status[i])) << "writer " << i;
    EXPECT_EQ(WEXITSTATUS(status[i]), 0) << "writer " << i;
  }
  int rst;
  ASSERT_EQ(::waitpid(reader_pid, &rst, 0), reader_pid);
  ASSERT_TRUE(WIFEXITED(rst));
  EXPECT_EQ(WEXITSTATUS(rst), 0) << "passive reader process saw torn or out-of-order messages";
  EXPECT_EQ(torn, 0u);
  std::uint64_t accepted_total = 0;
  for (unsigned w = 0; w < seqs.size(); ++w) {
    std::vector<std::uint64_t> expect;
    for (std::uint64_t s = 0; s < kPerThread; ++s)
      if (accepted[w][s]) expect.push_back(s);
    accepted_total += expect.size();
    EXPECT_EQ(seqs[w], expect) << "writer " << w;
  }
  RingStats st = ring.stats();
  EXPECT_EQ(st.msgs_dropped + accepted_total, kProcs * kThreads * kPerThread);
  EXPECT_EQ(st.writer_threads, 0u) << "writer slots of exited processes were not freed";
}

TEST(MultiProcess, PinnedReaderInAnotherProcessIsWokenByTheFutex) {
  ScratchPath p;
  Ring ring = Ring::create(p, {.area_size = 1 << 16});
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t pid = fork_child();
  if (pid == 0) {
    ::close(go[0]);
    int rc = 1;
    try {
      Reader rd = Reader::open(p, {.kind = ReaderKind::pinned});
      char c = 1;
      if (::write(go[1], &c, 1) != 1) ::_exit(5);
      std::vector<std::byte> buf;
      // One wait, an hour long: it returns only if the write wakes it (had it not,
      // ctest's timeout fails the test).
      if (rd.next(buf).status == ReadStatus::empty) rd.wait(std::chrono::hours(1));
      ReadResult r = rd.next(buf);
      if (r.status == ReadStatus::message && buf.size() == 4 && std::memcmp(buf.data(), "ping", 4) == 0) rc = 0;
    } catch (...) {
      rc = 4;
    }
    ::_exit(rc);
  }
  ::close(go[1]);
  char c;
  ASSERT_EQ(::read(go[0], &c, 1), 1);
  ::close(go[0]);
  EXPECT_EQ(ring.stats().pinned_readers, 1u);
  // Written once the reader sleeps in futex(2) (seen in /proc), counted as a waiter.
  EXPECT_TRUE(ringlog::test::wait_until([&] {
    return ring.header().waiters.load() == 1 && ringlog::test::sleeping_in(pid, SYS_futex);
  })) << "the reader never slept on the futex";
  ASSERT_EQ(ring.write("ping"), WriteStatus::ok);
  int st;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_EQ(ring.stats().pinned_readers, 0u);
}
