// Segments, objects, readers and the capped LRU store. Lock order: an object's lock is
// never held while the store allocates (eviction calls the cache, which may look at
// objects), and the store's LRU lock is never held while calling out.
#include "ringproxy/delivery/storage.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

namespace ringproxy::delivery {

void ScatterArray::drop_front(std::size_t n) noexcept {
  assert(n <= used_);
  if (n == 0) return;
  std::memmove(iov_.get(), iov_.get() + n, (used_ - n) * sizeof(iovec));
  std::memmove(lease_.get(), lease_.get() + n, (used_ - n) * sizeof(Lease));
  used_ -= n;
}

// ---------------------------------------------------------------- LoopWaker
LoopWaker::LoopWaker() {
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}
LoopWaker::~LoopWaker() {
  if (fd_ >= 0) ::close(fd_);
}
namespace {
thread_local const LoopWaker* t_loop_waker = nullptr;  // the waker of this thread's loop
}  // namespace

void LoopWaker::bind_to_this_thread() noexcept { t_loop_waker = this; }

void LoopWaker::wake() noexcept {
  if (t_loop_waker == this) {
    local_.store(true, std::memory_order_relaxed);
    return;
  }
  std::uint64_t one = 1;
  // EAGAIN means the counter is saturated: the loop is woken anyway.
  [[maybe_unused]] ssize_t r = ::write(fd_, &one, sizeof one);
}
std::uint64_t LoopWaker::drain() noexcept {
  std::uint64_t v = 0;
  if (::read(fd_, &v, sizeof v) != ssize_t(sizeof v)) return 0;
  return v;
}

// ---------------------------------------------------------------- Object
Object::Object(Store* s, bool transient, std::size_t window, std::uint64_t id)
    : store_(s),
      transient_(transient),
      window_(window),
      seg_size_(transient ? std::max(s->cfg_.segment_size, window / 4) : s->cfg_.segment_size),
      id_(id) {}

Object::~Object() {
  assert(!in_lru_);
  for (Segment* s : segs_) {
    store_->seg_free(s->data, s->cap, transient_);
    delete s;
  }
  store_->objects_.fetch_sub(1, std::memory_order_relaxed);
}

void Object::fire_locked() noexcept {
  ++version_;
  std::vector<Notify*> w;
  w.swap(waiters_);
  for (Notify* n : w) {
    n->armed = false;
    n->fn(n);
  }
}


// The write position: after the full segments, before the empty ones at the tail
// (segments write_spans() added ahead); segs_.size() when every segment is full.
std::size_t Object::cursor_locked() const noexcept {
  std::size_t i = segs_.size();
  while (i > 0 && segs_[i - 1]->len == 0) --i;
  if (i > 0 && segs_[i - 1]->len < segs_[i - 1]->cap) --i;
  return i;
}

std::span<std::uint8_t> Object::write_space() noexcept {
  {
    std::lock_guard lk(mu_);
    if (state_ != ObjState::busy) return {};
    std::size_t i = cursor_locked();
    if (i < segs_.size()) {
      Segment* t = segs_[i];
      return {t->data + t->len, t->cap - t->len};
    }
  }
  // A new segment, allocated without our lock (eviction may call into the cache).
  std::size_t n = seg_size_;
  std::uint64_t have;
  {
    std::lock_guard lk(mu_);
    have = fetched_;
  }
  if (hint_ > have) n = std::size_t(std::min<std::uint64_t>(n, hint_ - have));
  else n = std::min(n, std::max<std::size_t>(4096, std::size_t(have)));  // unknown length: grow
  if (transient_ && held_.load(std::memory_order_relaxed) + n > window_ &&
      held_.load(std::memory_order_relaxed) > 0)
    return {};  // window full: the reader must free some first
  std::uint8_t* p = store_->seg_alloc(n, transient_, this);
  if (!p) {
    fail();
    return {};
  }
  auto* s = new Segment{p, n, 0, 0};
  std::lock_guard lk(mu_);
  s->seq = first_seq_ + segs_.size();
  segs_.push_back(s);
  std::size_t h = held_.fetch_add(n, std::memory_order_relaxed) + n;
  if (h > peak_held_.load(std::memory_order_relaxed)) peak_held_.store(h, std::memory_order_relaxed);
  return {p, n};
}

std::size_t Object::write_spans(iovec* out, std::size_t max, std::size_t max_bytes) noexcept {
  if (max == 0 || max_bytes == 0) return 0;
  std::span<std::uint8_t> sp = write_space();
  if (sp.empty()) return 0;
  std::size_t k = 0, total = std::min(sp.size(), max_bytes);
  out[k++] = iovec{sp.data(), total};
  {  // segments already added ahead (a receive that was not queued) come first
    std::lock_guard lk(mu_);
    for (std::size_t i = cursor_locked() + 1; i < segs_.size() && k < max && total < max_bytes; ++i) {
      std::size_t take = std::min(segs_[i]->cap, max_bytes - total);
      out[k++] = iovec{segs_[i]->data, take};
      total += take;
    }
  }
  while (transient_ && k < max && total < max_bytes) {
    std::size_t n = seg_size_;
    if (held_.load(std::memory_order_relaxed) + n > window_) break;
    std::uint8_t* p = store_->seg_alloc(n, true, this);
    if (!p) break;  // not a failure: the receive takes what it has
    auto* s = new (std::nothrow) Segment{p, n, 0, 0};
    if (!s) {
      store_->seg_free(p, n, true);
      break;
    }
    std::lock_guard lk(mu_);
    s->seq = first_seq_ + segs_.size();
    segs_.push_back(s);
    std::size_t h = held_.fetch_add(n, std::memory_order_relaxed) + n;
    if (h > peak_held_.load(std::memory_order_relaxed)) peak_held_.store(h, std::memory_order_relaxed);
    std::size_t take = std::min(n, max_bytes - total);
    out[k++] = iovec{p, take};
    total += take;
  }
  return k;
}

void Object::commit(std::size_t n) noexcept {
  std::lock_guard lk(mu_);
  std::size_t i = cursor_locked();
  fetched_ += n;
  while (n > 0) {
    assert(i < segs_.size());
    Segment* s = segs_[i];
    std::size_t k = std::min(n, s->cap - s->len);
    s->len += k;
    n -= k;
    if (s->len == s->cap) ++i;
  }
  // Segments added ahead that the bytes did not reach go back (one empty tail is kept).
  while (segs_.size() > i + 1 && segs_.back()->len == 0) {
    Segment* s = segs_.back();
    segs_.pop_back();
    held_.fetch_sub(s->cap, std::memory_order_relaxed);
    store_->seg_free(s->data, s->cap, transient_);
    delete s;
  }
  fire_locked();
}

ssize_t Object::append(const void* p, std::size_t n) noexcept {
  const auto* src = static_cast<const std::uint8_t*>(p);
  std::size_t done = 0;
  while (done < n) {
    auto sp = write_space();
    if (sp.empty()) {
      if (failed()) return -1;
      break;
    }
    std::size_t k = std::min(sp.size(), n - done);
    std::memcpy(sp.data(), src + done, k);  // above len: no reader looks here yet
    commit(k);
    done += k;
  }
  return ssize_t(done);
}

void Object::finish() noexcept {
  std::lock_guard lk(mu_);
  if (state_ != ObjState::busy) return;
  state_ = ObjState::done;
  fire_locked();
}

void Object::fail() noexcept {
  std::lock_guard lk(mu_);
  if (state_ != ObjState::busy) return;
  state_ = ObjState::failed;
  fire_locked();
  if (space_waiter_) {
    Notify* s = std::exchange(space_waiter_, nullptr);
    s->armed = false;
    s->fn(s);
  }
}

bool Object::arm_space(Notify* n) noexcept {
  std::lock_guard lk(mu_);
  if (state_ != ObjState::busy) return false;
  if (held_.load(std::memory_order_relaxed) + seg_size_ <= window_) return false;
  if (cursor_locked() < segs_.size()) return false;  // the write position has room
  n->armed = true;
  space_waiter_ = n;
  return true;
}

ObjState Object::state() const noexcept {
  std::lock_guard lk(mu_);
  return state_;
}
std::uint64_t Object::fetched() const noexcept {
  std::lock_guard lk(mu_);
  return fetched_;
}
std::uint64_t Object::version() const noexcept {
  std::lock_guard lk(mu_);
  return version_;
}
bool Object::arm(Notify* n, std::uint64_t seen) noexcept {
  std::lock_guard lk(mu_);
  if (version_ != seen) return false;
  if (!n->armed) {
    n->armed = true;
    waiters_.push_back(n);
  }
  return true;
}
void Object::disarm(Notify* n) noexcept {
  std::lock_guard lk(mu_);
  if (!n->armed) return;
  n->armed = false;
  waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), n), waiters_.end());
}
void Object::changed() noexcept {
  std::lock_guard lk(mu_);
  fire_locked();
}

