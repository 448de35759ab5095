// ringlog-dump's reading of a ring's message area from untrusted bytes, shared by the
// walk and the repair: the framing of one message, payload copies, the batches writer
// slots record as in flight, and the map of positions whose framing reaches the tail.
// Internal to ringlog_dump_core; never writes to the image.
#pragma once

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
