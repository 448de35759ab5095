// The ring's write path: HAProxy 3.x's queued multi-writer algorithm over a shared
// file, plus creation, opening and when dead-process recovery runs (its steps are the
// shared ones of repair.cpp). It must never block on a reader (it drops instead) and
// never leave a 0xFF readers-count byte at the tail.
//
// Ordered accesses carry a label at the access saying what it pairs with; the table
// of all labels, and what each one makes correct, is docs/RING.md section 3 (a test
// keeps the two in step). Prefixes used here: W commit (the batch write), L tail lock,
// H head reclaim, Q wait queue, S writer slots, D dead lock holder, T torn batch,
// U dead pinned reader, K wake-ups. The pairings the write path rests on:
//  W1 hide RC[t-1] (0xFF)  ->  R2/R3/H1 stop at it; W4 restores it after the copy
//  W2 head, fence(release) ->  P2 (passive reader's fence(acquire) + head reload)
//  W3 tail (release)       ->  R1 (readers' tail load), L1 (the next locker)
//  W4 RC[t-1] (release)    ->  R2 (readers' RC load, acquire)
//  W5 fence(seq_cst)       ->  K1 (a pinned reader announcing it will sleep)
//  H1 RC[head] (acquire)   ->  R4/U3 (a reader leaving the byte, release)
//  Q1/Q5/Q3 (publish)      ->  Q4/Q8/Q9 (the next writer, the leader)
//  Q2 hand-over            ->  Q10/Q11 (the carried waiter)
#include <linux/futex.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bit>
#include <cinttypes>
#include <climits>
#include <mutex>
#include <cstdio>
#include <ctime>
#include <random>
#include <vector>

#include "ring_impl.hpp"
#include "test_hooks.hpp"

namespace ringlog {

using namespace format;
using detail::Backoff;
using detail::self_pid;
using detail::self_start_time;

namespace {

constexpr std::uint64_t kCheckPeriodNs = 50'000'000;     // dead-process checks
constexpr std::uint64_t kLockSuspectNs = 20'000'000;     // tail locked this long: check owner
constexpr std::uint64_t kUnknownOwnerNs = 1'000'000'000; // owner never recorded: longer
constexpr std::uint64_t kNotReady = ~0ULL;
constexpr std::uint32_t kRcUnknown = kRcNotRecorded;
// A writer that finds the tail locked does not poll it: every poll pulls the line away
// from the holder, whose next write then waits for it. It tries once more after 16
// private pauses, so that the holder writes bursts with its lines in its own cache,
// then queues and sleeps until the holder carries it (Q12) or the lock is free.
// Measured (bench_ring, 2 vCPUs): polling 32 times then spinning in the queue gave
// 3-4.5 M msg/s at 2-16 writers; this gives 17-29 M (docs/RING.md, section 2).
constexpr unsigned kLockTries = 2;         // tries of a locked tail before queueing
constexpr unsigned kFirstPauses = 16;      // pauses before the second try, doubling
constexpr long kQueuedSleepNs = 20'000;    // a queued writer's first sleep between looks, doubling
constexpr unsigned kSleepDoublings = 4;    // up to 16 times that
constexpr unsigned kCarriedSleeps = 50;    // a carried writer's sleeps before it parks

enum : std::uint32_t { kWaiting = 0, kDone = 1, kDropped = 2, kParked = 4 };
constexpr std::uint32_t kRetry = 8;  // commit(): the lock was released, take it again and retry


// One message to write: computed once by writev, used by the lock holder and the copy.
struct Msg {
  const iovec* parts = nullptr;
  std::size_t nparts = 0;
  std::uint64_t len = 0;     // payload bytes to copy (after truncation)
  std::uint64_t varint = 0;  // the framing varint (len << 2 | kind), packed (varint_pack)
  std::uint64_t needed = 0;  // 1 (RC) + varint + len
  std::size_t varint_len() const noexcept { return static_cast<std::size_t>(needed - 1 - len); }
};
static_assert(std::endian::native == std::endian::little, "Msg::varint holds the varint's bytes in memory order");

// The framing word's varint packed for one store (varint_pack), its first two cases
// inline: payloads below 572 bytes. vl gets its length.
[[gnu::always_inline]] inline std::uint64_t pack_framing(std::uint64_t word, std::size_t& vl) noexcept {
  if (word < 240 + (128 << 4)) [[likely]] {
    vl = word < 240 ? 1 : 2;
    return word < 240 ? word : ((word | 240) & 0xFF) | ((word - 240) >> 4) << 8;
  }
  return varint_pack(word, vl);
}

inline Msg make_msg(const iovec* parts, std::size_t nparts, std::uint64_t len, MsgKind kind) noexcept {
  std::size_t vl;
  const std::uint64_t v = pack_framing((len << kKindBits) | std::uint64_t(kind), vl);
  return {parts, nparts, len, v, 1 + vl + len};
}

// A queued writer's stack cell: its message plus the queue's links and hand-over state.
struct Cell : Msg {
  explicit Cell(const Msg& m) : Msg(m) {}
  std::atomic<std::uint64_t> needed_tot{kNotReady};  // this cell and all older ones
  std::atomic<std::uint64_t> count_tot{0};
  std::atomic<Cell*> next{nullptr};
  std::atomic<bool> linked{false};  // next is valid
  std::atomic<std::uint32_t> state{kWaiting};
};
static_assert(sizeof(Cell) <= 2 * 64, "a queued writer's cell is at most two cache lines: the leader reads each one");
static_assert(std::atomic<Cell*>::is_always_lock_free && std::atomic<std::uint64_t>::is_always_lock_free,
              "cell links and running totals are lock-free: waiters spin on them");
static_assert(((kDone | kDropped) & kParked) == 0 && kWaiting == 0, "the park bit is apart from the results");

std::atomic<unsigned> g_next_thread_index{0};
thread_local unsigned t_thread_index = ~0u;

unsigned thread_index() noexcept {
  if (t_thread_index == ~0u) t_thread_index = g_next_thread_index.fetch_add(1, std::memory_order_relaxed);
  return t_thread_index;
}

std::atomic<std::uint64_t> g_next_impl_id{1};

// Writer slots of this thread, one per open ring; released when the thread exits.
// An entry lives no longer than its ring: a ring closing drops this thread's entry for
// it, and the next lookup drops those of rings closed by other threads. A weak pointer
// left behind would keep the closed ring's memory (Impl and control block are one
// allocation), and the entries would grow with every ring the thread ever wrote to.
struct SlotCache {
  struct Entry {
    const Ring::Impl* impl;
    std::uint64_t id;
    std::uint32_t pid;
    int slot;
    std::weak_ptr<Ring::Impl> owner;
  };
  std::vector<Entry> entries;
  ~SlotCache() {
    for (auto& e : entries)
      if (auto p = e.owner.lock(); p && e.pid == self_pid()) p->free_writer_slot(e.slot);
  }
};
thread_local SlotCache t_slots;

inline void pause_n(unsigned n) noexcept {
  for (unsigned i = 0; i < n; ++i) detail::cpu_relax();
}

inline void sleep_ns(long ns) noexcept {
  timespec ts{0, ns};
  ::nanosleep(&ts, nullptr);
}

// A carried writer waits for its cell: briefly spinning (the leader is copying), then
// sleeping between looks, so that with more threads than cores waiters give the leader
// their CPU and it need not make a system call to release them; after that it parks on
// the cell (a private futex: cells live in this process) for a leader that was
// preempted.
std::uint32_t wait_carried(std::atomic<std::uint32_t>& state) noexcept {
  unsigned n = 0;
  std::uint32_t st;
  // Q10: state.load(acquire); pairs with Q2: once it reads done or dropped, the leader
  // no longer touches the cell, which may then die with this frame.
  while ((st = state.load(std::memory_order_acquire)) == kWaiting) {
    if (n < kLockTries) {
      pause_n(kFirstPauses << n++);
      continue;
    }
    if (n < kLockTries + kCarriedSleeps) {
      sleep_ns(kQueuedSleepNs << std::min(n++ - kLockTries, kSleepDoublings));
      continue;
    }
    std::uint32_t expect = kWaiting;
    // Q11: park flag CAS (acq_rel); pairs with Q2: either the leader's exchange sees
    // kParked and wakes us, or this CAS fails on its result.
    if (state.compare_exchange_strong(expect, kWaiting | kParked, std::memory_order_acq_rel)) {
      do {
        ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state), FUTEX_WAIT_PRIVATE, kWaiting | kParked,
                  nullptr, nullptr, 0);
      } while ((st = state.load(std::memory_order_acquire)) == (kWaiting | kParked));  // Q10: as above
      return st;
    }
  }
  return st;
}

