// Process-private state of an open ring, shared by the writer (ring.cpp) and the
// readers (reader.cpp). Nothing here is in the file: wait queues hold pointers to
// stack cells, which only make sense inside this process.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>

#include "ringlog/clock.hpp"
#include "ringlog/format.hpp"
#include "ringlog/repair.hpp"
#include "ringlog/ring.hpp"

#if defined(__SANITIZE_THREAD__)
#define RINGLOG_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGLOG_TSAN 1
#endif
#endif

namespace ringlog::detail {

#ifdef RINGLOG_TSAN
// n bytes from s to d as relaxed atomic stores: every copy into the area under
// ThreadSanitizer, so that its race with a passive reader's copy out (which re-checks
// head afterwards) is declared.
inline void store_relaxed(std::uint8_t* d, const std::uint8_t* s, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) std::atomic_ref<std::uint8_t>(d[i]).store(s[i], std::memory_order_relaxed);
}
#endif

using format::Header;

// What the ring's protocol takes for granted about the platform's atomics. Words in the
// file are shared between processes: only lock-free atomics are address-free, and a
// std::atomic in the file must be the plain word that other processes see.
static_assert(std::atomic_ref<std::uint8_t>::is_always_lock_free,
              "RC bytes are RMW'd by several processes through atomic_ref: it must be lock-free");
static_assert(std::atomic_ref<std::uint8_t>::required_alignment == 1,
              "an RC byte may sit at any offset of the area");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "head, tail (with its lock bit) and the slot words are lock-free 64-bit atomics");
static_assert(sizeof(std::atomic<std::uint32_t>) == 4 && alignof(std::atomic<std::uint32_t>) == 4,
              "futex words (Header::futex, a queue cell's state) must be plain aligned 32-bit words");
static_assert(std::atomic<void*>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "wait-queue heads and cell links are lock-free (a waiter spins on them)");

// How far ahead of the tail a write prefetches the lines of the ring (Mapping::
// prefetch_ahead: at most half the area). Measured (bench_ring, one writer, 16 MiB
// ring, HAProxy mix; medians of the ratio to the mutex ring in the same run): without
// it 0.89-1.07, with it 1.19-1.43. A sweep of 512 B to 8 KiB gained at every distance,
// least at 512 B; one line per message instead of every line gained only 0.03-0.09.
constexpr std::uint64_t kPrefetchAhead = 2048;

// A mapped ring file, read-write or read-only, validated on open.
struct Mapping {
  std::string path;
  boost::interprocess::file_mapping file;
  boost::interprocess::mapped_region region;
  Header* hdr = nullptr;
  std::uint8_t* area = nullptr;
  std::uint64_t size = 0;
  std::uint64_t mask = 0;  // size - 1 when size is a power of two, else 0
  std::uint64_t prefetch_ahead = 0;  // how far ahead of the tail a write prefetches (ring.cpp)
  dev_t dev = 0;
  ino_t ino = 0;
  bool can_write = false;  // mapped read-write
  bool in_memory = false;  // over caller memory (over()), no file: never stale

  void map(const std::string& p, bool writable);  // throws Error
  // A writable mapping: every page mapped for writing now (OpenOptions::populate).
  // Returns 0 or the errno of madvise (EINVAL: the kernel has no MADV_POPULATE_WRITE).
  int populate() const noexcept;
  // The same over a ring image in caller memory, which must outlive the mapping.
  void over(std::span<std::byte> image, bool writable);  // throws Error
  void use(void* base, std::uint64_t bytes);  // validates the header there; throws Error
  bool stale() const;

  // Offset of an absolute position: a mask for power-of-two areas (the default), a
  // division otherwise; the branch always goes the same way for one ring.
  std::uint64_t off(std::uint64_t pos) const noexcept { return mask ? (pos & mask) : (pos % size); }
  // The readers-count byte at pos, shared by every process mapping the ring.
  std::atomic_ref<std::uint8_t> rc(std::uint64_t pos) const noexcept {
    return std::atomic_ref<std::uint8_t>(area[off(pos)]);
  }
  // Bytes of the area seen through absolute positions. Reads and writes of message
  // bytes race by design with passive readers (who re-check head afterwards); under
  // ThreadSanitizer they go through relaxed atomics so that the race is declared.
  void copy_in(std::uint64_t pos, const void* src, std::size_t n) const noexcept {
#ifndef RINGLOG_TSAN
    std::uint64_t o = off(pos);
    if (o + n <= size) [[likely]] {  // the write path's common case: no wrap
      std::memcpy(area + o, src, n);
      return;
    }
#endif
    copy_in_wrap(pos, src, n);
  }
  void copy_in_wrap(std::uint64_t pos, const void* src, std::size_t n) const noexcept;
  void copy_out(std::uint64_t pos, void* dst, std::size_t n) const noexcept;
  // The same bytes for the shared recovery steps (ringlog/repair.hpp).
  repair::View view() const noexcept { return repair::View{hdr, area, size}; }
  std::uint8_t byte(std::uint64_t pos) const noexcept {  // inline: reclaim reads varints with it
#ifdef RINGLOG_TSAN
    return std::atomic_ref<std::uint8_t>(area[off(pos)]).load(std::memory_order_relaxed);
#else
    return area[off(pos)];
#endif
  }
};

