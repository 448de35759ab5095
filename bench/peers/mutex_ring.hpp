// bench_ring's baseline: a plain byte ring behind one global lock held across reserve
// and copy (Varnish 4.0's vsl_get, with the copy inside the lock), with ringlog's
// framing (RC byte, varint length, payload), head advanced over whole messages and
// counters updated under the lock. Written the way a careful C programmer would:
// offsets wrap by compare and subtract, no division on the hot path. It lives in a
// memfd mapping so that a writer in another process can map it too (its mutex is then
// process-shared); it never reads or checks anything, it is only the cost to beat.
#pragma once

#include <pthread.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "ringlog/format.hpp"

namespace ringlog::bench {

class MutexRing {
 public:
  // A fresh ring of `size` bytes in a new memfd; shared: the mutex works across processes.
  static MutexRing create(std::uint64_t size, bool shared) {
    int fd = ::memfd_create("ringlog-bench-mutex-ring", MFD_CLOEXEC);
    if (fd < 0) throw std::runtime_error("memfd_create failed");
    if (::ftruncate(fd, static_cast<off_t>(kAreaOffset + size)) != 0) {
      ::close(fd);
      throw std::runtime_error("ftruncate failed");
    }
    MutexRing r(fd, kAreaOffset + size);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (shared) pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&r.st_->mu, &a);
    pthread_mutexattr_destroy(&a);
    r.st_->size = size;
    r.st_->head = 0;
    r.st_->tail = 1;  // one RC byte at 0
    r.st_->head_off = 0;
    r.st_->tail_off = 1;
    std::memset(r.area_, 0, size);  // fault every page in before measuring
    return r;
  }
  // The ring another process created (its memfd, inherited).
  static MutexRing attach(int fd) {
    off_t len = ::lseek(fd, 0, SEEK_END);
    if (len <= static_cast<off_t>(kAreaOffset)) throw std::runtime_error("not a mutex ring");
    return MutexRing(fd, static_cast<std::uint64_t>(len));
  }
  MutexRing(MutexRing&& o) noexcept : fd_(o.fd_), map_(o.map_), len_(o.len_), st_(o.st_), area_(o.area_) {
    o.fd_ = -1;
    o.map_ = nullptr;
  }
  MutexRing(const MutexRing&) = delete;
  MutexRing& operator=(const MutexRing&) = delete;
  MutexRing& operator=(MutexRing&&) = delete;
  ~MutexRing() {
    if (map_) ::munmap(map_, len_);
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const noexcept { return fd_; }

  bool writev(const iovec* parts, std::size_t n) noexcept {
    std::uint64_t len = 0;
    for (std::size_t i = 0; i < n; ++i) len += parts[i].iov_len;
    std::uint64_t word = len << format::kKindBits;  // kind 0: data
    std::uint8_t vb[format::kVarintMax];
    std::size_t vl = format::varint_encode(word, vb);
    std::uint64_t needed = 1 + vl + len;
    State& s = *st_;
    const std::uint64_t size = s.size;
    if (needed + 2 > size) return false;
    pthread_mutex_lock(&s.mu);
    std::uint64_t new_tail = s.tail + needed;
    while (new_tail - s.head > size) {  // reclaim the oldest messages
      std::uint64_t w = 0;
      std::size_t hl = format::varint_decode([&](std::size_t i) { return area_[wrap(s.head_off + 1 + i, size)]; },
                                             format::kVarintMax, w);
      std::uint64_t span = 1 + hl + (w >> format::kKindBits);
      s.head += span;
      s.head_off = wrap(s.head_off + span, size);
    }
    // This message's RC byte is at tail-1 already; the next one's goes at new_tail-1.
    std::uint64_t off = copy_in(s.tail_off, vb, vl, size);
    for (std::size_t i = 0; i < n; ++i) off = copy_in(off, parts[i].iov_base, parts[i].iov_len, size);
    area_[off] = 0;
    s.tail = new_tail;
    s.tail_off = wrap(off + 1, size);
    ++s.msgs;
    s.bytes += needed;
    pthread_mutex_unlock(&s.mu);
    return true;
  }

 private:
  static constexpr std::uint64_t kAreaOffset = 4096;
  struct State {
    pthread_mutex_t mu;
    std::uint64_t size, head, tail, head_off, tail_off, msgs, bytes;
  };
  static_assert(sizeof(State) <= kAreaOffset, "the ring's state must fit before its area");

  MutexRing(int fd, std::uint64_t len) : fd_(fd), len_(len) {
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw std::runtime_error("mmap failed");
    }
    map_ = p;
    st_ = static_cast<State*>(p);
    area_ = static_cast<std::uint8_t*>(p) + kAreaOffset;
  }
  static std::uint64_t wrap(std::uint64_t off, std::uint64_t size) noexcept { return off >= size ? off - size : off; }
  // Copies n bytes at offset off, wrapping once if needed; returns the offset after.
  std::uint64_t copy_in(std::uint64_t off, const void* src, std::size_t n, std::uint64_t size) noexcept {
    std::size_t first = static_cast<std::size_t>(std::min<std::uint64_t>(n, size - off));
    std::memcpy(area_ + off, src, first);
    if (first < n) std::memcpy(area_, static_cast<const std::uint8_t*>(src) + first, n - first);
    return wrap(off + n, size);
  }

  int fd_ = -1;
  void* map_ = nullptr;
  std::uint64_t len_ = 0;
  State* st_ = nullptr;
  std::uint8_t* area_ = nullptr;
};

}  // namespace ringlog::bench
