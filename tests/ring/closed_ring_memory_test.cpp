// A ring's memory goes when the ring closes, even after threads wrote to it: a thread's
// writer-slot cache drops its entries for closed rings instead of keeping them (their
// weak pointers held each closed ring's memory until the thread exited). Observed by
// counting the bytes this program holds from operator new.
#include <atomic>
#include <cstdlib>
#include <new>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "ringlog/ring.hpp"
#include "test_util.hpp"

namespace {

std::atomic<long long> g_live{0};  // bytes allocated with operator new and not freed
constexpr std::size_t kPrefix = 16;  // keeps malloc's alignment

void* counted_new(std::size_t n) {
  void* p = std::malloc(n + kPrefix);
  if (!p) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n;
  g_live.fetch_add(static_cast<long long>(n), std::memory_order_relaxed);
  return static_cast<char*>(p) + kPrefix;
}
void counted_delete(void* p) noexcept {
  if (!p) return;
  char* base = static_cast<char*>(p) - kPrefix;
  g_live.fetch_sub(static_cast<long long>(*reinterpret_cast<std::size_t*>(base)), std::memory_order_relaxed);
  std::free(base);
}

}  // namespace

void* operator new(std::size_t n) { return counted_new(n); }
void* operator new[](std::size_t n) { return counted_new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { counted_delete(p); }
void operator delete[](void* p) noexcept { counted_delete(p); }
void operator delete(void* p, std::size_t) noexcept { counted_delete(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_delete(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_delete(p); }

using namespace ringlog;
using ringlog::test::ScratchPath;

namespace {

long long live() { return g_live.load(std::memory_order_relaxed); }

// Steps handed back and forth between the test and a writer thread.
struct Turns {
  std::atomic<int> step{0};
  void go(int s) {
    step.store(s, std::memory_order_release);
    step.notify_all();
  }
  void await(int s) {
    for (int cur; (cur = step.load(std::memory_order_acquire)) != s;) step.wait(cur);
  }
};

TEST(ClosedRingMemory, ReleasedWhenTheWritingThreadClosesIt) {
  ScratchPath path;
  Ring::create(path, {.area_size = 4096, .mode = 0600});
  auto open_write_close = [&] {
    Ring r = Ring::open(path);
    ASSERT_EQ(r.write("x"), WriteStatus::ok);
  };
  open_write_close();  // first use: the thread's cache and the process's pid are set up
  const long long before = live();
  for (int i = 0; i < 50; ++i) open_write_close();
  EXPECT_EQ(live(), before) << "50 rings opened, written to and closed left memory behind";
}

TEST(ClosedRingMemory, ReleasedWhenAnotherThreadWroteToIt) {
  ScratchPath pb("b"), pa("a");
  Ring b = Ring::create(pb, {.area_size = 4096, .mode = 0600});
  Ring::create(pa, {.area_size = 4096, .mode = 0600});
  std::optional<Ring> a;
  Turns turns;
  long long before = 0, after = 0;
  constexpr int kRounds = 3;
  std::thread writer([&] {
    for (int round = 0; round < kRounds; ++round) {
      turns.await(4 * round + 1);  // the test opened a ring for this round
      EXPECT_EQ(a->write("a"), WriteStatus::ok);
      EXPECT_EQ(b.write("b"), WriteStatus::ok);
      turns.go(4 * round + 2);
      turns.await(4 * round + 3);  // the test closed it
      EXPECT_EQ(b.write("b"), WriteStatus::ok);  // a lookup of this thread's slots
      turns.go(4 * round + 4);
    }
    turns.await(4 * kRounds + 1);  // measured: the thread may exit
  });
  for (int round = 0; round < kRounds; ++round) {
    a.emplace(Ring::open(pa));
    turns.go(4 * round + 1);
    turns.await(4 * round + 2);
    a.reset();  // closed on this thread; the writer thread still has an entry for it
    turns.go(4 * round + 3);
    turns.await(4 * round + 4);
    if (round == 0) before = live();  // after the first round, which set the cache up
  }
  after = live();
  turns.go(4 * kRounds + 1);
  writer.join();
  EXPECT_EQ(after, before) << "rings closed after another thread wrote to them left memory behind";
}

}  // namespace