// Releases a carried writer; wakes it if it parked. The cell may be gone as soon as
// the exchange is done (its owner returns): only its address is used after that, and
// a stray wake on a reused address is harmless (futex waiters re-check).
void release_carried(std::atomic<std::uint32_t>& state, std::uint32_t result) noexcept {
  // Q2: state.exchange(done or dropped, acq_rel); pairs with Q10/Q11 of the waiter:
  // its cell was copied (or dropped) before this; the old value tells whether it parked.
  if (state.exchange(result, std::memory_order_acq_rel) & kParked)
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

long futex_wake_all(std::atomic<std::uint32_t>* addr) noexcept {
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

constexpr std::uint64_t kLine = 64;

// A hint to bring the line of p into this core's cache, exclusive (PREFETCHW: a NOP
// on x86-64 processors without it). An asm statement: GCC 12 deletes a loop of
// __builtin_prefetch as dead code, and emits PREFETCHT0 (shared) without -mprfchw.
inline void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pstl1keep, %0" : : "Q"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}
// The area's geometry in locals: the write path reads it once per call instead of after
// every atomic access (the compiler may not move loads of the Mapping across those).
// Pow2: the area size is a power of two (the default), so an offset is one AND; the
// write path is instantiated for both cases and picks one per call.
template <bool Pow2>
struct Area {
  std::uint8_t* base;
  std::uint64_t size, mask, ahead;
  explicit Area(const detail::Mapping& mp) noexcept
      : base(mp.area), size(mp.size), mask(mp.mask), ahead(mp.prefetch_ahead) {}
  std::uint64_t off(std::uint64_t pos) const noexcept {
    if constexpr (Pow2)
      return pos & mask;
    else
      return pos % size;
  }
  std::atomic_ref<std::uint8_t> rc(std::uint64_t pos) const noexcept {
    return std::atomic_ref<std::uint8_t>(base[off(pos)]);
  }
  std::uint8_t byte(std::uint64_t pos) const noexcept { return byte_at(base, off(pos)); }
  static std::uint8_t byte_at(std::uint8_t* base, std::uint64_t o) noexcept {
#ifdef RINGLOG_TSAN
    return std::atomic_ref<std::uint8_t>(base[o]).load(std::memory_order_relaxed);
#else
    return base[o];
#endif
  }
  // The general copy (wrap-around, or relaxed atomics under ThreadSanitizer); by value,
  // so that the Area stays in registers.
  void copy_in(std::uint64_t pos, const void* src, std::size_t n) const noexcept {
    copy_in_slow(base, size, off(pos), src, n);
  }
  // Asks for the lines that [from, to) will be written to once the ring has moved
  // `ahead` further (Mapping::prefetch_ahead), in the state a write needs (exclusive). Each write asks for
  // the lines it moved over, so every line is asked for once, well before a copy stalls
  // on it: a ring in use is full, so those lines were last written one ring ago and
  // have left this core's caches, and the hardware prefetcher does not run ahead of the
  // stores far enough. The distance stays below half a small ring.
  // The lines up to the end of the area only: those past a wrap are left to the
  // writes that follow it (once a ring). Four lines first (most messages of the
  // HAProxy mix need no more), then two a turn: the last ones may lie past `to`, or up
  // to three lines past the area (a prefetch never faults), and are then asked for
  // again by the next write. Unaligned: the last line's rest is asked for again by the
  // next write, at most.
  void prefetch_ahead(std::uint64_t from, std::uint64_t to) const noexcept {
    std::uint64_t o = off(from + ahead);
    const std::uint64_t end = std::min(o + (to - from), size);
    prefetch_for_write(base + o);
    prefetch_for_write(base + o + kLine);
    prefetch_for_write(base + o + 2 * kLine);
    prefetch_for_write(base + o + 3 * kLine);
    for (o += 4 * kLine; o < end; o += 2 * kLine) {
      prefetch_for_write(base + o);
      prefetch_for_write(base + o + kLine);
    }
  }
  [[gnu::noinline]] static void copy_in_slow(std::uint8_t* base, std::uint64_t size, std::uint64_t o,
                                             const void* src, std::size_t n) noexcept {
    const auto* s = static_cast<const std::uint8_t*>(src);
    while (n) {
      std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n, size - o));
#ifdef RINGLOG_TSAN
      detail::store_relaxed(base + o, s, chunk);
#else
      std::memcpy(base + o, s, chunk);
#endif
      s += chunk;
      n -= chunk;
      o = 0;
    }
  }
};

// Common cases: a one- or two-byte length (payloads up to ~500 bytes) that does not
// wrap, read straight from the area after the RC byte at offset o. The two bytes may
// lie at or past the caller's limit (it holds the tail lock: nobody writes there) and
// are then checked by the span. 0 when the framing is not one of these.
template <bool Pow2>
[[gnu::always_inline]] inline std::uint64_t common_span_at(const Area<Pow2>& m, std::uint64_t o) noexcept {
  if (o + 2 >= m.size) [[unlikely]] return 0;  // (an RC byte at the area's last one too)
  const std::uint8_t b0 = Area<Pow2>::byte_at(m.base, o + 1);
  if (b0 < 240) return 2 + (b0 >> kKindBits);
  const std::uint8_t b1 = Area<Pow2>::byte_at(m.base, o + 2);
  if (b1 >= 128) return 0;
  return 3 + ((b0 + (std::uint64_t{b1} << 4)) >> kKindBits);
}
// The same at position pos, 0 also when the span passes limit.
template <bool Pow2>
[[gnu::always_inline]] inline std::uint64_t message_span_common(const Area<Pow2>& m, std::uint64_t pos,
                                                               std::uint64_t limit) noexcept {
  const std::uint64_t span = common_span_at(m, m.off(pos));
  return span > limit - pos ? 0 : span;
}

template <bool Pow2>
[[gnu::noinline]] std::uint64_t message_span_slow(const Area<Pow2> m, std::uint64_t pos, std::uint64_t limit) noexcept;

// Reads the framing of the message whose RC byte is at pos; 0 when it is malformed.
template <bool Pow2>
[[gnu::always_inline]] inline std::uint64_t message_span(const Area<Pow2>& m, std::uint64_t pos,
                                                        std::uint64_t limit) noexcept {
  if (std::uint64_t span = message_span_common(m, pos, limit)) [[likely]] return span;
  return message_span_slow(m, pos, limit);
}

// Any framing, wrapped or long; 0 when it is malformed.
template <bool Pow2>
std::uint64_t message_span_slow(const Area<Pow2> m, std::uint64_t pos, std::uint64_t limit) noexcept {
  if (limit - pos < 2) return 0;  // no room for even a one-byte length
  std::uint64_t word = 0;
  // The lambda holds the Area's fields, not a copy of the Area (which kept it out of registers).
  auto at = [base = m.base, size = m.size, mask = m.mask, pos](std::size_t i) {
    return Area<Pow2>::byte_at(base, Pow2 ? ((pos + 1 + i) & mask) : ((pos + 1 + i) % size));
  };
  std::size_t vl = varint_decode(at,
                                 static_cast<std::size_t>(std::min<std::uint64_t>(kVarintMax, limit - pos - 1)),
                                 word);
  if (vl == 0) return 0;
  std::uint64_t span = 1 + vl + (word >> kKindBits);
  if (span > limit - pos) return 0;
  return span;
}

}  // namespace


const char* to_string(WriteStatus s) noexcept {
  switch (s) {
    case WriteStatus::ok: return "ok";
    case WriteStatus::truncated: return "truncated to the ring's maximum message length";
    case WriteStatus::dropped: return "dropped: no room (readers pinned or ring full)";
    case WriteStatus::too_big: return "refused: larger than the ring's maximum payload";
  }
  return "?";
}

// ---------------------------------------------------------------- slots

// What the write path needs about the calling thread and the last ring it wrote to,
// in one thread-local block (one TLS address computation): checked with one compare
// (ring ids are never reused in a process) before anything else. A fork (the handler
// below, in the child's one thread) or set_thread_index() invalidates it.
struct WriterCtx {
  const Ring::Impl* impl = nullptr;
  std::uint64_t id = 0;  // 0: none
  std::uint32_t pid = 0;
  int slot = -1;
  std::uint64_t owner = 0;  // owner_word(pid, slot)
  Ring::Impl::Queue* queue = nullptr;
  WriterSlot* ws = nullptr;  // the slot, in the ring's header; null when slot < 0
};
thread_local WriterCtx t_ctx;
std::once_flag g_ctx_atfork_once;

[[gnu::noinline]] const WriterCtx& writer_ctx_slow(Ring::Impl& r) noexcept {
  std::call_once(g_ctx_atfork_once, [] { ::pthread_atfork(nullptr, nullptr, [] { t_ctx.id = 0; }); });
  std::uint32_t pid = self_pid();
  int s = r.writer_slot_slow(pid);
  t_ctx = {&r, r.id, pid, s, owner_word(pid, static_cast<std::uint32_t>(s)), &r.queues[thread_index() % r.nqueues],
           s >= 0 ? &r.m.hdr->writers[s] : nullptr};
  return t_ctx;
}

inline const WriterCtx& writer_ctx(Ring::Impl& r) noexcept {
  if (t_ctx.id == r.id) [[likely]] return t_ctx;
  return writer_ctx_slow(r);
}

int Ring::Impl::writer_slot() noexcept { return writer_ctx(*this).slot; }

void set_thread_index(unsigned index) noexcept {
  t_thread_index = index;
  t_ctx.id = 0;  // the cached wait queue follows the index
}

