// Object storage for ringproxy: objects are lists of segments taken from a memory-capped
// Store with LRU eviction; readers lease extents of them into scatter arrays without
// ever blocking, and arm a one-shot notification when they have caught up with a
// fetch still in progress. Transient (pass) objects free segments behind their single
// reader, so their footprint stays under a window whatever the body size.
// Never blocks a caller on I/O; the only locks are short per-object/store mutexes.
#pragma once
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ringproxy/delivery/lease.hpp"

// Lease accounting (every lease handed out comes back exactly once, asserted when the
// reader is released): on in debug builds and wherever RINGPROXY_LEASE_ACCOUNTING is set.
#if !defined(NDEBUG) && !defined(RINGPROXY_LEASE_ACCOUNTING)
#define RINGPROXY_LEASE_ACCOUNTING 1
#endif

namespace ringproxy::delivery {

class Store;
class Object;
using ObjRef = std::shared_ptr<Object>;

// A one-shot notification. Armed under an object's lock, fired (under that lock) by the
// fetch side when something changes. fn must not block and must not touch the object.
struct Notify {
  void (*fn)(Notify*) noexcept = nullptr;
  bool armed = false;  // guarded by the lock of the object it is armed on
};

// Wakes an event loop from another thread: an eventfd the loop polls for reading.
class LoopWaker {
 public:
  LoopWaker();  // throws std::system_error
  ~LoopWaker();
  LoopWaker(const LoopWaker&) = delete;
  LoopWaker& operator=(const LoopWaker&) = delete;
  int fd() const noexcept { return fd_; }
  // Lock safe: one write(2); or, called on the loop's own thread (see below), only a
  // flag: the loop is awake already and looks at it before it waits again.
  void wake() noexcept;
  std::uint64_t drain() noexcept;  // the loop: read the counter (0 when not woken)
  // The loop's thread declares itself: wake-ups it causes itself (a send completing
  // frees room for its own fetch) then cost no system call and no epoll round.
  void bind_to_this_thread() noexcept;
  bool take_local() noexcept { return local_.exchange(false, std::memory_order_relaxed); }
  bool local_pending() const noexcept { return local_.load(std::memory_order_relaxed); }
 private:
  int fd_ = -1;
  std::atomic<bool> local_{false};  // owner thread only
};

// The notification a delivery arms: sets a sticky ready flag, then wakes its loop.
// The loop clears the flag (exchange) before leasing again, so a wake-up that lands
// between the lease call and the loop's next look is never lost.
struct ReadyNotify : Notify {
  explicit ReadyNotify(LoopWaker* w = nullptr) noexcept : waker(w) { fn = &fire; }
  std::atomic<bool> ready{false};
  LoopWaker* waker;
  bool take() noexcept { return ready.exchange(false, std::memory_order_acq_rel); }
  static void fire(Notify* n) noexcept {
    auto* r = static_cast<ReadyNotify*>(n);
    r->ready.store(true, std::memory_order_release);  // pairs with take()'s acquire
    if (r->waker) r->waker->wake();
  }
};

struct StoreConfig {
  std::size_t capacity = std::size_t(256) << 20;  // bytes of cached (non-transient) segments
  std::size_t segment_size = std::size_t(64) << 10;
  // Default window of a pass object. Its segments are a quarter of it (at least
  // segment_size), so a reader and the fetch each work on large spans.
  std::size_t transient_window = std::size_t(1) << 20;
};

// What the cache hangs on an object (headers, TTLs...). Storage never looks inside.
struct ObjectMeta {
  virtual ~ObjectMeta() = default;
};

struct Segment {
  std::uint8_t* data;
  std::size_t cap;
  std::size_t len;          // guarded by the object lock; bytes below it never change
  std::uint64_t seq;        // position in the object's segment list
  std::uint32_t leases = 0; // transient objects: extents of it lent out and not back
};

enum class ObjState : std::uint8_t { busy, done, failed };

class Object : public std::enable_shared_from_this<Object> {
 public:
  ~Object();
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  bool transient() const noexcept { return transient_; }
  Store& store() const noexcept { return *store_; }
  std::uint64_t id() const noexcept { return id_; }

