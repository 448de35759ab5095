// ringlog-dump's walk: the messages from head to tail of an image, torn and in-flight
// batches skipped whole, damage stopping the walk or (with scan) skipped to the next
// boundary from which the framing reaches the tail. On a live ring, copies that head
// overtook meanwhile are dropped and counted as lost. Reads only.
#include <algorithm>
#include <atomic>
#include <cinttypes>

#include "dump.hpp"
#include "framing.hpp"

namespace ringlog::dump {

using namespace format;
using namespace detail;

WalkResult walk(const Image& img, const WalkOptions& o) {
  WalkResult w;
  const std::uint64_t t = img.tail;
  if (!img.tail_ok || t == 0 || img.area_size == 0) {
    w.stop_reason = img.tail_ok ? std::string("no tail") : img.positions_why;
    return w;
  }
  const std::uint64_t limit = t - 1;
  const std::uint64_t lo = img.window_lo();
  std::vector<Inflight> inflight = inflight_batches(img);
  std::vector<std::uint8_t> good;
  bool have_good = false;
  auto need_good = [&] {
    if (!have_good) {
      good = chain_map(img, inflight);
      have_good = true;
    }
    return !good.empty();
  };
  auto first_good = [&](std::uint64_t from) -> std::uint64_t {
    for (std::uint64_t p = std::max(from, lo); p < t; ++p)
      if (good[p - lo]) return p;
    return limit;
  };

  std::uint64_t pos;
  if (img.positions_ok) {
    pos = img.head;
  } else {
    if (!need_good()) {
      w.stop_reason = img.positions_why + "; the area is too large to scan";
      return w;
    }
    pos = rebuilt_head(img, good);
    w.head_rebuilt = true;
  }
  w.start = pos;
  const bool live = img.layout == Layout::ringlog && o.live_recheck && img.positions_ok;  // a bad head is no guide
  auto damage = [&](std::uint64_t at, const std::string& why) -> bool {
    if (!o.scan || !need_good()) {
      // HAProxy files hold offsets, not positions: name the byte as they would.
      w.stop_reason = why + (is_haproxy(img.layout) ? fmt(" at offset %" PRIu64, at % img.area_size)
                                                    : fmt(" at position %" PRIu64, at));
      return false;
    }
    std::uint64_t q = first_good(at + 1);
    w.skipped.push_back({at, q, why});
    pos = q;
    return true;
  };

  std::uint64_t listed = 0;  // messages found (kept in w.messages unless !keep_messages)
  // A message takes at least two bytes (RC and length): room for that many up front, up
  // to a bound, saves the vector's regrowths (~9 % of a repair of a small area).
  if (o.keep_messages && pos < limit)
    w.messages.reserve(static_cast<std::size_t>(std::min<std::uint64_t>({(limit - pos) / 2 + 1, o.max_messages, 4096})));
  while (pos < limit && listed < o.max_messages) {
    if (live) {
      std::uint64_t h = img.hdr().head.load(std::memory_order_acquire);  // P1
      if (h > pos) {
        h = std::min(h, limit);
        w.lost_bytes += h - pos;
        pos = h;
        continue;
      }
    }
    const std::uint64_t off = pos % img.area_size;  // of the RC byte; pos < limit
    std::uint8_t rc = img.area()[off];
    if (rc == kRcWriting) {
      if (const Inflight* b = inflight_at(inflight, pos)) {
        w.skipped.push_back({pos, b->end - 1,
                             b->dead ? fmt("torn batch of dead writer pid %u (slot %u)", b->pid, b->slot)
                                     : fmt("batch in flight (writer pid %u, slot %u)", b->pid, b->slot)});
        pos = b->end - 1;
        continue;
      }
      if (!damage(pos, "RC 0xFF with no writer record (a torn or in-flight batch)")) break;
      continue;
    }
    Frame f = frame_from(img, pos, off + 1 == img.area_size ? 0 : off + 1, limit);
    if (f.span == 0) {
      if (!damage(pos, "bad framing")) break;
      continue;
    }
    if (f.kind == MsgKind::pad || f.raw_kind == 3) {
      ++w.pads;
      w.pad_bytes += f.span;
      pos += f.span;
      continue;
    }
    if (!o.keep_messages) {
      ++listed;
      pos += f.span;
      continue;
    }
    Message& m = w.messages.emplace_back();  // built in place: a zeroed area is thousands of messages
    m.pos = pos;
    m.rc = rc;
    m.kind = f.kind;
    if (f.len) m.payload = copy_payload(img, pos + 1 + f.vl, f.len);
    if (live) {
      std::atomic_thread_fence(std::memory_order_acquire);  // P2
      std::uint64_t h = img.hdr().head.load(std::memory_order_relaxed);
      if (h > pos) {  // overwritten while copied: the next round counts the loss
        w.messages.pop_back();
        continue;
      }
    }
    ++listed;
    pos += f.span;
  }
  w.end = pos;
  w.complete = pos == limit;
  if (!w.complete && w.stop_reason.empty() && listed >= o.max_messages) w.stop_reason = "message limit";
  return w;
}

}  // namespace ringlog::dump
