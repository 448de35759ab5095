// The tail-lock holder carries the writers that queued in its process while it held the
// lock (Q12): they never touch the tail, and both messages go in one batch. The holder
// is held at the "reclaimed" step (test hooks) until the second writer's cell is in the
// wait queue ("queued"), so that the schedule is the one under test, every time.
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
using ringlog::test::ScratchPath;

namespace {

enum Phase : int { kIdle, kHolderLocked, kOtherQueued, kDone };
std::atomic<int> g_phase{kIdle};
thread_local bool t_holder = false;

// Runs at every write-path step of every thread of this test.
void observe(const char* step) {
  if (t_holder && std::strcmp(step, "reclaimed") == 0 && g_phase.load() == kIdle) {
    g_phase.store(kHolderLocked);  // the tail is locked by us now
    while (g_phase.load() != kOtherQueued) std::this_thread::yield();
  } else if (!t_holder && std::strcmp(step, "queued") == 0) {
    g_phase.store(kOtherQueued);
  }
}

std::string text(const std::vector<std::byte>& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

}  // namespace

TEST(Carry, TheLockHolderCarriesAWriterThatQueuedDuringItsCommit) {
  ScratchPath p;
  // One wait queue: both threads are in the same one whatever their thread indexes.
  Ring r = Ring::create(p, {.area_size = 1 << 16}, {.queues = 1});
  Reader rd = Reader::attach(r, {.kind = ReaderKind::pinned, .start = StartAt::tail});
  const RingStats before = r.stats();
  detail::test_hook_observe(observe);
  WriteStatus holder_res{}, other_res{};
  std::thread holder([&] {
    t_holder = true;
    holder_res = r.write("from the holder");
  });
  ringlog::test::wait_until([] { return g_phase.load() == kHolderLocked; });
  std::thread other([&] { other_res = r.write("from the queue"); });
  holder.join();
  other.join();
  detail::test_hook_observe(nullptr);

  EXPECT_EQ(holder_res, WriteStatus::ok);
  EXPECT_EQ(other_res, WriteStatus::ok);
  const RingStats after = r.stats();
  EXPECT_EQ(after.msgs_written - before.msgs_written, 2u);
  EXPECT_EQ(after.batches - before.batches, 1u) << "the queued writer was not carried in the holder's batch";
  EXPECT_GE(after.lock_waits - before.lock_waits, 1u);
  // The holder's own message first, then the one it carried.
  std::vector<std::byte> m;
  ASSERT_EQ(rd.next(m).status, ReadStatus::message);
  EXPECT_EQ(text(m), "from the holder");
  ASSERT_EQ(rd.next(m).status, ReadStatus::message);
  EXPECT_EQ(text(m), "from the queue");
  EXPECT_EQ(rd.next(m).status, ReadStatus::empty);
}