void Object::release_transient_locked(std::uint64_t reader_seq) noexcept {
  bool freed = false;
  while (!segs_.empty() && segs_.front()->seq < reader_seq && segs_.front()->leases == 0) {
    Segment* s = segs_.front();
    segs_.pop_front();
    ++first_seq_;
    held_.fetch_sub(s->cap, std::memory_order_relaxed);
    store_->seg_free(s->data, s->cap, true);
    delete s;
    freed = true;
  }
  if (freed && space_waiter_) {
    Notify* s = std::exchange(space_waiter_, nullptr);
    s->armed = false;
    s->fn(s);
  }
}

// ---------------------------------------------------------------- ObjectReader
ObjectReader::ObjectReader(ObjRef obj, Notify* notify, std::size_t max_leases)
    : obj_(std::move(obj)), notify_(notify), max_leases_(max_leases) {}

ObjectReader::~ObjectReader() {
  if (notify_) obj_->disarm(notify_);
#ifdef RINGPROXY_LEASE_ACCOUNTING
  if (!lent_.empty() || outstanding_ != 0) {
    std::fprintf(stderr, "ringproxy: object %llu released with %zu leases outstanding\n",
                 (unsigned long long)obj_->id(), outstanding_);
    assert(!"lease accounting: a lease was not returned");
  }
#endif
}

