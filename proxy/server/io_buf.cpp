// The spare buffers each thread keeps (io_buf.hpp): up to kKept of each size buffers
// start at, so that a session releasing its buffers when idle and taking them again on
// its next request goes to malloc only when more connections are busy at once than the
// lists hold. With 16, a thread serving 25 busy keep-alive connections went to malloc
// and free for its 16 and 32 KiB buffers on most requests. Bounded, so that a wave of
// connections leaves at most these behind; the worker's idle trim drains them.
#include "io_buf.hpp"

#include <array>

namespace ringproxy::buf_pool {

namespace {

constexpr std::size_t kKept = 64;  // of each size, per thread

struct Spares {
  struct List {
    std::array<char*, kKept> bufs{};
    std::size_t n = 0;
  };
  List first, read;  // kBufFirst, kReadChunk
  ~Spares() {
    free_all();
    gone = true;
  }
  List* of(std::size_t cap) noexcept { return cap == kBufFirst ? &first : cap == kReadChunk ? &read : nullptr; }
  void free_all() noexcept {
    for (List* l : {&first, &read})
      while (l->n) delete[] l->bufs[--l->n];
  }
  static thread_local bool gone;  // trivial: still readable once the lists are destroyed
};
thread_local bool Spares::gone = false;
thread_local Spares t_spares;

}  // namespace

char* take(std::size_t cap) {
  if (!Spares::gone)
    if (Spares::List* l = t_spares.of(cap); l && l->n) return l->bufs[--l->n];
  return new char[cap];
}

bool give(char* p, std::size_t cap) noexcept {
  if (Spares::gone) return false;
  Spares::List* l = t_spares.of(cap);
  if (!l || l->n == kKept) return false;
  l->bufs[l->n++] = p;
  return true;
}

void drain() noexcept {
  if (!Spares::gone) t_spares.free_all();
}

}  // namespace ringproxy::buf_pool