int Ring::Impl::writer_slot_slow(std::uint32_t pid) noexcept {
  std::erase_if(t_slots.entries, [](const SlotCache::Entry& e) { return e.owner.expired(); });
  for (auto& e : t_slots.entries)
    if (e.impl == this && e.id == id) {
      if (e.pid == pid) return e.slot;
      e.pid = 0;  // inherited across fork: the parent owns that slot
    }
  Header* h = m.hdr;
  int found = -1;
  for (int pass = 0; pass < 2 && found < 0; ++pass) {
    for (unsigned i = 0; i < kWriterSlots; ++i) {
      WriterSlot& ws = h->writers[i];
      std::uint32_t cur = ws.pid.load(std::memory_order_relaxed);
      if (cur != 0) {
        // Second pass: take over slots of dead processes with nothing in flight.
        if (pass == 0 || cur == pid || ws.inflight_pos.load(std::memory_order_relaxed) != 0 ||
            process_alive(static_cast<pid_t>(cur), ws.start_time.load(std::memory_order_relaxed)))
          continue;
      }
      // S1: pid CAS (acq_rel) claims the slot; pairs with S2/S5 (pid cleared, release,
      // after its in-flight record): a slot taken over has nothing in flight.
      if (ws.pid.compare_exchange_strong(cur, pid, std::memory_order_acq_rel)) {
        ws.tid.store(detail::self_tid(), std::memory_order_relaxed);
        ws.start_time.store(self_start_time(), std::memory_order_relaxed);
        ws.inflight_pos.store(0, std::memory_order_relaxed);
        found = static_cast<int>(i);
        break;
      }
    }
  }
  std::weak_ptr<Impl> owner = weak_from_this();
  for (auto& e : t_slots.entries)
    if (e.impl == this && e.id == id) {
      e = {this, id, pid, found, owner};
      return found;
    }
  t_slots.entries.push_back({this, id, pid, found, owner});
  return found;
}

void Ring::Impl::free_writer_slot(int slot) noexcept {
  if (slot < 0) return;
  WriterSlot& ws = m.hdr->writers[slot];
  std::uint32_t pid = self_pid();
  if (ws.inflight_pos.load(std::memory_order_relaxed) == 0)
    ws.pid.compare_exchange_strong(pid, 0, std::memory_order_acq_rel);  // S2: free our slot; pairs with S1
}

Ring::Impl::~Impl() {
  // Slots of threads that outlive this ring are ours to free now. This thread's entry
  // goes now; other threads drop theirs at their next lookup (their weak pointers
  // have expired).
  std::erase_if(t_slots.entries, [this](const SlotCache::Entry& e) { return e.impl == this; });
  std::uint32_t pid = self_pid();
  if (m.hdr && m.can_write) {
    for (unsigned i = 0; i < kWriterSlots; ++i) {
      WriterSlot& ws = m.hdr->writers[i];
      std::uint32_t cur = pid;
      if (ws.inflight_pos.load(std::memory_order_relaxed) == 0)
        ws.pid.compare_exchange_strong(cur, 0, std::memory_order_acq_rel);  // S2: as in free_writer_slot
    }
  }
}

// ---------------------------------------------------------------- tail lock

inline bool Ring::Impl::try_lock_tail(std::uint64_t& t) noexcept {
  t = m.hdr->tail.load(std::memory_order_relaxed);
  if (t & kTailLock) return false;
  // L1: tail CAS sets the lock bit (acquire); pairs with W3/L4 of the previous holder:
  // head, the trailing RC, in-flight records and counters are seen as it left them.
  return m.hdr->tail.compare_exchange_strong(t, t | kTailLock, std::memory_order_acquire,
                                             std::memory_order_relaxed);
}

void Ring::Impl::unlock_tail(std::uint64_t t) noexcept {
  // L3: owner word and saved RC forgotten (relaxed), ordered before L4: the next
  // holder starts from "unknown" (D1 then waits for its L2).
  m.hdr->owner.store(0, std::memory_order_relaxed);
  m.hdr->owner_saved_rc.store(kRcUnknown, std::memory_order_relaxed);
  m.hdr->tail.store(t, std::memory_order_release);  // L4: unlock without publishing; pairs with L1
}

std::uint64_t Ring::Impl::lock_tail(int slot) noexcept {
  Backoff b;
  std::uint64_t seen = 0, since = 0;
  for (;;) {
    std::uint64_t t;
    if (try_lock_tail(t)) {
      // L2: owner word (relaxed), read by D1 of a waiter that suspects we died.
      m.hdr->owner.store(owner_word(self_pid(), static_cast<std::uint32_t>(slot)), std::memory_order_relaxed);
      return t;
    }
    b.pause();
    if (b.n > 16) {  // beyond the spinning phase: watch for a dead owner
      std::uint64_t now = monotonic_ns();
      if (t != seen) {
        seen = t;
        since = now;
      } else if (now - since > kLockSuspectNs) {
        recover_dead_owner(t);
        since = now;
      }
    }
  }
}

// The tail has been locked at the same value for a while: if its owner is dead, take
// the lock over, undo what the owner may have started, and release it.
void Ring::Impl::recover_dead_owner(std::uint64_t locked) noexcept {
  Header* h = m.hdr;
  if (!(locked & kTailLock)) return;
  // D1: owner.load(acquire). The owner stored it relaxed (L2) and may be dead: nothing
  // to pair with. A stale value is harmless: D2's CAS succeeds only on the current one.
  std::uint64_t o = h->owner.load(std::memory_order_acquire);
  repair::LockOwner dead;  // the owner named by o; none when o is 0
  // The wait for an owner that never recorded itself, per thread: the locked value
  // seen, since when, and lock_recoveries then.
  static thread_local std::uint64_t unknown_since = 0, unknown_tail = 0, unknown_recoveries = 0;
  if (o != 0) {
    dead = repair::lock_owner(*h, o, repair::system_alive);
    if (dead.alive) return;
  } else {
    // The owner died between taking the lock and recording itself (a few
    // instructions): only after a long wait, and only if some writer is dead. The
    // wait is for one lock, not one tail value: a recovery unlocks at the same
    // position, and the next live locker takes the same value before its L2, so a
    // recovery since the wait began (lock_recoveries moved) starts it again (D9).
    std::uint64_t now = monotonic_ns();
    if (unknown_tail != locked) {
      unknown_tail = locked;
      unknown_since = now;
      unknown_recoveries = h->lock_recoveries.load(std::memory_order_relaxed);
      return;
    }
    if (now - unknown_since < kUnknownOwnerNs) return;
    // Lockers are writers and pinned readers (lock_tail(-1)): a dead one of either.
    bool any_dead = false;
    for (unsigned i = 0; i < kWriterSlots && !any_dead; ++i) {
      std::uint32_t pid = h->writers[i].pid.load(std::memory_order_relaxed);
      if (pid && pid != self_pid() && !process_alive(static_cast<pid_t>(pid), h->writers[i].start_time.load(std::memory_order_relaxed)))
        any_dead = true;
    }
    for (unsigned i = 0; i < kReaderSlots && !any_dead; ++i) {
      std::uint32_t pid = h->readers[i].pid.load(std::memory_order_relaxed);
      if (pid && pid != self_pid() && !process_alive(static_cast<pid_t>(pid), h->readers[i].start_time.load(std::memory_order_relaxed)))
        any_dead = true;
    }
    if (!any_dead) return;
  }
  std::uint64_t mine = owner_word(self_pid(), 0xfffffffeu);
  // D2: owner CAS dead word -> ours (acq_rel): of several waiters, one recovers.
  if (!h->owner.compare_exchange_strong(o, mine, std::memory_order_acq_rel)) return;
  // D3: tail.load(acquire) still the locked value the owner took (its L1 RMW continues
  // the release sequence of the previous W3/L4, which we thus see).
  if (h->tail.load(std::memory_order_acquire) != locked) {
    h->owner.compare_exchange_strong(mine, o, std::memory_order_acq_rel);  // D4: give the word back
    return;
  }
  // D9: lock_recoveries (relaxed) unchanged since an unrecorded owner's wait began.
  // The recoverer counted before its L4, which D3's acquire of the same tail value
  // (a later locker's L1 RMW continues L4's release sequence) makes visible here.
  if (o == 0 && h->lock_recoveries.load(std::memory_order_relaxed) != unknown_recoveries) {
    h->owner.compare_exchange_strong(mine, o, std::memory_order_acq_rel);  // D4
    unknown_tail = 0;  // wait again, from now
    return;
  }
  // Undo what the dead owner may have started (repair.cpp): the RC at t-1 gets the
  // count it saved, or, if it died before saving it, the live pinned readers parked there.
  std::uint64_t t = locked & kPosMask;
  const repair::View v = m.view();
  std::uint32_t saved = h->owner_saved_rc.load(std::memory_order_relaxed);  // D6: the dead owner's W7
  // D5: RC[t-1] (acquire) is 0xFF: the dead owner's W1, never restored; if it died
  // before W7, recount the readers parked there (D7).
  if (saved >= kRcUnknown && m.rc(t - 1).load(std::memory_order_acquire) == kRcWriting)
    saved = repair::live_readers_at(v, t - 1, repair::system_alive);
  repair::undo_dead_lock(v, t, dead, saved);
  // An owner that died between L3 and W3 left no owner word, but its writer slot still
  // records the batch it never published at t (W9). Forget it, as undo_dead_lock does
  // a known owner's: else the first dead-process check after the tail passed it finds
  // the live batch then at t-1 hidden behind its 0xFF (T4) and pads it.
  if (o == 0)
    for (auto& ws : h->writers) {
      std::uint32_t pid = ws.pid.load(std::memory_order_relaxed);
      if (pid && pid != self_pid() && ws.inflight_pos.load(std::memory_order_relaxed) == t &&
          !process_alive(static_cast<pid_t>(pid), ws.start_time.load(std::memory_order_relaxed)))
        repair::forget_writer(ws);
    }
  unlock_tail(t);
}

