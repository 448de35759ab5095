// Leases and scatter arrays: the currency of ringproxy's delivery stack (Varnish's VAI
// leases and VSCARAB/VSCARET, seeds/000). Storage lends extents of an object as
// (lease, iovec) pairs; whoever holds an extent gives its lease back exactly once, in
// batches. Nothing here allocates after construction and nothing blocks.
#pragma once
#include <sys/uio.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace ringproxy::delivery {

// An opaque 64-bit value naming a piece of storage lent out. Only the lender decodes it.
using Lease = std::uint64_t;
// Data that must not be returned (static bytes, bytes owned by the caller).
inline constexpr Lease kLeaseNoReturn = ~Lease(0);

// What a lease call returns: >= 0 is the number of extents added (0 means "no room in
// the scatter array", never "end of data"; the end is only ScatterArray::end()).
inline constexpr int kLeaseAgain = -1;        // nothing now: a notification was armed, try again after it
inline constexpr int kLeaseReturnFirst = -2;  // too many leases out: return some first
inline constexpr int kLeaseError = -3;        // the object failed, or a filter found bad data

struct Extent {
  Lease lease;
  iovec iov;
  std::size_t size() const noexcept { return iov.iov_len; }
  const std::uint8_t* data() const noexcept { return static_cast<const std::uint8_t*>(iov.iov_base); }
};

// A scatter array: fixed capacity, a used count and the END flag. The iovecs sit in
// their own contiguous array so a transport hands iov() straight to writev/sendmsg.
class ScatterArray {
 public:
  explicit ScatterArray(std::size_t capacity)
      : cap_(capacity), iov_(new iovec[capacity]), lease_(new Lease[capacity]) {
    assert(capacity > 0);
  }
  ScatterArray(ScatterArray&&) noexcept = default;
  ScatterArray& operator=(ScatterArray&&) noexcept = default;

  std::size_t capacity() const noexcept { return cap_; }
  std::size_t used() const noexcept { return used_; }
  std::size_t room() const noexcept { return cap_ - used_; }
  bool empty() const noexcept { return used_ == 0; }
  bool full() const noexcept { return used_ == cap_; }
  bool end() const noexcept { return end_; }
  void set_end() noexcept { end_ = true; }
  void clear_end() noexcept { end_ = false; }

  // Adds one extent (zero length allowed); false when full.
  bool add(Lease l, const void* p, std::size_t n) noexcept {
    if (used_ == cap_) return false;
    iov_[used_] = iovec{const_cast<void*>(p), n};
    lease_[used_] = l;
    ++used_;
    return true;
  }
  bool add_noret(const void* p, std::size_t n) noexcept { return add(kLeaseNoReturn, p, n); }

  iovec* iov() noexcept { return iov_.get(); }
  const iovec* iov() const noexcept { return iov_.get(); }
  Lease lease(std::size_t i) const noexcept { return lease_[i]; }
  iovec& at(std::size_t i) noexcept { return iov_[i]; }
  const iovec& at(std::size_t i) const noexcept { return iov_[i]; }
  Extent extent(std::size_t i) const noexcept { return Extent{lease_[i], iov_[i]}; }
  std::span<const Lease> leases() const noexcept { return {lease_.get(), used_}; }
  std::size_t bytes() const noexcept {
    std::size_t n = 0;
    for (std::size_t i = 0; i < used_; ++i) n += iov_[i].iov_len;
    return n;
  }
  // Drops the first n extents (their leases must have been taken care of), keeping order.
  void drop_front(std::size_t n) noexcept;
  // Forgets all extents (leases must have been taken care of) and the END flag.
  void reset() noexcept { used_ = 0; end_ = false; }

 private:
  std::size_t cap_;
  std::size_t used_ = 0;
  bool end_ = false;
  std::unique_ptr<iovec[]> iov_;
  std::unique_ptr<Lease[]> lease_;
};

// Where leases go back to. Batches: give_back is called with many leases at once.
class LeaseSink {
 public:
  virtual ~LeaseSink() = default;
  virtual void give_back(std::span<const Lease> leases) noexcept = 0;
};

// A batch of leases to give back (Varnish's VSCARET): fills up, then flushes to its
// sink in one call. kLeaseNoReturn is dropped on the way in.
class LeaseBatch {
 public:
  LeaseBatch(LeaseSink& sink, std::size_t capacity = 64)
      : sink_(&sink), cap_(capacity), v_(new Lease[capacity]) {}
  ~LeaseBatch() { flush(); }
  LeaseBatch(const LeaseBatch&) = delete;
  LeaseBatch& operator=(const LeaseBatch&) = delete;

  void put(Lease l) noexcept {
    if (l == kLeaseNoReturn) return;
    if (n_ == cap_) flush();
    v_[n_++] = l;
  }
  // All extents of a scatter array, which is then reset.
  void put_all(ScatterArray& sa) noexcept {
    for (std::size_t i = 0; i < sa.used(); ++i) put(sa.lease(i));
    sa.reset();
  }
  void flush() noexcept {
    if (n_) sink_->give_back({v_.get(), n_});
    n_ = 0;
  }
  std::size_t pending() const noexcept { return n_; }

 private:
  LeaseSink* sink_;
  std::size_t cap_;
  std::size_t n_ = 0;
  std::unique_ptr<Lease[]> v_;
};

}  // namespace ringproxy::delivery
