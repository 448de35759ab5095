// The byte buffers and non-blocking socket calls the server's stages share: a Buf with
// a read and a write offset, recv() into one, send() out of one, and a few buffers kept
// per thread (io_buf.cpp) so that a connection can let go of its buffers whenever it
// is idle at the cost of a list push. No logging, no counters.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

namespace ringproxy {

inline constexpr std::size_t kReadChunk = 32 * 1024;
inline constexpr std::size_t kHighWater = 256 * 1024;  // stop producing into a buffer above this
inline constexpr std::size_t kBufFirst = 16 * 1024;    // a buffer's first size (unless asked more)

// This thread's spare buffers of the two sizes buffers start at (kBufFirst, kReadChunk),
// a bounded number of each: take() one of cap bytes (a new one when none is kept),
// give() one back (false: not kept, the caller frees it), drain() frees all it keeps.
namespace buf_pool {
char* take(std::size_t cap);
bool give(char* p, std::size_t cap) noexcept;
void drain() noexcept;
}  // namespace buf_pool

// A byte buffer with a read and a write offset. Views into it stay valid until the
// next make_room() (which may compact or grow it).
struct Buf {
  std::unique_ptr<char[]> p;
  std::size_t cap = 0, rd = 0, wr = 0;
  Buf() = default;
  ~Buf() { release(); }
  Buf(Buf&& o) noexcept : p(std::move(o.p)), cap(o.cap), rd(o.rd), wr(o.wr) { o.cap = o.rd = o.wr = 0; }
  Buf& operator=(Buf&& o) noexcept {
    if (this == &o) return *this;
    release();
    p = std::move(o.p);
    cap = o.cap, rd = o.rd, wr = o.wr;
    o.cap = o.rd = o.wr = 0;
    return *this;
  }
  std::string_view view() const noexcept { return {p.get() + rd, wr - rd}; }
  std::size_t size() const noexcept { return wr - rd; }
  bool empty() const noexcept { return rd == wr; }
  void consume(std::size_t n) noexcept {
    rd += std::min(n, wr - rd);
    if (rd == wr) rd = wr = 0;
  }
  void clear() noexcept { rd = wr = 0; }
  void make_room(std::size_t n) {
    if (cap - wr >= n) return;
    if (rd > 0) {
      std::memmove(p.get(), p.get() + rd, wr - rd);
      wr -= rd;
      rd = 0;
      if (cap - wr >= n) return;
    }
    std::size_t nc = std::max<std::size_t>(cap ? cap * 2 : kBufFirst, wr + n);
    std::unique_ptr<char[]> np(buf_pool::take(nc));  // no zero fill: bytes are written before read
    if (wr) std::memcpy(np.get(), p.get(), wr);
    std::size_t used = wr;
    release();
    p = std::move(np);
    cap = nc;
    wr = used;
  }
  char* tail() noexcept { return p.get() + wr; }
  std::size_t room() const noexcept { return cap - wr; }
  void append(std::string_view s) {
    make_room(s.size());
    std::memcpy(p.get() + wr, s.data(), s.size());
    wr += s.size();
  }
  // Lets go of the memory (to this thread's spares when it is of a kept size).
  void release() noexcept {
    if (p && buf_pool::give(p.get(), cap)) (void)p.release();
    p.reset();
    cap = rd = wr = 0;
  }
  void release_if_idle() noexcept {
    if (empty() && cap > 64 * 1024) release();
  }
};

// recv() into b; returns bytes read, 0 on EOF, -1 with errno (EAGAIN: nothing now).
// drained (if given): the read took less than the room it was offered, so it emptied
// the socket's receive queue. With edge-triggered epoll, bytes that arrive after it
// raise a new event, so the caller need not recv() again only to be told EAGAIN (as
// HAProxy's raw_sock does); unless a hang-up was reported, which raises no new event:
// then the EOF behind the bytes is only seen by reading on.
inline ssize_t read_into(int fd, Buf& b, std::size_t want = kReadChunk, bool* drained = nullptr) {
  b.make_room(want);
  const std::size_t room = b.room();
  ssize_t n;
  do n = ::recv(fd, b.tail(), room, 0);
  while (n < 0 && errno == EINTR);
  if (n > 0) b.wr += std::size_t(n);
  if (drained) *drained = n > 0 && std::size_t(n) < room;
  return n;
}

// send() what b holds; returns false on a hard error (errno set). Sets `blocked`.
inline bool write_from(int fd, Buf& b, bool& blocked, std::uint64_t* sent) {
  blocked = false;
  while (!b.empty()) {
    ssize_t n = ::send(fd, b.p.get() + b.rd, b.size(), MSG_NOSIGNAL);
    if (n > 0) {
      b.consume(std::size_t(n));
      if (sent) *sent += std::uint64_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      blocked = true;
      return true;
    }
    return false;
  }
  return true;
}

inline void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace ringproxy