// ---------------------------------------------------------------- dead processes

// The checks themselves are the shared recovery steps (repair.cpp); the ring adds
// when to run them and one liveness verdict per pid per scan.
void Ring::Impl::check_dead_locked(bool force) noexcept {
  std::uint64_t now = monotonic_ns();
  if (!force && now < next_check_ns.load(std::memory_order_relaxed)) return;
  next_check_ns.store(now + kCheckPeriodNs, std::memory_order_relaxed);
  std::uint32_t me = self_pid();
  std::vector<std::pair<std::uint32_t, bool>> seen;
  repair::recover_dead(m.view(), [&](std::uint32_t pid, std::uint64_t start) {
    if (pid == me) return true;
    for (auto& [p, a] : seen)
      if (p == pid) return a;
    bool a = repair::system_alive(pid, start);
    seen.emplace_back(pid, a);
    return a;
  });
}

void Ring::check_dead() noexcept {
  std::uint64_t t = impl_->lock_tail(impl_->writer_slot());
  impl_->check_dead_locked(true);
  impl_->unlock_tail(t);
}

// ---------------------------------------------------------------- a writer in the way

bool Ring::Impl::wait_for_writer(std::uint64_t pos) noexcept {
  std::uint64_t now = monotonic_ns();
  if (stuck_pos != pos) {
    stuck_pos = pos;
    stuck_since_ns = now;
  }
  return now - stuck_since_ns < writer_wait_ns;
}

// ---------------------------------------------------------------- wake-ups

void Ring::Impl::wake_readers() noexcept {
  Header* h = m.hdr;
  // Only one writer wakes at a time; the others leave a note for it. All seq_cst: the
  // flags form a Dekker pair (K3 before K4 here, K7 before K8 in the waker).
  h->wake_again.store(1, std::memory_order_seq_cst);  // K3: leave the note
  if (h->waking.exchange(1, std::memory_order_seq_cst)) return;  // K4: become the waker, or go
  do {
    h->wake_again.store(0, std::memory_order_seq_cst);  // K5: notes so far are served
    h->futex.fetch_add(1, std::memory_order_seq_cst);  // K6: bump the word; pairs with K2
    futex_wake_all(&h->futex);
    h->waking.store(0, std::memory_order_seq_cst);  // K7: stop waking; pairs with K4
    // K8: a note left meanwhile (K3 of a writer whose K4 failed): wake once more (K4).
  } while (h->wake_again.load(std::memory_order_seq_cst) && !h->waking.exchange(1, std::memory_order_seq_cst));
}

// ---------------------------------------------------------------- write

namespace {

// Frees room for [t-1, new_tail) by moving head over messages nobody holds, no further:
// head stays one ring behind the writes, so the line that reclaim reads at head is the
// one the copy overwrites next. Returns false (head unchanged in the file) when a
// reader or writer is in the way (held: the RC byte found there). Measured (one writer, 16 MiB ring): keeping head
// 4 KiB further ahead, so that reclaim would bring those lines in early, made a write
// 2x slower (155 against 80 ns), and any lead from 512 B to 16 KiB cost 30-100 %.
// Common: only the common framing (message_span_common); any other fails as if held.
template <bool Pow2, bool Common = false>
[[gnu::always_inline]] inline bool reclaim(const Area<Pow2>& m, std::uint64_t& head, std::uint64_t t,
                                           std::uint64_t new_tail, std::uint8_t& held) noexcept {
  // The batch fits once head + size >= new_tail.
  if (head + m.size >= new_tail) return true;  // no hint: a ring in use is full
  const std::uint64_t want = new_tail - m.size;
  do {
    const std::uint64_t o = m.off(head);
    // H1: RC[head].load(acquire); pairs with W4/T6 (the batch is copied) and with a
    // reader's R4/U3 decrement (its copy is done): only then may the bytes be reused.
    const std::uint8_t rc = std::atomic_ref<std::uint8_t>(m.base[o]).load(std::memory_order_acquire);
    // Never past t-1 (the RC byte the batch starts at): 0 if the message would cross it.
    // Common checks that once, after the loop: want <= t-1 (a batch is smaller than the
    // area), so a step past t-1 (damaged framing) is the loop's last.
    const std::uint64_t span = rc != 0 ? 0 : Common ? common_span_at(m, o) : message_span(m, head, t - 1);
    if (span == 0) [[unlikely]] {  // held, or damaged (Common: uncommon) framing: do not guess
      held = rc;
      return false;
    }
    head += span;
  } while (head < want);
  return !Common || head <= t - 1;  // else damaged framing: held stays 0
}

// N bytes from s to d as one vector load and store (two for 32 bytes without AVX).
template <std::size_t N>
[[gnu::always_inline]] inline void move_bytes(std::uint8_t* d, const std::uint8_t* s) noexcept {
  typedef char V [[gnu::vector_size(N), gnu::aligned(1), gnu::may_alias]];
  *reinterpret_cast<V*>(d) = *reinterpret_cast<const V*>(s);
}

// Copies the first `left` bytes of the parts to d, where the area does not wrap: one
// call per message instead of a memcpy per part (which made the write path keep its
// values across two calls), in moves of 32 bytes (AVX2 where the processor has it)
// that overlap at the end of each part rather than stepping down. Parts are short
// (HAProxy's mix: 82 and 0..270 bytes).
#ifndef RINGLOG_TSAN  // (under ThreadSanitizer a batch's copies go through Area::copy_in)
// (A function with clones is called through its resolver, never inlined; clang refuses
// noinline beside target_clones.)
#if defined(__x86_64__)
#define RINGLOG_COPY_CLONES gnu::target_clones("avx2", "default")
#else
#define RINGLOG_COPY_CLONES gnu::noinline
#endif
[[gnu::always_inline]] inline void copy_parts_body(std::uint8_t* d, const iovec* p, std::uint64_t left) noexcept {
  for (; left; ++p) {  // the parts hold at least `left` bytes (fewer are copied if truncated)
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(p->iov_len, left));
    const auto* s = static_cast<const std::uint8_t*>(p->iov_base);
    std::uint8_t* const d_end = d + n;
    const std::uint8_t* const s_end = s + n;
    left -= n;
    if (n > 64) {
      for (; n > 128; n -= 64, d += 64, s += 64) {
        move_bytes<32>(d, s);
        move_bytes<32>(d + 32, s + 32);
      }
      move_bytes<32>(d, s);  // 64 < n <= 128: two from the start, two to the end
      move_bytes<32>(d + 32, s + 32);
      move_bytes<32>(d_end - 64, s_end - 64);
      move_bytes<32>(d_end - 32, s_end - 32);
    } else if (n > 32) {
      move_bytes<32>(d, s);
      move_bytes<32>(d_end - 32, s_end - 32);
    } else if (n >= 16) {
      move_bytes<16>(d, s);
      move_bytes<16>(d_end - 16, s_end - 16);
    } else if (n >= 8) {
      move_bytes<8>(d, s);
      move_bytes<8>(d_end - 8, s_end - 8);
    } else if (n >= 4) {
      move_bytes<4>(d, s);
      move_bytes<4>(d_end - 4, s_end - 4);
    } else if (n) {
      d[0] = s[0];
      d[n / 2] = s[n / 2];
      d[n - 1] = s[n - 1];
    }
    d = d_end;
  }
}
[[RINGLOG_COPY_CLONES]] void copy_parts(std::uint8_t* d, const iovec* p, std::uint64_t left) noexcept {
  copy_parts_body(d, p, left);
}
#else
// Under ThreadSanitizer the lone write's copy stores bytes as relaxed atomics, as
// Area::copy_in (its message never wraps).
inline void copy_parts_body(std::uint8_t* d, const iovec* p, std::uint64_t left) noexcept {
  for (; left; ++p) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(p->iov_len, left));
    const auto* s = static_cast<const std::uint8_t*>(p->iov_base);
    detail::store_relaxed(d, s, n);
    d += n;
    left -= n;
  }
}
#define RINGLOG_COPY_CLONES gnu::noinline
#endif

// The end of a lone write (write_lone), after W3: its framing and payload into the
// area at d (just after its RC byte; the message does not wrap), W4 exposes it and W11
// clears the in-flight record. One call that ends the write: the write path jumps to
// it, so that it keeps no value alive across a call and needs no frame. word:
// len << kKindBits | kind. It needs nothing of the mapping: one function for both kinds
// of area (a function with clones cannot be a template).
[[RINGLOG_COPY_CLONES]] WriteStatus finish_lone(std::uint8_t* d, WriterSlot* ws, const iovec* parts,
                                                std::uint64_t word) noexcept {
  const std::uint64_t len = word >> kKindBits;
  std::uint8_t* const rc = d - 1;
  std::size_t vl;
  const std::uint64_t v = pack_framing(word, vl);
#ifndef RINGLOG_TSAN
  if (len + vl >= sizeof v) [[likely]] {  // the varint in one store: what follows it is this payload
    std::memcpy(d, &v, sizeof v);
  } else {  // a payload of a few bytes: a varint of one or two
    d[0] = static_cast<std::uint8_t>(v);
    if (vl > 1) d[1] = static_cast<std::uint8_t>(v >> 8);
  }
#else
  detail::store_relaxed(d, reinterpret_cast<const std::uint8_t*>(&v), vl);  // as Area::copy_in
#endif
  RINGLOG_HOOK("mid_copy");  // framing written, payload not yet
  copy_parts_body(d + vl, parts, len);
  RINGLOG_HOOK("copied");
  // W4: RC[t-1] = saved (release) exposes the message; pairs with R2 (and H1): a reader
  // that sees a value other than 0xFF sees all of it.
  std::atomic_ref<std::uint8_t>(*rc).store(static_cast<std::uint8_t>(ws->saved_rc.load(std::memory_order_relaxed)),
                                           std::memory_order_release);
  RINGLOG_HOOK("exposed");
  // W11: in-flight record cleared (relaxed), as in commit.
  ws->inflight_pos.store(0, std::memory_order_relaxed);
  return WriteStatus::ok;
}

