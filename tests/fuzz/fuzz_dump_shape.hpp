// Shared by fuzz_dump and fuzz_repair: turns fuzzer bytes into a ring file image. The
// first byte picks the shape, so that the fuzzer reaches past header validation:
//   0: the bytes are the whole file (any layout, or none)
//   1: a valid ringlog header (4096-byte area) with head, tail, writer and reader slots
//      and the area taken from the input
//   2: a HAProxy 3.0+ file (v2 or v2a) with size, head and tail from the input
//   3: a HAProxy 2.x file (struct buffer, header length from the "area pointer")
// Shaped rings are small (a ringlog area of 4096 bytes, the smallest; HAProxy areas up
// to 2 KiB): the work per input grows with the ring, the code paths do not.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "ringlog/format.hpp"

// UBSan findings are fatal in the fuzz build (-fno-sanitize-recover=undefined); this
// also keeps them fatal, with a stack, when these two targets (one definition each)
// are built with a plain -fsanitize=undefined elsewhere.
extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }

namespace fuzz_dump {

struct Input {
  const std::uint8_t* p;
  std::size_t n;
  std::size_t at = 0;
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8 && at < n; ++i) v |= std::uint64_t{p[at++]} << (8 * i);
    return v;
  }
  std::uint8_t u8() { return at < n ? p[at++] : 0; }
  std::size_t left() const { return n - at; }
};

// A 64-byte aligned image owned by the caller (free with std::free).
struct Image {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  ~Image() { std::free(data); }
  void alloc(std::size_t n) {
    size = n;
    data = static_cast<std::uint8_t*>(std::aligned_alloc(64, (n + 64) / 64 * 64));
    std::memset(data, 0, (n + 64) / 64 * 64);
  }
};

inline void put64(std::uint8_t* p, std::uint64_t v) { std::memcpy(p, &v, 8); }

// How the targets judge the processes an image names (dump::Image::alive): this
// process runs, every other pid is dead. The system's own check (kill(2), then
// /proc/PID/stat) would cost system calls and file reads per input, and make a run's
// outcome depend on which pids happen to exist on the machine.
inline bool alive(std::uint32_t pid, std::uint64_t) {
  static const auto self = static_cast<std::uint32_t>(::getpid());
  return pid == self;
}

inline void shape(const std::uint8_t* d, std::size_t n, Image& img) {
  using namespace ringlog::format;
  if (n == 0) {
    img.alloc(0);
    return;
  }
  Input in{d + 1, n - 1};
  switch (d[0] & 3) {
    case 0:
      img.alloc(n - 1);
      if (n > 1) std::memcpy(img.data, d + 1, n - 1);
      return;
    case 1: {
      constexpr std::uint64_t kArea = 4096;
      img.alloc(kHeaderLen + kArea);
      auto* h = reinterpret_cast<Header*>(img.data);
      h->magic = kMagic;
      h->version = kVersion;
      h->byte_order = kByteOrderMark;
      h->word_size = sizeof(void*);
      h->pos_size = 8;
      h->writer_slots = kWriterSlots;
      h->reader_slots = kReaderSlots;
      h->header_len = kHeaderLen;
      h->area_size = kArea;
      h->owner_saved_rc = in.u8() & 1 ? 0x100 : in.u8();
      std::uint64_t head = in.u64() % (3 * kArea), tail = in.u64();
      tail = (tail & (1ULL << 63)) | (head + 1 + (tail & 0x7fffffffffffffffULL) % (kArea + 64));
      h->head = head;
      h->tail = tail;
      h->owner = in.u8() & 1 ? (std::uint64_t{999999} << 32 | (in.u8() % 4 + 1)) : 0;
      for (unsigned i = 0; i < 4; ++i) {  // writer slots of dead pids, with in-flight batches
        std::uint8_t f = in.u8();
        if (!(f & 1)) continue;
        h->writers[i].pid = 999990 + i;
        h->writers[i].inflight_pos = head + in.u64() % (kArea + 8);
        h->writers[i].inflight_end = h->writers[i].inflight_pos + in.u64() % (kArea + 8);
        h->writers[i].saved_rc = in.u8();
      }
      for (unsigned i = 0; i < 2; ++i) {  // reader slots
        std::uint8_t f = in.u8();
        if (!(f & 1)) continue;
        h->readers[i].pid = f & 2 ? static_cast<std::uint32_t>(::getpid()) : 999980 + i;
        h->readers[i].pos = head + in.u64() % (kArea + 8);
        h->readers[i].next_pos = f & 4 ? head + in.u64() % (kArea + 8) : 0;
      }
      std::uint8_t* area = img.data + kHeaderLen;
      for (std::size_t i = 0; i < kArea && in.left(); ++i) area[(head + i) % kArea] = in.u8();
      return;
    }
    case 2: {
      bool aligned = in.u8() & 1;
      std::uint64_t rsvd = aligned ? 192 : 32;
      std::uint64_t size = 2 + in.u64() % 2048;
      img.alloc(rsvd + size);
      std::uint64_t head = in.u64(), tail = in.u64();
      if (!(in.u8() & 1)) {  // mostly in range
        head %= size;
        tail = (tail & (1ULL << 63)) | ((tail & 0xffffff) % size);
      }
      put64(img.data, size);
      put64(img.data + 8, rsvd);
      put64(img.data + (aligned ? 64 : 16), tail);
      put64(img.data + (aligned ? 128 : 24), head);
      for (std::size_t i = 0; i < size && in.left(); ++i) img.data[rsvd + (head + i) % size] = in.u8();
      return;
    }
    default: {
      std::uint64_t hl = 32 + in.u8() % 96;
      std::uint64_t size = 2 + in.u64() % 2048;
      img.alloc(hl + size);
      std::uint64_t head = in.u64(), data = in.u64();
      if (!(in.u8() & 1)) {
        head %= size;
        data %= size + 1;
      }
      put64(img.data, size);
      put64(img.data + 8, 0x7f0000001000ULL + hl);
      put64(img.data + 16, data);
      put64(img.data + 24, head);
      for (std::size_t i = 0; i < size && in.left(); ++i) img.data[hl + (head + i) % size] = in.u8();
      return;
    }
  }
}

}  // namespace fuzz_dump
