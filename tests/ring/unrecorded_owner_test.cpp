// Recovery of a tail lock whose dead holder left no owner word (owner 0): one that died
// between L3 and W3 of its commit, with the record of a batch it never published, and
// one that holds no writer slot (a pinned reader that died between L1 and L2). The
// schedule is forced: the dead holder's state is forged in the file, and a live
// writer is held between its W3 and W4 ("copied", test hooks) while another thread
// runs the dead-process check.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "observe.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

namespace ringlog::detail {
void test_hook_observe(void (*fn)(const char*)) noexcept;  // ringlog/src/test_hooks.cpp
}  // namespace ringlog::detail

using namespace ringlog;
using namespace ringlog::format;
using ringlog::test::ScratchPath;

namespace {

enum Phase : int { kIdle, kLiveCopied, kChecked };
std::atomic<int> g_phase{kIdle};
thread_local bool t_live = false;

// Runs at every write-path step of every thread of this test: holds the live writer
// after its copy, before W4 exposes its batch, until the check has run.
void hold_before_expose(const char* step) {
  if (t_live && std::strcmp(step, "copied") == 0 && g_phase.load() == kIdle) {
    g_phase.store(kLiveCopied);
    while (g_phase.load() != kChecked) std::this_thread::yield();
  }
}

pid_t dead_pid() {
  pid_t p = ringlog::test::fork_child();
  if (p == 0) ::_exit(0);
  int st = 0;
  ::waitpid(p, &st, 0);
  return p;
}

std::vector<std::string> drain(Reader& rd) {
  std::vector<std::string> out;
  std::vector<std::byte> buf;
  for (;;) {
    ReadResult r = rd.next(buf);
    if (r.status == ReadStatus::empty) break;
    if (r.status == ReadStatus::message) out.emplace_back(reinterpret_cast<const char*>(buf.data()), buf.size());
  }
  return out;
}

}  // namespace

TEST(Recovery, AnUnrecordedOwnersUnpublishedBatchIsForgotten) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  r.write("one");
  Header& h = r.header();
  auto* area = reinterpret_cast<std::uint8_t*>(&h) + kHeaderLen;
  // What a writer killed between L3 and W3 leaves: the tail RC hidden (W1), the
  // trailing RC (W8), its slot's record of the batch [t-1, end) (W9), the owner word
  // cleared (L3), the tail still locked at t. Its batch is as long as the live one
  // that follows ("two": RC, one varint byte, 3 bytes), so that batch ends at `end` too.
  const std::uint64_t t = h.tail.load();
  const std::uint64_t end = t + 1 + 1 + 3;
  area[(t - 1) % 8192] = kRcWriting;
  area[(end - 1) % 8192] = 0;
  WriterSlot& ws = h.writers[100];
  ws.start_time = 1;
  ws.saved_rc.store(0);
  ws.inflight_end.store(end);
  ws.inflight_pos.store(t);
  ws.pid.store(static_cast<std::uint32_t>(dead_pid()));
  h.owner_saved_rc.store(kRcNotRecorded);
  h.owner.store(0);
  h.tail.store(t | kTailLock);

  detail::test_hook_observe(hold_before_expose);
  WriteStatus res{};
  // The live writer recovers the lock (the unknown owner's longer wait), commits "two"
  // at t and, held before W4, still hides it behind the 0xFF at t-1.
  std::thread live([&] {
    t_live = true;
    res = r.write("two");
  });
  const bool copied = ringlog::test::wait_until([] { return g_phase.load() == kLiveCopied; });
  EXPECT_TRUE(copied) << "the live writer never reached its copy";
  // Another thread's dead-process check: the tail has passed the dead writer's record.
  if (copied) r.check_dead();
  g_phase.store(kChecked);
  live.join();
  detail::test_hook_observe(nullptr);

  EXPECT_EQ(res, WriteStatus::ok);
  EXPECT_EQ(r.stats().lock_recoveries, 1u);
  EXPECT_EQ(r.stats().torn_discarded, 0u) << "a live batch was padded as a dead writer's torn one";
  EXPECT_EQ(ws.inflight_pos.load(), 0u);
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  EXPECT_EQ(drain(rd), (std::vector<std::string>{"one", "two"}));
}

TEST(Recovery, TailLockOfAPinnedReaderThatDiedUnrecordedIsRecovered) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192});
  r.write("one");
  Header& h = r.header();
  // A pinned reader that died between its L1 and L2 (lock_tail(-1): attaching, or
  // the dead-process check of a long wait on 0xFF): the tail locked, owner 0, its
  // reader slot naming a dead pid, and no writer slot of a dead process.
  ReaderSlot& rs = h.readers[5];
  rs.start_time = 1;
  rs.mode = static_cast<std::uint32_t>(ReaderMode::pinned);
  rs.pos.store(kNoPos);
  rs.pid.store(static_cast<std::uint32_t>(dead_pid()));
  const std::uint64_t t = h.tail.load();
  h.owner.store(0);
  h.tail.store(t | kTailLock);

  std::atomic<bool> written{false};
  WriteStatus res{};
  std::thread writer([&] {
    res = r.write("two");
    written.store(true);
  });
  const bool recovered = ringlog::test::wait_until([&] { return written.load(); });
  EXPECT_TRUE(recovered) << "the writer still waits on a lock nobody recovers";
  if (!recovered) h.tail.store(t);  // unlock by hand, so that the writer can end
  writer.join();

  EXPECT_EQ(res, WriteStatus::ok);
  EXPECT_EQ(r.stats().lock_recoveries, recovered ? 1u : 0u);
  r.check_dead();  // the dead reader's slot is freed too
  EXPECT_EQ(rs.pid.load(), 0u);
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  EXPECT_EQ(drain(rd), (std::vector<std::string>{"one", "two"}));
}