// Copies one message whose RC byte is at pos; returns the position of the next RC.
template <bool Pow2>
[[gnu::always_inline]] inline std::uint64_t copy_message(const Area<Pow2>& m, std::uint64_t pos, const Msg& c) noexcept {
#ifndef RINGLOG_TSAN
  // Common case: the whole message lies before the end of the area.
  std::uint64_t o = m.off(pos + 1);
  if (o + (c.needed - 1) <= m.size) [[likely]] {
    std::uint8_t* d = m.base + o;
    // The varint in one store when the message has 8 bytes for it: what lies past the
    // varint is this message's payload, written next.
    if (c.needed - 1 >= sizeof c.varint) [[likely]]
      std::memcpy(d, &c.varint, sizeof c.varint);
    else
      std::memcpy(d, &c.varint, c.varint_len());
    d += c.varint_len();
    RINGLOG_HOOK("mid_copy");
    copy_parts(d, c.parts, c.len);
    return pos + c.needed;
  }
#endif
  std::size_t vl = c.varint_len();
  const std::uint64_t varint = c.varint;  // a copy: no pointer into c is taken (two instructions fewer)
  m.copy_in(pos + 1, &varint, vl);
  RINGLOG_HOOK("mid_copy");  // framing written, payload not yet
  std::uint64_t p = pos + 1 + vl, left = c.len;
  for (std::size_t i = 0; i < c.nparts && left; ++i) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(c.parts[i].iov_len, left));
    m.copy_in(p, c.parts[i].iov_base, n);
    p += n;
    left -= n;
  }
  return p;
}

inline Cell* wait_next(const Cell* c) noexcept {
  Backoff b;
  while (!c->linked.load(std::memory_order_acquire)) b.pause();  // Q9: pairs with Q3
  return c->next.load(std::memory_order_relaxed);
}

// The in-band drop notice: its text in note, its length returned. Out of line: rare.
[[gnu::noinline, gnu::cold]] std::uint64_t drop_note(const Header& h, char (&note)[96]) noexcept {
  int n = std::snprintf(note, sizeof note, "ringlog: %" PRIu64 " messages (%" PRIu64 " bytes) dropped",
                        h.pending_drop_msgs.load(std::memory_order_relaxed),
                        h.pending_drop_bytes.load(std::memory_order_relaxed));
  return static_cast<std::uint64_t>(n);
}

}  // namespace

// A batch to write under one tail acquisition: the holder's own message (when it is
// not a queued cell) first, then a chain of queued cells, newest first. Every cell of
// the chain but `self` (the holder's own cell, if it queued) belongs to a carried
// writer that waits for its result.
struct Batch {
  const Msg* own = nullptr;
  Cell* chain = nullptr;
  const Cell* self = nullptr;
  Cell* extra = nullptr;  // the queue as the holder took it late in its commit (Q12)
};