#ifdef RINGPROXY_LEASE_ACCOUNTING
void ObjectReader::account_out(Lease l, std::uint32_t n) { lent_[l] += n; }
void ObjectReader::account_in(Lease l) {
  auto it = lent_.find(l);
  if (it == lent_.end()) {
    std::fprintf(stderr, "ringproxy: lease %#llx returned but not lent (double return?)\n",
                 (unsigned long long)l);
    assert(!"lease accounting: lease returned twice or never lent");
    return;
  }
  if (--it->second == 0) lent_.erase(it);
}
#endif

int ObjectReader::lease(ScatterArray& sa) noexcept {
  if (sa.end()) return 0;
  if (outstanding_ >= max_leases_) return kLeaseReturnFirst;
  Object& o = *obj_;
  std::lock_guard lk(o.mu_);
  int added = 0;
  while (!sa.full()) {
    if (seq_ < o.first_seq_) {  // cannot happen for the single reader of a transient object
      assert(false);
      return kLeaseError;
    }
    std::uint64_t idx = seq_ - o.first_seq_;
    if (idx >= o.segs_.size()) break;
    Segment* s = o.segs_[idx];
    std::size_t avail = s->len - off_;
    if (avail == 0) {
      // Only a full segment is left behind: the one at the write position may still
      // grow even when segments follow it (added ahead for a vectored receive).
      if (s->len == s->cap) {
        ++seq_;
        off_ = 0;
        continue;
      }
      break;
    }
    if (skip_) {
      std::size_t k = std::size_t(std::min<std::uint64_t>(skip_, avail));
      skip_ -= k;
      off_ += k;
      pos_ += k;
      continue;
    }
    sa.add(Lease(reinterpret_cast<std::uintptr_t>(s)), s->data + off_, avail);
    off_ += avail;
    pos_ += avail;
    ++outstanding_;
    if (o.transient_) ++s->leases;
#ifdef RINGPROXY_LEASE_ACCOUNTING
    account_out(Lease(reinterpret_cast<std::uintptr_t>(s)));
#endif
    ++added;
  }
  bool caught_up = pos_ == o.fetched_;
  if (caught_up && o.state_ == ObjState::done) {
    sa.set_end();
    return added;
  }
  if (added > 0 || !caught_up) return added;  // !caught_up: the array is full
  if (o.state_ == ObjState::failed) return kLeaseError;
  if (notify_ && !notify_->armed) {
    notify_->armed = true;
    o.waiters_.push_back(notify_);
  }
  return kLeaseAgain;
}

