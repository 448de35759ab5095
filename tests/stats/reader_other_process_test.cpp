// A reader in another process maps the stats file read-only and sees the writer's
// counters live; a writer restart (a new file at the same path) is noticed as stale.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "ringlog/stats.hpp"
#include "ringproxy/counters.hpp"
#include "observe.hpp"
#include "stats_test_util.hpp"

namespace rs = ringlog::stats;
namespace pc = ringproxy::counters;  // MAIN and VBE, the proxy's groups

namespace {

// Child: waits (up to 20 s) until MAIN.client_req reaches want, then exits 0; else 1..
int child_reader(const std::string& path, std::uint64_t want, int ready_fd) {
  try {
    auto r = rs::StatsReader::open(path);
    char c = 'r';
    if (::write(ready_fd, &c, 1) != 1) return 2;
    // Snapshots until the writer's final count shows (a read-only reader cannot be
    // woken: a bounded poll on the counters), checking every snapshot on the way.
    std::uint64_t last = 0;
    int verdict = 5;  // never reached the final count
    ringlog::test::wait_until([&] {
      rs::Snapshot s = r.snapshot();
      const rs::CounterValue* v = s.find("MAIN.client_req");
      if (!v) return false;
      if (v->raw < last) return verdict = 3, true;  // a counter went backwards
      last = v->raw;
      if (v->raw > want) return verdict = 4, true;
      if (v->raw == want && s.writer_alive && s.writer_pid == ::getppid()) return verdict = 0, true;
      return false;
    }, std::chrono::seconds(20));
    return verdict;
  } catch (...) {
    return 6;
  }
}

TEST(ReaderOtherProcess, SeesLiveCountersReadOnly) {
  ringlog::test::ScratchDir dir;
  const std::string path = dir.file("stats");
  auto stats = rs::Stats::create(path);
  auto main = stats.add_group(pc::main::kKind, "", pc::main::kDefs);
  // The reader must not need write access: make the file read-only first.
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::_exit(child_reader(path, 40000, fds[1]));
  }
  ::close(fds[1]);
  char c;
  ASSERT_EQ(::read(fds[0], &c, 1), 1);
  ::close(fds[0]);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) main.add(pc::main::client_req);
    });
  for (auto& t : ts) t.join();
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ReaderOtherProcess, WriterRestartMakesReaderStale) {
  ringlog::test::ScratchDir dir;
  const std::string path = dir.file("stats");
  auto stats = rs::Stats::create(path);
  auto reader = rs::StatsReader::open(path);
  EXPECT_FALSE(reader.stale());
  const std::uint64_t id = reader.snapshot().instance_id;
  {
    auto again = rs::Stats::create(path);  // a restarted writer
    EXPECT_TRUE(reader.stale());
    auto fresh = rs::StatsReader::open(path);
    EXPECT_NE(fresh.snapshot().instance_id, id);
    EXPECT_FALSE(fresh.stale());
  }
}

TEST(ReaderOtherProcess, InstanceJoinsRingGroup) {
  ringlog::test::ScratchDir dir;
  auto ring = ringlog::Ring::create(dir.file("ring"));
  ring.write(std::string_view("hello"));
  ring.write(std::string_view("world!"));
  {
    // Ring only: RING group and uptime, no stats file.
    auto inst = rs::InstanceReader::open(dir.str());
    EXPECT_TRUE(inst.has_ring());
    EXPECT_FALSE(inst.has_stats());
    rs::Snapshot s = inst.snapshot();
    ASSERT_NE(s.find("RING.msgs_written"), nullptr);
    EXPECT_EQ(s.find("RING.msgs_written")->raw, 2u);
    EXPECT_EQ(s.find("RING.bytes_written")->raw, ring.stats().bytes_written);
    EXPECT_GE(s.find("RING.bytes_written")->raw, 11u);
    EXPECT_EQ(s.find("RING.bytes_written")->format, rs::Format::bytes);
    ASSERT_NE(s.find("STAT.uptime"), nullptr);
    // The stats file appearing makes the reader stale (so tools reopen).
    auto stats = rs::Stats::create(dir.file("stats"));
    EXPECT_TRUE(inst.stale());
  }
  auto inst = rs::InstanceReader::open(dir.str());
  EXPECT_TRUE(inst.has_stats());
  EXPECT_EQ(inst.snapshot().counters.front().name, "STAT.uptime");
}

TEST(ReaderOtherProcess, MissingInstanceIsNotFound) {
  ringlog::test::ScratchDir dir;
  try {
    (void)rs::InstanceReader::open(dir.file("nothing-here"));
    ADD_FAILURE() << "opened a missing instance";
  } catch (const ringlog::Error& e) {
    EXPECT_EQ(e.code(), ringlog::Errc::not_found);
    EXPECT_NE(std::string(e.what()).find("no ringlog instance"), std::string::npos);
  }
}

}  // namespace