// Counts messages dropped, in the totals and in the notice still to be written. Under
// the tail lock: the pending counts are written by lock holders only.
// Returns the ring's count of dropped messages before this drop.
inline std::uint64_t count_dropped(Header& h, std::uint64_t msgs, std::uint64_t bytes) noexcept {
  std::uint64_t before = h.msgs_dropped.fetch_add(msgs, std::memory_order_relaxed);
  h.bytes_dropped.fetch_add(bytes, std::memory_order_relaxed);
  h.pending_drop_msgs.store(h.pending_drop_msgs.load(std::memory_order_relaxed) + msgs, std::memory_order_relaxed);
  h.pending_drop_bytes.store(h.pending_drop_bytes.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  return before;
}

// Releases every carried cell of a chain with `result`.
inline void release_chain(Cell* chain, const Cell* self, std::uint32_t result) noexcept {
  for (Cell* c = chain; c;) {
    Cell* nx = wait_next(c);
    if (c != self) release_carried(c->state, result);
    c = nx;
  }
}

// The running total of a chain's newest cell; its writer publishes it right after its
// Q1 (a few instructions), so the wait is short.
inline std::uint64_t chain_total(const Cell* c, std::uint64_t& count) noexcept {
  Backoff b;
  std::uint64_t tot;
  // Q8: needed_tot (acquire); pairs with Q5: the cell and all older ones are complete.
  while ((tot = c->needed_tot.load(std::memory_order_acquire)) == kNotReady) b.pause();
  count = c->count_tot.load(std::memory_order_relaxed);
  return tot;
}

// With the tail lock held at unlocked value t: writes the batch (the holder's own
// message and the chain of cells it carries), or drops it. Releases the tail lock.
// (The lone message's plain case has its own path, write_lone.)
template <bool Pow2>
[[gnu::always_inline]] static inline std::uint32_t commit(Ring::Impl& r, Ring::Impl::Queue& q, int slot,
                                                          std::uint64_t t, Batch& batch) noexcept {
  const Area<Pow2> m(r.m);
  Header* h = r.m.hdr;
  std::uint64_t count;
  std::uint64_t needed = batch.chain ? chain_total(batch.chain, count) : (count = 0, 0);
  if (batch.own) {
    needed += batch.own->needed;
    ++count;
  }
  RINGLOG_HOOK("locked");

  // Announce earlier drops in-band, if there is room for it too.
  char note[96];
  std::uint64_t note_need = 0, note_len = 0;
  if (h->pending_drop_msgs.load(std::memory_order_relaxed)) [[unlikely]] {
    note_len = drop_note(*h, note);
    note_need = 1 + varint_size((note_len << kKindBits) | std::uint64_t(MsgKind::notice)) + note_len;
  }
  // Room first, before hiding anything: unlike HAProxy, a batch that will be dropped
  // never touches the RC byte at tail-1. Otherwise, with the ring full behind a pinned
  // reader, back-to-back dropping writers keep that byte at 0xFF and the reader can
  // never step onto it: a livelock (seen in the kill test). Reclaim needs no 0xFF to
  // stop at tail-1: it stops at any RC != 0 and never steps past tail-1.
  // H2: head (relaxed): only lock holders store it (W2), and L1 ordered us after them.
  std::uint64_t old_head = h->head.load(std::memory_order_relaxed);
  std::uint64_t head = old_head;
  std::uint8_t held = 0;
  bool fits = reclaim(m, head, t, t + needed + note_need, held);
  if (!fits && note_need) [[unlikely]] {
    note_need = 0;
    head = old_head;
    fits = reclaim(m, head, t, t + needed, held);
  }

  RINGLOG_HOOK("reclaimed");
  if (!fits) [[unlikely]] {
    // A writer still copying there will soon be done: let it run, then try again
    // (bounded: a dead or stopped writer is not waited for). Never a reader.
    if (held == kRcWriting && r.wait_for_writer(head)) {
      r.unlock_tail(t);
      sched_yield();
      return kRetry;
    }
    // Drop the whole batch; the tail (and its RC byte) stay as they were.
    std::uint64_t dropped = count_dropped(*h, count, needed);
    if (held) r.check_dead_periodic(dropped, dropped + count);  // a dead reader or writer may be in the way
    r.unlock_tail(t);
    release_chain(batch.chain, batch.self, kDropped);
    return kDropped;
  }

  // Writers that queued while we held the lock: carry them too, as late as possible
  // so that the batch holds everyone who arrived during this commit.
  if (q.head.load(std::memory_order_relaxed) != nullptr) [[unlikely]] {
    // Q12: queue head exchange -> empty (acq_rel); pairs with Q1 of the cells taken:
    // their messages are visible. Their writers see the head move (Q6) and wait.
    batch.extra = static_cast<Cell*>(q.head.exchange(nullptr, std::memory_order_acq_rel));
    if (batch.extra) {
      std::uint64_t n, more = chain_total(batch.extra, n);
      std::uint64_t before = head;
      std::uint8_t held2 = 0;
      if (reclaim(m, head, t, t + needed + more + note_need, held2)) {
        needed += more;
        count += n;
      } else {  // no room for them: dropped, as they would have been on their own
        head = before;
        count_dropped(*h, n, more);
        release_chain(batch.extra, nullptr, kDropped);
        batch.extra = nullptr;
      }
    }
  }

  // With no pinned reader attached (read under the tail lock, which attaching also
  // takes), nobody else modifies RC bytes: a plain load and store suffice for W1, and
  // no reader can be asleep on the futex. Nor can any reader sit at tail-1, so the
  // saved count (0) is not recorded for a recovery: owner_saved_rc stays "unknown"
  // (kRcUnknown, as every unlock leaves it) and a recovery recounts the live pinned
  // readers there, of which there are none.
  // W6: pinned.load(acquire); pairs with R12/U4 (release decrements after the RC
  // bytes were left) and, through L1, with R9 (increment under the lock).
  const bool pinned = h->pinned.load(std::memory_order_acquire) != 0;
  std::uint8_t saved;
  if (pinned) {
    // W1: RC[t-1] exchange 0xFF (acq_rel): hides the batch; serialised with the
    // readers' R3 CAS on that byte, so `saved` holds every reader that got there first.
    saved = m.rc(t - 1).exchange(kRcWriting, std::memory_order_acq_rel);
  } else {
    saved = m.rc(t - 1).load(std::memory_order_relaxed);
    m.rc(t - 1).store(kRcWriting, std::memory_order_relaxed);  // W1: unpinned, ordered before W3
  }
  const bool saved_noted = pinned || saved != 0;
  if (saved_noted) h->owner_saved_rc.store(saved, std::memory_order_relaxed);  // W7: for D6
  RINGLOG_HOOK("tagged");
  std::uint64_t new_tail = t + needed + note_need;
  if (head != old_head) {
    // W2: head.store, then fence(release) before any reclaimed byte is rewritten;
    // pairs with P2: a passive reader that read one of those bytes sees this head.
    h->head.store(head, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // W2
    RINGLOG_HOOK("head_moved");
  }
  m.rc(new_tail - 1).store(0, std::memory_order_relaxed);  // W8: trailing RC, published by W3
  WriterSlot* const ws = slot >= 0 ? &h->writers[slot] : nullptr;
  if (ws) {
    // W9: the in-flight record (relaxed), published by W3 to the lock holder that may
    // discard the batch if we die (T2, T3).
    ws->saved_rc.store(saved, std::memory_order_relaxed);
    ws->inflight_end.store(new_tail, std::memory_order_relaxed);
    ws->inflight_pos.store(t, std::memory_order_relaxed);  // RC position + 1
    ws->batches.store(ws->batches.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  if (note_need) [[unlikely]] {
    h->pending_drop_msgs.store(0, std::memory_order_relaxed);
    h->pending_drop_bytes.store(0, std::memory_order_relaxed);
  }
  // Only lock holders write these: plain stores, no locked instruction.
  h->msgs_written.store(h->msgs_written.load(std::memory_order_relaxed) + count + (note_need ? 1 : 0),
                        std::memory_order_relaxed);
  h->bytes_written.store(h->bytes_written.load(std::memory_order_relaxed) + needed + note_need,
                         std::memory_order_relaxed);
  const std::uint64_t batches = h->batches.load(std::memory_order_relaxed);
  h->batches.store(batches + 1, std::memory_order_relaxed);
  r.check_dead_periodic(batches, batches + 1);
  // Unlock (as unlock_tail, which also resets owner_saved_rc: only needed if we set it).
  h->owner.store(0, std::memory_order_relaxed);  // L3: as in unlock_tail
  if (saved_noted) h->owner_saved_rc.store(kRcUnknown, std::memory_order_relaxed);
  // W3: tail.store(new_tail, release) unlocks and publishes before the copy; pairs
  // with R1 and L1. The next writer may go on while we copy.
  h->tail.store(new_tail, std::memory_order_release);
  RINGLOG_HOOK("unlocked");

  // The drop notice goes first: readers learn of the gap before what follows it.
  std::uint64_t pos = t - 1;
  if (note_need) [[unlikely]] {
    iovec part{note, static_cast<std::size_t>(note_len)};
    const Msg nm = make_msg(&part, 1, note_len, MsgKind::notice);
    pos = copy_message(m, pos, nm);
  }
  if (batch.own) {
    if (pos != t - 1) m.rc(pos).store(0, std::memory_order_relaxed);  // W10: as below
    pos = copy_message(m, pos, *batch.own);
  }
  for (Cell* chain : {batch.chain, batch.extra})
    for (Cell* c = chain; c;) {
      // W10: inner RC = 0 (relaxed): behind the 0xFF, published by W4.
      if (pos != t - 1) m.rc(pos).store(0, std::memory_order_relaxed);
      pos = copy_message(m, pos, *c);
      Cell* nx = wait_next(c);
      if (c != batch.self) release_carried(c->state, kDone);
      c = nx;
    }
  RINGLOG_HOOK("copied");
  // W4: RC[t-1] = saved (release) exposes the batch; pairs with R2 (and H1): a reader
  // that sees a value other than 0xFF sees every byte of the batch.
  m.rc(t - 1).store(saved, std::memory_order_release);
  RINGLOG_HOOK("exposed");
  m.prefetch_ahead(t - 1, new_tail);
  // W11: in-flight record cleared (relaxed); a later T2 that still sees it finds RC[x]
  // restored (T4) and discards nothing.
  if (ws) ws->inflight_pos.store(0, std::memory_order_relaxed);

  if (pinned) {
    // W5: fence(seq_cst) then waiters (relaxed); pairs with K1 (Dekker): either we see
    // the sleeper's increment, or its last look (R1/R2) sees our batch.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (h->waiters.load(std::memory_order_relaxed)) r.wake_readers();
  }
  return kDone;
}

// With the tail lock held at unlocked value t: commits the batch, taking the lock again
// as long as commit() released it to let a writer still copying run (kRetry).
[[gnu::noinline]] static std::uint32_t commit_again(Ring::Impl& r, Ring::Impl::Queue& q, int slot,
                                                    Batch& batch) noexcept {
  r.m.hdr->writer_waits.fetch_add(1, std::memory_order_relaxed);
  std::uint32_t res;
  do {
    std::uint64_t t = r.lock_tail(slot);
    res = r.m.mask ? commit<true>(r, q, slot, t, batch) : commit<false>(r, q, slot, t, batch);
  } while (res == kRetry);
  return res;
}

// A lone message that is not write_lone's plain case (writers queued during its commit,
// whom it carries, a drop notice, no room, a pinned reader, ...): the lock is still
// held at t, nothing written. word: the framing word, len << kKindBits | kind; the
// parts hold at least len bytes (their count is not needed: the copies stop there).
// The writer's context is t_ctx (the lone path's callers made it current).
[[gnu::noinline, gnu::cold]] static WriteStatus lone_as_batch(Ring::Impl& r, std::uint64_t t, const iovec* parts,
                                                              std::uint64_t word) noexcept {
  const WriterCtx& ctx = t_ctx;
  const Msg own = make_msg(parts, SIZE_MAX, word >> kKindBits, MsgKind(word & kKindMask));
  Batch batch{&own};
  std::uint32_t res = r.m.mask ? commit<true>(r, *ctx.queue, ctx.slot, t, batch)
                               : commit<false>(r, *ctx.queue, ctx.slot, t, batch);
  if (res == kRetry) res = commit_again(r, *ctx.queue, ctx.slot, batch);
  return res == kDone ? WriteStatus::ok : WriteStatus::dropped;
}

// The lone message's commit in its plain case, all of it: the tail is locked at t
// (L1, L2) by a writer that found nobody queued, and nothing needs the general commit:
// no drop notice due, room without a reader or writer in the way, nobody queued
// meanwhile, no pinned reader, a writer slot, no wrap, no periodic dead-process check
// due. Anything else goes to the general commit with the lock still held and nothing
// written (lone_as_batch). The steps are commit's, in its order, for one message;
// written apart so that its values fit the registers a call may clobber: it makes no
// call but its last, a jump to the copy (finish_lone), and needs no frame.
// The writer's context is t_ctx, current (its fields are read where needed: one
// instruction each, thread-local at a fixed offset).
template <bool Pow2>
[[gnu::always_inline]] inline WriteStatus write_lone(Ring::Impl& r, std::uint64_t t, const iovec* parts,
                                                     std::uint64_t len, MsgKind kind) noexcept {
  const Area<Pow2> m(r.m);
  Header* h = r.m.hdr;
  RINGLOG_HOOK("locked");
  const std::uint64_t word = (len << kKindBits) | std::uint64_t(kind);
  const std::uint64_t vl = word < 240 ? 1 : word < 240 + (128 << 4) ? 2 : varint_size(word);
  const std::uint64_t needed = 1 + vl + len, new_tail = t + needed;
  // No wrap: [t-1, new_tail) lies before the end of the area (which also keeps the RC
  // byte off the area's last one).
  const std::uint64_t rc_off = m.off(t - 1);
  // W6: pinned.load(acquire), as in commit; pinned readers take the general commit.
  if (h->pinned.load(std::memory_order_acquire) != 0 || h->pending_drop_msgs.load(std::memory_order_relaxed) ||
      rc_off + needed > m.size || !t_ctx.ws) [[unlikely]]
    goto as_batch;
  {  // (one exit to the general commit, below: fewer register shuffles on the way)
  // The lines ahead are asked for as soon as the position is ours. Measured (bench_ring,
  // one writer alone, medians of 25-30 adjacent pairs of runs): asked for after W4 (as
  // commit does) 0.92x, before reclaim 1.02-1.04x the rate of asking before the copy.
  m.prefetch_ahead(t - 1, new_tail);
  // H2: head (relaxed), as in commit.
  std::uint64_t head = h->head.load(std::memory_order_relaxed);
  std::uint8_t held = 0;
  if (!reclaim<Pow2, true>(m, head, t, new_tail, held)) [[unlikely]]  // held, or uncommon framing
    goto as_batch;
  RINGLOG_HOOK("reclaimed");
  const std::uint64_t batches = h->batches.load(std::memory_order_relaxed);
  // Writers queued meanwhile (commit carries them: Q12), or commit's check_dead_periodic
  // (batches, batches + 1) due.
  if (t_ctx.queue->head.load(std::memory_order_relaxed) != nullptr || ((batches + 1) & 255) == 0) [[unlikely]]
    goto as_batch;

  std::uint8_t* const rcp = m.base + rc_off;
  const std::uint8_t saved = std::atomic_ref<std::uint8_t>(*rcp).load(std::memory_order_relaxed);
  std::atomic_ref<std::uint8_t>(*rcp).store(kRcWriting, std::memory_order_relaxed);  // W1: unpinned, before W3
  if (saved) [[unlikely]] h->owner_saved_rc.store(saved, std::memory_order_relaxed);  // W7: for D6
  RINGLOG_HOOK("tagged");
  if (head != h->head.load(std::memory_order_relaxed)) {  // (only lock holders store it)
    // W2: head.store, then fence(release) before any reclaimed byte is rewritten; as in commit.
    h->head.store(head, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // W2
    RINGLOG_HOOK("head_moved");
  }
  m.rc(new_tail - 1).store(0, std::memory_order_relaxed);  // W8: trailing RC, published by W3
  WriterSlot* const ws = t_ctx.ws;
  // W9: the in-flight record (relaxed), published by W3; as in commit.
  ws->saved_rc.store(saved, std::memory_order_relaxed);
  ws->inflight_end.store(new_tail, std::memory_order_relaxed);
  ws->inflight_pos.store(t, std::memory_order_relaxed);  // RC position + 1
  ws->batches.store(ws->batches.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  h->msgs_written.store(h->msgs_written.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  h->bytes_written.store(h->bytes_written.load(std::memory_order_relaxed) + needed, std::memory_order_relaxed);
  h->batches.store(batches + 1, std::memory_order_relaxed);
  h->owner.store(0, std::memory_order_relaxed);  // L3: as in unlock_tail
  if (saved) [[unlikely]] h->owner_saved_rc.store(kRcUnknown, std::memory_order_relaxed);
  // W3: tail.store(new_tail, release) unlocks and publishes before the copy; as in commit.
  h->tail.store(new_tail, std::memory_order_release);
  RINGLOG_HOOK("unlocked");
  return finish_lone(rcp + 1, ws, parts, word);
  }
as_batch:
  return lone_as_batch(r, t, parts, word);
}

namespace {

// The tail was locked or someone was queued: queue up (HAProxy's algorithm). The
// newest arrival leads and carries all older cells. Out of line, so that the fast
// path's frame stays small.
[[gnu::noinline]] WriteStatus write_queued(Ring::Impl& r, const WriterCtx& ctx, const iovec* parts,
                                            std::size_t nparts, std::uint64_t len, MsgKind kind) noexcept {
  Header* h = r.m.hdr;
  const Msg msg = make_msg(parts, nparts, len, kind);
  auto& queue = ctx.queue->head;
  // First a brief spin on the tail lock while nobody waits in our queue: with few
  // writers the holder releases it within a few hundred cycles (it copies after
  // unlocking), sooner than the queue's exchanges and hand-over would take. Bounded, so
  // that with more threads than cores (a preempted holder) writers soon queue up and
  // get carried instead.
  bool waited = false;  // counted once per write in lock_waits
  for (unsigned i = 0; i < kLockTries; ++i) {
    if (i) pause_n(kFirstPauses << (i - 1));
    std::uint64_t t = h->tail.load(std::memory_order_relaxed);
    if (!(t & kTailLock)) {
      if (h->tail.compare_exchange_weak(t, t | kTailLock, std::memory_order_acquire, std::memory_order_relaxed)) {  // L1
        h->owner.store(ctx.owner, std::memory_order_relaxed);  // L2
        return r.m.mask ? write_lone<true>(r, t, parts, len, kind)
                        : write_lone<false>(r, t, parts, len, kind);
      }
    } else if (!waited) {
      waited = true;
      h->lock_waits.fetch_add(1, std::memory_order_relaxed);
    }
  }
  Cell cell(msg);
  // Q1: queue head exchange (acq_rel): we are the newest; prev (older) is ours to carry
  // if we lead. Release: our cell's message is visible to whoever takes it from here.
  Cell* prev = static_cast<Cell*>(queue.exchange(&cell, std::memory_order_acq_rel));
  cell.next.store(prev, std::memory_order_relaxed);
  cell.linked.store(true, std::memory_order_release);  // Q3: next is valid; pairs with Q9
  std::uint64_t tot = cell.needed, cnt = 1;
  if (prev) {
    Backoff b;
    std::uint64_t pt;
    // Q4: the older cell's running total (acquire); pairs with its Q5.
    while ((pt = prev->needed_tot.load(std::memory_order_acquire)) == kNotReady) b.pause();
    tot += pt;
    cnt += prev->count_tot.load(std::memory_order_relaxed);
  }
  cell.count_tot.store(cnt, std::memory_order_relaxed);
  cell.needed_tot.store(tot, std::memory_order_release);  // Q5: running total; pairs with Q4/Q8
  RINGLOG_HOOK("queued");

  std::uint64_t seen = 0, since = 0;
  unsigned sleeps = 0;
  for (;;) {
    // Q6: queue head (acquire) no longer us: a holder (its Q12) or a newer writer (its
    // Q1) carries us.
    if (queue.load(std::memory_order_acquire) != &cell) break;
    std::uint64_t t = h->tail.load(std::memory_order_relaxed);
    if (t & kTailLock) {
      // Sleep rather than spin: the holder carries us meanwhile (Q12), or we look again.
      if (!waited) {
        waited = true;
        h->lock_waits.fetch_add(1, std::memory_order_relaxed);
      }
      sleep_ns(kQueuedSleepNs << std::min(sleeps++, kSleepDoublings));
      std::uint64_t now = monotonic_ns();
      if (t != seen) {
        seen = t;
        since = now;
      } else if (now - since > kLockSuspectNs) {
        r.recover_dead_owner(t);
        since = now;
      }
      continue;
    }
    if (!h->tail.compare_exchange_weak(t, t | kTailLock, std::memory_order_acquire, std::memory_order_relaxed))
      continue;  // L1
    h->owner.store(ctx.owner, std::memory_order_relaxed);  // L2
    void* expect = &cell;
    // Q7: queue CAS us -> empty (acq_rel): we lead the chain; a later arrival starts a
    // new one. Fails if someone queued behind us: they lead, we are carried.
    if (!queue.compare_exchange_strong(expect, nullptr, std::memory_order_acq_rel, std::memory_order_relaxed)) {
      r.unlock_tail(t);  // someone queued behind us meanwhile: they lead now
      break;
    }
    Batch batch{nullptr, &cell, &cell};
    std::uint32_t res = r.m.mask ? commit<true>(r, *ctx.queue, ctx.slot, t, batch)
                                 : commit<false>(r, *ctx.queue, ctx.slot, t, batch);
    if (res == kRetry) res = commit_again(r, *ctx.queue, ctx.slot, batch);
    return res == kDone ? WriteStatus::ok : WriteStatus::dropped;
  }
  return wait_carried(cell.state) == kDone ? WriteStatus::ok : WriteStatus::dropped;
}

// A sized write (len below Impl::lone_limit) by a thread whose context is known: the
// uncontended fast path (nobody queued, the tail free: no queue traffic at all), else
// the queue.
// The thread's context is t_ctx, current.
[[gnu::always_inline]] inline WriteStatus write_sized(Ring::Impl& r, const iovec* parts, std::size_t nparts,
                                                      std::uint64_t len, MsgKind kind) noexcept {
  std::uint64_t t;
  if (t_ctx.queue->head.load(std::memory_order_relaxed) != nullptr || !r.try_lock_tail(t)) [[unlikely]]
    return write_queued(r, t_ctx, parts, nparts, len, kind);
  r.m.hdr->owner.store(t_ctx.owner, std::memory_order_relaxed);  // L2
  return r.m.mask ? write_lone<true>(r, t, parts, len, kind)
                  : write_lone<false>(r, t, parts, len, kind);
}

// What the fast path leaves out: a payload to truncate or refuse, or this thread's
// first write to the ring (its writer slot to find).
[[gnu::noinline, gnu::cold]] WriteStatus write_general(Ring::Impl& r, const iovec* parts, std::size_t nparts,
                                            std::uint64_t len, MsgKind kind) noexcept {
  Header* h = r.m.hdr;
  WriteStatus good = WriteStatus::ok;
  std::uint32_t maxlen = h->max_msg_len;
  if (maxlen && len > maxlen) {
    len = maxlen;
    good = WriteStatus::truncated;
    h->msgs_truncated.fetch_add(1, std::memory_order_relaxed);
  }
  if (len > r.max_payload) {
    h->msgs_refused.fetch_add(1, std::memory_order_relaxed);
    return WriteStatus::too_big;
  }
  writer_ctx(r);  // makes t_ctx current
  const WriteStatus res = write_sized(r, parts, nparts, len, kind);
  return res == WriteStatus::ok ? good : res;
}

// The whole write: sizes, then write_sized, which ends with a jump (write_lone's to
// finish_lone, or to write_queued): nothing here needs a frame.
[[gnu::always_inline]] inline WriteStatus write_msg(Ring::Impl& r, const iovec* parts, std::size_t nparts,
                                                    MsgKind kind) noexcept {
  std::uint64_t len;
  if (nparts == 2) [[likely]] {  // a prefix and a text, the common shape: no loop
    len = parts[0].iov_len + parts[1].iov_len;
  } else {
    len = 0;
    for (std::size_t i = 0; i < nparts; ++i) len += parts[i].iov_len;
  }
  // lone_limit: longer payloads are truncated or refused (write_general).
  if (len >= r.lone_limit || t_ctx.id != r.id) [[unlikely]] return write_general(r, parts, nparts, len, kind);
  return write_sized(r, parts, nparts, len, kind);
}

}  // namespace

WriteStatus Ring::writev(std::span<const iovec> parts, MsgKind kind) noexcept {
  return write_msg(*impl_, parts.data(), parts.size(), kind);
}

WriteStatus Ring::writev(std::span<const iovec> parts) noexcept {
  return write_msg(*impl_, parts.data(), parts.size(), MsgKind::data);
}

WriteStatus Ring::write(std::string_view payload) noexcept {
  iovec v{const_cast<char*>(payload.data()), payload.size()};
  return write_msg(*impl_, &v, 1, MsgKind::data);
}

WriteStatus Ring::write(std::span<const std::byte> payload) noexcept {
  iovec v{const_cast<std::byte*>(payload.data()), payload.size()};
  return write_msg(*impl_, &v, 1, MsgKind::data);
}

// ---------------------------------------------------------------- create / open

Ring::Ring(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Ring::Ring(Ring&&) noexcept = default;
Ring& Ring::operator=(Ring&&) noexcept = default;
Ring::~Ring() = default;

namespace {

void check_open_options(const OpenOptions& opts) {
  if (opts.queues == 0 || opts.queues > 1024) throw Error(Errc::invalid_arg, "queue count must be 1..1024");
  if (opts.writer_wait.count() < 0) throw Error(Errc::invalid_arg, "writer wait must not be negative");
  if (opts.reader_wait.count() < 0) throw Error(Errc::invalid_arg, "reader wait must not be negative");
}

std::shared_ptr<Ring::Impl> make_impl(const OpenOptions& opts) {
  check_open_options(opts);
  auto impl = std::make_shared<Ring::Impl>();
  impl->nqueues = opts.queues;
  impl->writer_wait_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(opts.writer_wait).count());
  impl->reader_wait_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(opts.reader_wait).count());
  impl->queues = std::make_unique<Ring::Impl::Queue[]>(opts.queues);
  impl->id = g_next_impl_id.fetch_add(1, std::memory_order_relaxed);
  return impl;
}

void finish_impl(Ring::Impl& impl) {
  // The largest payload: RC + varint + payload + trailing RC must fit in the area.
  std::uint64_t size = impl.m.size;
  std::uint64_t p = size - 2 - varint_size(size << kKindBits);
  while (p && 1 + varint_size(p << kKindBits) + p + 1 > size) --p;
  // And a varint of at most 8 bytes (Msg::varint): below 2^51, more than any area.
  impl.max_payload = std::min<std::uint64_t>(p, (std::uint64_t{1} << 51) - 1);
  const std::uint32_t maxlen = impl.m.hdr->max_msg_len;  // set by the creator, once
  impl.lone_limit = std::min<std::uint64_t>(maxlen ? maxlen : impl.max_payload, impl.max_payload) + 1;
}

void make_dirs(const std::string& path) {
  for (std::size_t i = 1; i < path.size(); ++i)
    if (path[i] == '/') {
      std::string d = path.substr(0, i);
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
        throw Error(Errc::io, "cannot create directory " + d + ": " + std::strerror(errno));
    }
}

}  // namespace

Ring Ring::create(const std::string& path, const CreateOptions& opts, const OpenOptions& open_opts) {
  check_open_options(open_opts);
  if (opts.area_size < kMinAreaSize || opts.area_size > kMaxAreaSize)
    throw Error(Errc::invalid_arg, "ring " + path + ": area size " + std::to_string(opts.area_size) +
                                       " out of range [" + std::to_string(kMinAreaSize) + ", " +
                                       std::to_string(kMaxAreaSize) + "]");
  if (opts.max_msg_len > opts.area_size / 2)
    throw Error(Errc::invalid_arg, "ring " + path + ": max message length larger than half the area");
  make_dirs(path);
  std::random_device rd;
  std::uint64_t id = (std::uint64_t(rd()) << 32) ^ rd() ^ realtime_ns();
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%u.%016" PRIx64, self_pid(), id);
  std::string tmp = path + suffix;
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, opts.mode & 07777);
  if (fd < 0) {
    int e = errno;
    throw Error(e == EACCES ? Errc::permission : Errc::io, "ring " + path + ": cannot create: " + std::strerror(e));
  }
  detail::give_to_ring_group(fd);
  ::fchmod(fd, opts.mode & 07777);  // not subject to the umask; after the chown, which may clear setgid
  std::uint64_t total = kHeaderLen + opts.area_size;
  if (int e = detail::size_file(fd, total)) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(Errc::io, "ring " + path + ": cannot allocate " + std::to_string(total) + " bytes: " + std::strerror(e));
  }
  ::close(fd);
  try {
    namespace bip = boost::interprocess;
    bip::file_mapping fm(tmp.c_str(), bip::read_write);
    bip::mapped_region rg(fm, bip::read_write, 0, static_cast<std::size_t>(total));
    auto* h = static_cast<Header*>(rg.get_address());  // zero-filled by size_file
    h->magic = kMagic;
    h->version = kVersion;
    h->byte_order = kByteOrderMark;
    h->word_size = sizeof(void*);
    h->pos_size = 8;
    h->writer_slots = kWriterSlots;
    h->reader_slots = kReaderSlots;
    h->header_len = kHeaderLen;
    h->area_size = opts.area_size;
    h->created_ns = realtime_ns();
    h->creator_pid = self_pid();
    h->max_msg_len = opts.max_msg_len;
    h->instance_id = id;
    h->owner_saved_rc.store(kRcUnknown, std::memory_order_relaxed);
    // Empty ring: one RC byte at position 0, head = 0, tail = 1.
    h->head.store(0, std::memory_order_relaxed);
    h->tail.store(1, std::memory_order_relaxed);
    rg.flush();
  } catch (const boost::interprocess::interprocess_exception& ex) {
    ::unlink(tmp.c_str());
    throw Error(Errc::io, "ring " + path + ": cannot map new file: " + ex.what());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw Error(Errc::io, "ring " + path + ": cannot rename into place: " + std::strerror(e));
  }
  return open(path, open_opts);
}

Ring Ring::open(const std::string& path, const OpenOptions& opts) {
  auto impl = make_impl(opts);
  impl->m.map(path, true);
  // Best effort: a kernel without MADV_POPULATE_WRITE (or a failure) leaves the pages to
  // be faulted in by the writes, as without the option.
  if (opts.populate) (void)impl->m.populate();
  finish_impl(*impl);
  return Ring(std::move(impl));
}

Ring Ring::open_memory(std::span<std::byte> image, const OpenOptions& opts) {
  auto impl = make_impl(opts);
  impl->m.over(image, true);
  finish_impl(*impl);
  return Ring(std::move(impl));
}

std::uint64_t Ring::max_payload() const noexcept { return impl_->max_payload; }
std::uint32_t Ring::max_msg_len() const noexcept { return impl_->m.hdr->max_msg_len; }
std::uint64_t Ring::area_size() const noexcept { return impl_->m.size; }
std::uint64_t Ring::instance_id() const noexcept { return impl_->m.hdr->instance_id; }
const std::string& Ring::path() const noexcept { return impl_->m.path; }
std::uint8_t* Ring::control() noexcept { return impl_->m.hdr->control; }
format::Header& Ring::header() noexcept { return *impl_->m.hdr; }

RingStats read_stats(const Header& h) noexcept {
  RingStats s{};
  s.head = h.head.load(std::memory_order_relaxed);
  std::uint64_t t = h.tail.load(std::memory_order_relaxed);
  s.tail = t & kPosMask;
  s.locked = (t & kTailLock) != 0;
  s.area_size = h.area_size;
  s.msgs_written = h.msgs_written.load(std::memory_order_relaxed);
  s.bytes_written = h.bytes_written.load(std::memory_order_relaxed);
  s.batches = h.batches.load(std::memory_order_relaxed);
  s.msgs_dropped = h.msgs_dropped.load(std::memory_order_relaxed);
  s.bytes_dropped = h.bytes_dropped.load(std::memory_order_relaxed);
  s.msgs_truncated = h.msgs_truncated.load(std::memory_order_relaxed);
  s.msgs_refused = h.msgs_refused.load(std::memory_order_relaxed);
  s.lock_waits = h.lock_waits.load(std::memory_order_relaxed);
  s.lock_recoveries = h.lock_recoveries.load(std::memory_order_relaxed);
  s.torn_discarded = h.torn_discarded.load(std::memory_order_relaxed);
  s.readers_released = h.readers_released.load(std::memory_order_relaxed);
  s.writer_waits = h.writer_waits.load(std::memory_order_relaxed);
  for (auto& rs : h.readers)
    if (rs.pid.load(std::memory_order_relaxed)) ++s.pinned_readers;
  for (auto& ws : h.writers)
    if (ws.pid.load(std::memory_order_relaxed)) ++s.writer_threads;
  return s;
}

RingStats Ring::stats() const noexcept { return read_stats(*impl_->m.hdr); }

}  // namespace ringlog