bool ObjectReader::readable() const noexcept {
  std::lock_guard lk(obj_->mu_);
  return pos_ + skip_ < obj_->fetched_;
}

void ObjectReader::give_back(std::span<const Lease> leases) noexcept {
  bool transient_seg = false;
  for (Lease l : leases) {
    if (l == kLeaseNoReturn) continue;
#ifdef RINGPROXY_LEASE_ACCOUNTING
    account_in(l);
#endif
    assert(outstanding_ > 0);
    --outstanding_;
    if (Store::is_buffer(l)) {
      Store::buffer_release(l);
    } else if (obj_->transient_) {
      transient_seg = true;
    }
  }
  if (!transient_seg) return;
  Object& o = *obj_;
  std::lock_guard lk(o.mu_);  // one lock per batch
  for (Lease l : leases) {
    if (l == kLeaseNoReturn || Store::is_buffer(l)) continue;
    auto* s = reinterpret_cast<Segment*>(std::uintptr_t(l));
    assert(s->leases > 0);
    --s->leases;
  }
  o.release_transient_locked(seq_);
}

std::span<std::uint8_t> ObjectReader::alloc_buffer(std::size_t n, std::uint32_t refs, Lease* lease) noexcept {
  std::uint8_t* p = obj_->store_->buffer_alloc(n, refs, lease);
  if (!p) return {};
  outstanding_ += refs;
#ifdef RINGPROXY_LEASE_ACCOUNTING
  account_out(*lease, refs);
#endif
  return {p, n};
}

// ---------------------------------------------------------------- Store
namespace {
struct alignas(16) BufHdr {
  std::atomic<std::uint32_t> refs;
  std::size_t size;
  Store* store;
};
}  // namespace

Store::Store(StoreConfig cfg) : cfg_(cfg) {
  if (cfg_.segment_size == 0) cfg_.segment_size = 64 << 10;
  if (cfg_.transient_window < cfg_.segment_size) cfg_.transient_window = cfg_.segment_size;
}

Store::~Store() {
  for (auto& [p, n] : spare_) std::free(p);
  std::lock_guard lk(mu_);
  for (Object* o : lru_) o->in_lru_ = false;
  lru_.clear();
}

ObjRef Store::new_object(bool transient, std::size_t window) {
  objects_.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  return ObjRef(new Object(this, transient, window ? std::max(window, cfg_.segment_size) : cfg_.transient_window, id));
}

void Store::lru_insert(Object& o) {
  std::lock_guard lk(mu_);
  if (o.in_lru_) return;
  lru_.push_front(&o);
  o.lru_it_ = lru_.begin();
  o.in_lru_ = true;
}
void Store::lru_touch(Object& o) {
  std::lock_guard lk(mu_);
  if (!o.in_lru_) return;
  lru_.splice(lru_.begin(), lru_, o.lru_it_);
}
void Store::lru_remove(Object& o) {
  std::lock_guard lk(mu_);
  if (!o.in_lru_) return;
  lru_.erase(o.lru_it_);
  o.in_lru_ = false;
}
void Store::set_nuke_hook(std::function<void(ObjRef)> hook) {
  std::lock_guard lk(mu_);
  nuke_hook_ = std::move(hook);
}

