// ringlog-dump's framing reader (framing.hpp). Nothing read from a file is trusted:
// every length is checked against the area and the tail before it is used, and every
// loop moves forward by at least one byte towards a fixed end.
#include "framing.hpp"

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "ringlog/repair.hpp"

namespace ringlog::dump::detail {

using namespace format;

namespace {

constexpr std::uint64_t kMaxScanWindow = 1ULL << 31;  // positions the boundary scan may map

// Positions where a readers count may legitimately be non-zero: those recorded in
// reader slots (held, or being moved to). Elsewhere a resynchronisation point must
// have an RC of 0, as haring -r requires: payload text rarely holds a NUL, so this
// keeps the scan from finding chains in the middle of old payloads.
std::vector<std::uint64_t> reader_positions(const Image& img) {
  std::vector<std::uint64_t> v;
  if (img.layout != Layout::ringlog) return v;
  for (const ReaderSlot& rs : img.hdr().readers) {
    if (!rs.pid.load(std::memory_order_relaxed)) continue;
    v.push_back(rs.pos.load(std::memory_order_relaxed));
    if (std::uint64_t n = rs.next_pos.load(std::memory_order_relaxed)) v.push_back(n - 1);
  }
  return v;
}

}  // namespace

std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

Frame frame_at(const Image& img, std::uint64_t pos, std::uint64_t limit) noexcept {
  if (pos >= limit) return {};
  return frame_from(img, pos, (pos + 1) % img.area_size, limit);
}

std::string copy_payload(const Image& img, std::uint64_t pos, std::uint64_t len) {
  std::string s(static_cast<std::size_t>(len), '\0');
  std::uint64_t o = pos % img.area_size;
  std::size_t done = 0;
  while (done < len) {
    std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(len - done, img.area_size - o));
    std::memcpy(s.data() + done, img.area() + o, chunk);
    done += chunk;
    o = 0;
  }
  return s;
}

std::vector<Inflight> inflight_batches(const Image& img) {
  std::vector<Inflight> v;
  if (img.layout != Layout::ringlog) return v;
  const Header& h = img.hdr();
  for (unsigned i = 0; i < kWriterSlots; ++i) {
    // A stale or nonsense record is ignored.
    std::optional<repair::InflightBatch> r = repair::inflight_batch(h, i, img.window_lo(), img.tail);
    if (!r) continue;
    v.push_back({r->x, r->end, i, r->pid, r->pid == 0 || !img.alive(r->pid, r->start_time), r->saved_rc});
  }
  return v;
}

const Inflight* inflight_at(const std::vector<Inflight>& v, std::uint64_t x) noexcept {
  for (auto& b : v)
    if (b.x == x) return &b;
  return nullptr;
}

bool scannable(const Image& img) noexcept {
  return img.tail != 0 && img.tail - img.window_lo() <= kMaxScanWindow;
}

// good[p - lo]: the framing from p reaches tail - 1 exactly (skipping recorded in-flight
// batches), through RC bytes that are 0 or accounted for. Computed from the end, since
// a message only points forward.
std::vector<std::uint8_t> chain_map(const Image& img, const std::vector<Inflight>& inflight) {
  std::uint64_t lo = img.window_lo(), t = img.tail;
  if (!scannable(img)) return {};
  std::vector<std::uint64_t> held = reader_positions(img);
  std::vector<std::uint8_t> good(static_cast<std::size_t>(t - lo), 0);
  std::uint8_t* g = good.data();  // indexed by p - lo, which the loop keeps inside [0, t - lo)
  g[t - 1 - lo] = 1;
  // One pass over every position of the window: the area offset of p is stepped down
  // with p, not divided out per byte.
  const std::uint8_t* a = img.area();
  const std::uint64_t size = img.area_size;
  std::uint64_t off = (t - 1) % size;  // of p + 1
  for (std::uint64_t p = t - 1; p-- > lo;) {
    const std::uint64_t next = off;
    off = off ? off - 1 : size - 1;
    std::uint8_t rc = a[off];
    if (rc == kRcWriting) {
      if (const Inflight* b = inflight_at(inflight, p)) g[p - lo] = g[b->end - 1 - lo];
      continue;
    }
    if (rc != 0 && std::find(held.begin(), held.end(), p) == held.end()) continue;
    Frame f = frame_from(img, p, next, t - 1);
    if (f.span) g[p - lo] = g[p + f.span - lo];
  }
  // Never resynchronise inside a recorded batch: its bytes may be half written.
  for (auto& b : inflight)
    for (std::uint64_t p = b.x + 1; p + 1 < b.end; ++p) good[p - lo] = 0;
  return good;
}

// Where a rebuilt head starts: the oldest position from which the framing reaches
// the tail, then past leading "00 00" pairs. Those read as empty messages, but a run
// of them is far more likely area never written (a HAProxy ring that has not wrapped,
// zeros behind a damaged tail) than messages without payload; skipping them loses no
// content.
std::uint64_t rebuilt_head(const Image& img, const std::vector<std::uint8_t>& good) noexcept {
  const std::uint64_t lo = img.window_lo(), limit = img.tail - 1;
  std::uint64_t p = lo;
  while (p < limit && !good[p - lo]) ++p;
  while (p + 2 <= limit && img.at(p) == 0 && img.at(p + 1) == 0 && good[p + 2 - lo]) p += 2;
  return p;
}

}  // namespace ringlog::dump::detail