// Validates a header as found in a file of file_size bytes (h may be null when the file
// is smaller than a header); returns "" when it is good, else what is wrong. Mapping
// uses it, and so does repair::check_header (repair.cpp), for everyone else.
std::string validate_header(const Header* h, std::uint64_t file_size);

// Ring and stats files belong to the group that may read them (Varnish's shared memory
// is group varnish, 0640): the group named by $RINGLOG_GROUP, default "ringlog"; an
// empty name or a group that does not exist leaves the creator's group. Best effort:
// only root and members of the group may give a file to it.
inline constexpr const char* kDefaultRingGroup = "ringlog";
void give_to_ring_group(int fd) noexcept;

// Sizes a new ring or stats file to size bytes and allocates all of it (posix_fallocate):
// a sparse file on a tmpfs such as /dev/shm gets its pages only when they are first
// written, and a page the file system cannot give (the tmpfs is full) is a SIGBUS in the
// writer, a crash of the server that logs. Allocated at creation, the file either has all
// its space or its creation fails with ENOSPC. Returns 0 or the errno value.
int size_file(int fd, std::uint64_t size) noexcept;

// The pid, cached (glibc's getpid() is a system call); 0 until first use and after fork.
extern std::atomic<std::uint32_t> g_self_pid;
std::uint32_t self_pid_slow() noexcept;
inline std::uint32_t self_pid() noexcept {
  std::uint32_t p = g_self_pid.load(std::memory_order_relaxed);
  return p ? p : self_pid_slow();
}
std::uint64_t self_start_time() noexcept;
std::uint32_t self_tid() noexcept;

// One spin-wait hint (x86 pause, arm yield).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Bounded spinning, then yielding, then short sleeps: threads > cores must not collapse.
struct Backoff {
  unsigned n = 0;
  void pause() noexcept;
};

}  // namespace ringlog::detail

namespace ringlog {

struct Ring::Impl : std::enable_shared_from_this<Ring::Impl> {
  detail::Mapping m;
  unsigned nqueues = 6;
  struct alignas(64) Queue {
    std::atomic<void*> head{nullptr};
  };
  static_assert(sizeof(Queue) == 64 && alignof(Queue) == 64,
                "each wait queue has its own cache line: writers of different queues must not share one");
  std::unique_ptr<Queue[]> queues;
  std::uint64_t max_payload = 0;
  // Payloads shorter than this are neither truncated (max_msg_len) nor refused
  // (max_payload): the write path's one compare for both.
  std::uint64_t lone_limit = 0;
  std::uint64_t id = 0;  // process-unique id of this Impl, for thread-local slot caches

  // Dead-process checks, at most every kCheckPeriodNs per process.
  std::atomic<std::uint64_t> next_check_ns{0};

  // Writer slot of the calling thread (allocated on first use, freed at thread exit).
  int writer_slot() noexcept;
  int writer_slot_slow(std::uint32_t pid) noexcept;
  void free_writer_slot(int slot) noexcept;

  // Tail lock, shared by writers, attaching readers and recovery.
  std::uint64_t lock_tail(int slot) noexcept;  // returns the unlocked tail value
  bool try_lock_tail(std::uint64_t& t) noexcept;
  void unlock_tail(std::uint64_t t) noexcept;
  void recover_dead_owner(std::uint64_t locked_tail) noexcept;

  // With the tail lock held. Writers call the periodic check with a running count of
  // the ring's before and after their step (batches written, messages dropped); it
  // looks at the clock each time that count passes a multiple of 256.
  void check_dead_locked(bool force) noexcept;
  void check_dead_periodic(std::uint64_t before, std::uint64_t after) noexcept {
    if ((before ^ after) >> 8) [[unlikely]] check_dead_locked(false);
  }

  // A batch blocked by a writer still copying (RC 0xFF at head) waits for it while
  // this returns true: up to writer_wait_ns for one position. Under the tail lock.
  std::uint64_t writer_wait_ns = 10'000'000;
  std::uint64_t stuck_pos = ~0ULL, stuck_since_ns = 0;
  bool wait_for_writer(std::uint64_t pos) noexcept;
  std::uint64_t reader_wait_ns = 100'000'000;  // OpenOptions::reader_wait

  void wake_readers() noexcept;
  ~Impl();
};

}  // namespace ringlog