  // ---- fetch side (one producer thread) ----
  // Copies up to n bytes in; fewer when a transient object's window is full (arm_space
  // then tells when to go on). Returns bytes taken, or -1 when storage is exhausted
  // (the object is then failed).
  ssize_t append(const void* p, std::size_t n) noexcept;
  // Zero-copy variant: writable room at the tail (empty: window full or no storage;
  // failed() tells which), then commit the bytes written there.
  std::span<std::uint8_t> write_space() noexcept;
  // Several spans for one vectored receive, at most max_bytes in all: write_space(), then
  // (transient objects) new segments while the window has room. Returns the number of
  // iovecs filled (0 as write_space() empty). commit() keeps what the bytes reached and
  // frees the segments they did not.
  std::size_t write_spans(iovec* out, std::size_t max, std::size_t max_bytes) noexcept;
  // n bytes were written at the write position (across segments when write_spans gave
  // several). Only the segment at the write position can be partly filled.
  void commit(std::size_t n) noexcept;
  // The body's expected length (Content-Length), before the first append: segments are
  // then sized to it instead of segment_size, so a 1 KiB object takes 1 KiB of storage.
  // Without a hint, segments start at 4 KiB and double up to segment_size.
  void set_size_hint(std::uint64_t n) noexcept { hint_ = n; }
  void finish() noexcept;  // all bytes are in
  void fail() noexcept;    // the fetch broke: readers get kLeaseError once caught up
  // Transient only: arms n to fire when a reader frees room; false (not armed) if there
  // is room now or the object is finished.
  bool arm_space(Notify* n) noexcept;
  std::size_t held_bytes() const noexcept { return held_.load(std::memory_order_relaxed); }
  std::size_t peak_held_bytes() const noexcept { return peak_held_.load(std::memory_order_relaxed); }

  // ---- shared ----
  ObjState state() const noexcept;
  bool failed() const noexcept { return state() == ObjState::failed; }
  std::uint64_t fetched() const noexcept;  // bytes in so far
  // Every state change (bytes, headers ready, finish, fail) bumps the version.
  std::uint64_t version() const noexcept;
  // Arms n unless the version moved past seen (then false: look again, nothing armed).
  bool arm(Notify* n, std::uint64_t seen) noexcept;
  void disarm(Notify* n) noexcept;
  // Fires the notifications after a change the caller made elsewhere (headers ready).
  void changed() noexcept;

  // The cache's data. Set before the object is shared, or under the cache's own lock.
  std::unique_ptr<ObjectMeta> meta;

 private:
  friend class Store;
  friend class ObjectReader;
  Object(Store* s, bool transient, std::size_t window, std::uint64_t id);
  void fire_locked() noexcept;
  void release_transient_locked(std::uint64_t reader_seq) noexcept;
  std::size_t cursor_locked() const noexcept;

  Store* store_;
  const bool transient_;
  const std::size_t window_;
  const std::size_t seg_size_;  // largest segment: segment_size, or window/4 if transient
  const std::uint64_t id_;
  mutable std::mutex mu_;
  std::deque<Segment*> segs_;   // segs_[i].seq == first_seq_ + i
  std::uint64_t first_seq_ = 0;
  std::uint64_t fetched_ = 0;
  std::uint64_t version_ = 0;
  ObjState state_ = ObjState::busy;
  std::uint64_t hint_ = 0;      // producer only
  std::vector<Notify*> waiters_;
  Notify* space_waiter_ = nullptr;
  std::atomic<std::size_t> held_{0};
  std::atomic<std::size_t> peak_held_{0};
  // LRU membership, guarded by the store's lock.
  bool in_lru_ = false;
  std::list<Object*>::iterator lru_it_;
};

// Lends out the bytes of one object, for one consumer (one thread at a time).
// Also the sink for every lease of the delivery it serves: segment leases, filter
// buffers (allocated through it) and kLeaseNoReturn.
class ObjectReader : public LeaseSink {
 public:
  // notify: armed when the reader catches up with a busy object (may be null: then
  // lease() returns kLeaseAgain without arming anything). max_leases: outstanding
  // extents before lease() says kLeaseReturnFirst.
  ObjectReader(ObjRef obj, Notify* notify, std::size_t max_leases = 1024);
  ~ObjectReader() override;  // asserts (accounting builds) that every lease came back
  ObjectReader(const ObjectReader&) = delete;
  ObjectReader& operator=(const ObjectReader&) = delete;

