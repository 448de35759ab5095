// ringlog-dump's reading of a ring's message area from untrusted bytes, shared by the
// walk and the repair: the framing of one message, payload copies, the batches writer
// slots record as in flight, and the map of positions whose framing reaches the tail.
// Internal to ringlog_dump_core; never writes to the image.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dump.hpp"

namespace ringlog::dump::detail {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));

inline bool is_haproxy(Layout l) noexcept { return l != Layout::ringlog; }

// The framing of the message whose RC byte is at pos, up to the RC at limit (tail - 1).
struct Frame {
  std::uint64_t span = 0;  // 0: malformed
  std::uint64_t len = 0;
  std::size_t vl = 0;
  format::MsgKind kind = format::MsgKind::data;
  unsigned raw_kind = 0;
};
Frame frame_at(const Image& img, std::uint64_t pos, std::uint64_t limit) noexcept;

// frame_at() with the area offset of pos + 1 (its first length byte) given, for
// pos < limit: the boundary map steps the offset along instead of dividing per
// position, the walks divide once per message for both the RC byte and the length.
// Inlined and with few branches: it runs once per position of the window (the map)
// and once per message of every walk, and in the fuzz build each branch is a traced
// comparison. A length of one byte (nearly every message) is read straight.
[[gnu::always_inline]] inline Frame frame_from(const Image& img, std::uint64_t pos, std::uint64_t next_off,
                                               std::uint64_t limit) noexcept {
  Frame f;
  const std::uint64_t room = limit - pos;  // >= 1: the RC byte, then at most room - 1 length bytes
  const std::uint8_t* a = img.area();
  const std::uint8_t b = a[next_off];      // an area byte even when room is 1 (then not used)
  std::uint64_t word = b;
  if (b < 240 && room >= 2) {
    f.vl = 1;
  } else {
    std::size_t avail = static_cast<std::size_t>(std::min<std::uint64_t>(format::kVarintMax, room - 1));
    if (img.area_size - next_off >= avail)
      f.vl = format::varint_decode([p = a + next_off](std::size_t i) { return p[i]; }, avail, word);
    else
      f.vl = format::varint_decode([&](std::size_t i) { return img.at(pos + 1 + i); }, avail, word);
    if (f.vl == 0) return f;
  }
  if (is_haproxy(img.layout)) {
    f.len = word;
  } else {
    f.len = word >> format::kKindBits;
    f.raw_kind = static_cast<unsigned>(word & format::kKindMask);
    f.kind = static_cast<format::MsgKind>(f.raw_kind);
  }
  const std::uint64_t span = 1 + f.vl + f.len;
  // The next RC must be at or before limit (len is checked first: span must not wrap).
  if (f.len <= img.area_size && span <= room) f.span = span;
  return f;
}

// The len bytes at pos, across the area's end if need be.
std::string copy_payload(const Image& img, std::uint64_t pos, std::uint64_t len);

// In-flight batches recorded in writer slots (ringlog layout): [x, end - 1) behind an
// RC of 0xFF at x.
struct Inflight {
  std::uint64_t x = 0, end = 0;
  unsigned slot = 0;
  std::uint32_t pid = 0;
  bool dead = false;
  std::uint32_t saved_rc = 0;
};
std::vector<Inflight> inflight_batches(const Image& img);
const Inflight* inflight_at(const std::vector<Inflight>& v, std::uint64_t x) noexcept;

// good[p - window_lo]: the framing from p reaches tail - 1 exactly (skipping recorded
// in-flight batches), through RC bytes that are 0 or accounted for by a reader slot.
// Empty when the window is too large to scan (see scannable()). Costs a frame decode
// per position: callers build it only when they need it.
std::vector<std::uint8_t> chain_map(const Image& img, const std::vector<Inflight>& inflight);

// Whether chain_map() can map the window (it is not too large).
bool scannable(const Image& img) noexcept;

// Where a rebuilt head starts, given chain_map()'s result (not empty).
std::uint64_t rebuilt_head(const Image& img, const std::vector<std::uint8_t>& good) noexcept;

}  // namespace ringlog::dump::detail