bool Store::make_room(std::size_t n, const Object* self) noexcept {
  // Like Varnish's nuke_limit: a bounded number of evictions per allocation, so one
  // allocation cannot wipe a cache whose objects are all being read.
  for (int tries = 0; used_.load(std::memory_order_relaxed) + n > cfg_.capacity; ++tries) {
    if (tries == 50) return false;
    ObjRef victim;
    std::function<void(ObjRef)> hook;
    {
      std::lock_guard lk(mu_);
      for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
        if (*it == self) continue;
        Object* o = *it;
        lru_.erase(std::next(it).base());
        o->in_lru_ = false;
        victim = o->shared_from_this();  // the cache holds a reference while it is in the LRU
        break;
      }
      hook = nuke_hook_;
    }
    if (!victim) return false;
    nuked_.fetch_add(1, std::memory_order_relaxed);
    if (hook) hook(victim);
  }
  return true;
}

namespace {
constexpr std::size_t kSpareMin = 256 << 10;   // smaller segments come from malloc's bins
constexpr std::size_t kSpareMax = 32u << 20;   // bytes kept at most
}  // namespace

std::uint8_t* Store::seg_alloc(std::size_t n, bool transient, const Object* self) noexcept {
  if (transient) {
    std::uint8_t* p = nullptr;
    if (n >= kSpareMin) {
      std::lock_guard lk(spare_mu_);
      for (std::size_t i = spare_.size(); i-- > 0;) {
        if (spare_[i].second != n) continue;
        p = spare_[i].first;
        spare_[i] = spare_.back();
        spare_.pop_back();
        spare_bytes_ -= n;
        break;
      }
    }
    if (!p) p = static_cast<std::uint8_t*>(std::malloc(n));
    if (p) transient_used_.fetch_add(n, std::memory_order_relaxed);
    else alloc_fail_.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  if (!make_room(n, self)) {
    alloc_fail_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  auto* p = static_cast<std::uint8_t*>(std::malloc(n));
  if (!p) {
    alloc_fail_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  used_.fetch_add(n, std::memory_order_relaxed);
  return p;
}

void Store::seg_free(std::uint8_t* p, std::size_t n, bool transient) noexcept {
  (transient ? transient_used_ : used_).fetch_sub(n, std::memory_order_relaxed);
  if (transient && n >= kSpareMin) {
    std::lock_guard lk(spare_mu_);
    if (spare_bytes_ + n <= kSpareMax) {
      try {
        spare_.emplace_back(p, n);
        spare_bytes_ += n;
        return;
      } catch (...) {  // no memory for the list: the segment goes back to malloc
      }
    }
  }
  std::free(p);
}

std::uint8_t* Store::buffer_alloc(std::size_t n, std::uint32_t refs, Lease* lease) noexcept {
  assert(refs > 0);
  void* m = std::aligned_alloc(16, (sizeof(BufHdr) + n + 15) & ~std::size_t(15));
  if (!m) return nullptr;
  auto* h = new (m) BufHdr{{refs}, n, this};
  buffer_used_.fetch_add(n, std::memory_order_relaxed);
  *lease = Lease(reinterpret_cast<std::uintptr_t>(h)) | 1;
  return reinterpret_cast<std::uint8_t*>(h + 1);
}

void Store::buffer_release(Lease l) noexcept {
  auto* h = reinterpret_cast<BufHdr*>(std::uintptr_t(l & ~Lease(1)));
  if (h->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  h->store->buffer_used_.fetch_sub(h->size, std::memory_order_relaxed);
  h->~BufHdr();
  std::free(h);
}

}  // namespace ringproxy::delivery
