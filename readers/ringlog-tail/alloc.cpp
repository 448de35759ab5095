// The tool's operator new/delete: per-thread free lists by size class for the many
// small, short-lived strings a grouped read holds (every record payload of every
// transaction is one; they are freed a whole transaction at a time). glibc's malloc
// spent a quarter of `ringlog -g request` in malloc/free/consolidation; this takes
// the common sizes off it. Memory of freed small blocks is reused, never returned to
// the system (the tool's working set is bounded by -L and the groups in flight).
// Only this binary uses it; the library never depends on it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {

constexpr std::size_t kHeader = 16;  // keeps the 16-byte alignment operator new promises
constexpr std::size_t kStep = 16;
constexpr std::size_t kMaxSmall = 512;  // payload bytes handled by the free lists
constexpr std::size_t kClasses = kMaxSmall / kStep;
constexpr std::uint32_t kLarge = 0xFFFFFFFFu;
constexpr std::size_t kSlab = 256 * 1024;

struct FreeNode {
  FreeNode* next;
};

struct ThreadCache {
  FreeNode* free[kClasses] = {};
  char* slab = nullptr;
  std::size_t slab_left = 0;
};

thread_local ThreadCache t_cache;

inline std::uint32_t* header_of(void* p) {
  return reinterpret_cast<std::uint32_t*>(static_cast<char*>(p) - kHeader);
}

void* allocate(std::size_t n) {
  if (n == 0) n = 1;
  if (n <= kMaxSmall) {
    std::size_t cls = (n - 1) / kStep;
    ThreadCache& c = t_cache;
    if (FreeNode* f = c.free[cls]) {
      c.free[cls] = f->next;
      return f;
    }
    std::size_t block = kHeader + (cls + 1) * kStep;
    if (c.slab_left < block) {
      c.slab = static_cast<char*>(std::malloc(kSlab));
      if (!c.slab) return nullptr;
      c.slab_left = kSlab;
    }
    char* b = c.slab;
    c.slab += block;
    c.slab_left -= block;
    *reinterpret_cast<std::uint32_t*>(b) = static_cast<std::uint32_t>(cls);
    return b + kHeader;
  }
  if (n > SIZE_MAX - kHeader) return nullptr;
  char* b = static_cast<char*>(std::malloc(n + kHeader));
  if (!b) return nullptr;
  *reinterpret_cast<std::uint32_t*>(b) = kLarge;
  return b + kHeader;
}

void release(void* p) noexcept {
  if (!p) return;
  std::uint32_t cls = *header_of(p);
  if (cls == kLarge) {
    std::free(header_of(p));
    return;
  }
  auto* f = static_cast<FreeNode*>(p);
  ThreadCache& c = t_cache;
  f->next = c.free[cls];
  c.free[cls] = f;
}

void* allocate_or_throw(std::size_t n) {
  for (;;) {
    if (void* p = allocate(n)) return p;
    std::new_handler h = std::get_new_handler();
    if (!h) throw std::bad_alloc();
    h();
  }
}

}  // namespace

void* operator new(std::size_t n) { return allocate_or_throw(n); }
void* operator new[](std::size_t n) { return allocate_or_throw(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