  // Adds extents from the read position to sa. Never blocks. See lease.hpp.
  int lease(ScatterArray& sa) noexcept;
  // Skips the first n bytes of the object (before the first lease only; range filter).
  void skip(std::uint64_t n) noexcept { skip_ = n; }
  void give_back(std::span<const Lease> leases) noexcept override;

  // Bytes made by filters, from storage: one lease shared by `refs` extents (each
  // extent gives it back once). Empty span if storage is exhausted.
  std::span<std::uint8_t> alloc_buffer(std::size_t n, std::uint32_t refs, Lease* lease) noexcept;

  // Bytes are in the object past the read position (a lease call would add extents).
  bool readable() const noexcept;
  std::size_t outstanding() const noexcept { return outstanding_; }
  std::uint64_t position() const noexcept { return pos_; }
  const ObjRef& object() const noexcept { return obj_; }

 private:
  ObjRef obj_;
  Notify* notify_;
  std::size_t max_leases_;
  std::size_t outstanding_ = 0;
  std::uint64_t pos_ = 0;      // bytes lent so far (absolute offset in the body)
  std::uint64_t skip_ = 0;
  std::uint64_t seq_ = 0;      // segment the read position is in
  std::size_t off_ = 0;        // offset in that segment
#ifdef RINGPROXY_LEASE_ACCOUNTING
  std::unordered_map<Lease, std::uint64_t> lent_;
  void account_out(Lease l, std::uint32_t n = 1);
  void account_in(Lease l);
#endif
};

// The store: segment memory with a cap and LRU eviction of cached objects.
class Store {
 public:
  explicit Store(StoreConfig cfg = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // window 0: the config's transient window. Cached objects take from the capped pool;
  // transient ones from an uncapped pool, bounded per object by their window.
  ObjRef new_object(bool transient, std::size_t window = 0);

  // LRU of cached objects: the cache inserts an object it indexes, touches it on hits
  // and removes it before dropping its reference. Evicted objects go to the nuke hook
  // (called without the store's lock held) whose job is to unindex them.
  void lru_insert(Object& o);
  void lru_touch(Object& o);
  void lru_remove(Object& o);
  void set_nuke_hook(std::function<void(ObjRef)> hook);

  const StoreConfig& config() const noexcept { return cfg_; }
  std::size_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  std::size_t transient_used() const noexcept { return transient_used_.load(std::memory_order_relaxed); }
  std::size_t buffer_used() const noexcept { return buffer_used_.load(std::memory_order_relaxed); }
  std::uint64_t n_lru_nuked() const noexcept { return nuked_.load(std::memory_order_relaxed); }
  std::uint64_t n_alloc_fail() const noexcept { return alloc_fail_.load(std::memory_order_relaxed); }
  std::size_t n_objects() const noexcept { return objects_.load(std::memory_order_relaxed); }

  // Filter buffers (see ObjectReader::alloc_buffer).
  std::uint8_t* buffer_alloc(std::size_t n, std::uint32_t refs, Lease* lease) noexcept;
  static void buffer_release(Lease l) noexcept;
  static bool is_buffer(Lease l) noexcept { return l != kLeaseNoReturn && (l & 1) != 0; }

 private:
  friend class Object;
  std::uint8_t* seg_alloc(std::size_t n, bool transient, const Object* self) noexcept;
  void seg_free(std::uint8_t* p, std::size_t n, bool transient) noexcept;
  bool make_room(std::size_t n, const Object* self) noexcept;

  StoreConfig cfg_;
  std::mutex mu_;  // the LRU list
  std::list<Object*> lru_;  // front: most recently used
  std::function<void(ObjRef)> nuke_hook_;
  std::atomic<std::size_t> used_{0};
  std::atomic<std::size_t> transient_used_{0};
  // Large transient segments freed lately, kept for the next pass instead of going back
  // to malloc (which maps and unmaps them: system calls and page faults per segment).
  std::mutex spare_mu_;
  std::vector<std::pair<std::uint8_t*, std::size_t>> spare_;
  std::size_t spare_bytes_ = 0;
  std::atomic<std::size_t> buffer_used_{0};
  std::atomic<std::uint64_t> nuked_{0};
  std::atomic<std::uint64_t> alloc_fail_{0};
  std::atomic<std::size_t> objects_{0};
  std::atomic<std::uint64_t> next_id_{1};
};

}  // namespace ringproxy::delivery
