// ringlog-dump's repair: drives the library's repair steps (ringlog/repair.hpp) over an
// image, in place or on a copy. Refuses while a live writer or lock holder uses the
// ring, holds the tail lock while it works in place, discards torn batches and damage
// as pads (HAProxy layouts: by moving head), resets readers counts, frees dead slots,
// and checks that the result reads cleanly.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstring>

#include "dump.hpp"
#include "framing.hpp"
#include "ringlog/record.hpp"
#include "ringlog/repair.hpp"

namespace ringlog::dump {

using namespace format;
using namespace detail;

namespace {

void wr64(std::span<std::uint8_t> f, std::size_t off, std::uint64_t v) noexcept {
  if (off + 8 <= f.size()) std::memcpy(f.data() + off, &v, 8);
}

void put(Image& img, std::uint64_t pos, std::uint8_t v) noexcept {
  img.file[img.header_len + pos % img.area_size] = v;
}

// The ringlog-layout image as the library's repair steps see it.
repair::View view_of(Image& img) noexcept {
  return repair::View{&img.hdr_mut(), img.file.data() + img.header_len, img.area_size};
}

// Rewrites [x, q) as pad messages (ringlog layout): x and every inner RC get 0, the
// byte at q (the next good RC) is left alone. q - x >= 2.
void fill_pad(Image& img, std::uint64_t x, std::uint64_t q) noexcept {
  put(img, x, 0);
  repair::write_pad(view_of(img), x, q);
}

bool decodes(const std::string& payload) {
  BatchDecoder d(std::as_bytes(std::span(payload.data(), payload.size())));
  if (!d.valid()) return false;
  Record r;
  while (d.next(r)) {
  }
  return d.status() == DecodeStatus::ok;
}

}  // namespace

RepairStatus repair(Image& img, const RepairOptions& o, RepairReport& rep, std::string& error) {
  rep = RepairReport{};
  const bool rl = img.layout == Layout::ringlog;
  const std::uint64_t size = img.area_size;
  if (size < 2) {
    error = "area too small";
    return RepairStatus::unrecoverable;
  }
  if (!img.tail_ok || img.tail == 0) {
    error = img.tail_ok ? std::string("tail is 0: where the messages end is unknown") : img.positions_why;
    return RepairStatus::unrecoverable;
  }
  std::uint32_t me = static_cast<std::uint32_t>(::getpid());
  // -- live processes: in place, a live writer means we must not touch anything.
  if (rl && o.in_place) {
    Header& h = img.hdr_mut();
    for (unsigned i = 0; i < kWriterSlots; ++i) {
      std::uint32_t pid = h.writers[i].pid.load(std::memory_order_acquire);
      if (pid && pid != me && img.alive(pid, h.writers[i].start_time.load(std::memory_order_relaxed))) {
        error = fmt("writer process %u (slot %u) is alive; stop it, or repair a copy with -o", pid, i);
        return RepairStatus::refused;
      }
    }
    repair::LockOwner lo = lock_owner(img);
    if (img.locked && lo.pid != me && lo.alive) {
      error = fmt("the tail lock is held by live process %u; stop it, or repair a copy with -o", lo.pid);
      return RepairStatus::refused;
    }
  }

  // In place, hold the tail lock while repairing, so that a live pinned reader does
  // not attach or run its own checks meanwhile; storing the final tail releases it.
  if (rl && o.in_place && !img.locked) {
    Header& h = img.hdr_mut();
    std::uint64_t expect = img.tail_stored;
    if (!h.tail.compare_exchange_strong(expect, img.tail_stored | kTailLock, std::memory_order_acquire)) {
      error = "the ring changed while being repaired (a live process is using it)";
      return RepairStatus::refused;
    }
    h.owner.store(owner_word(me, 0xfffffffeu), std::memory_order_relaxed);
  }
  bool holding = rl && o.in_place && !img.locked;  // this process holds the tail lock
  auto give_up = [&](std::string why) {
    if (holding) {  // release the lock at the tail found
      img.hdr_mut().owner.store(0, std::memory_order_relaxed);
      img.hdr_mut().tail.store(img.tail_stored, std::memory_order_release);
    }
    error = std::move(why);
    return RepairStatus::unrecoverable;
  };

  // -- the tail lock.
  if (img.locked) {
    if (rl) {
      Header& h = img.hdr_mut();
      std::uint64_t owner = h.owner.load(std::memory_order_relaxed);
      const repair::LockOwner dead = repair::lock_owner(h, owner, {});  // its lock is stale
      std::uint64_t t = img.tail;
      // Unlike the ring's own recovery, no recount when the count was not saved: step 4
      // below sets every RC on the chain from the live readers anyway.
      std::uint32_t saved = h.owner_saved_rc.load(std::memory_order_relaxed);
      if (repair::undo_dead_lock(view_of(img), t, dead, saved < kRcNotRecorded ? saved : 0))
        rep.fixed.push_back(fmt("restored the readers count at the tail (position %" PRIu64 ") hidden by the lock holder", t - 1));
      if (o.in_place) {
        // Take the dead owner's lock over rather than release it: live pinned readers
        // must not attach while the rest is repaired. The final tail store releases it.
        h.owner.store(owner_word(me, 0xfffffffeu), std::memory_order_relaxed);
        holding = true;
      } else {
        h.owner.store(0, std::memory_order_relaxed);
        h.tail.store(t, std::memory_order_release);
      }
      rep.fixed.push_back(owner ? fmt("cleared the stale tail lock of pid %u (writer slot %d)", dead.pid, dead.slot)
                                : std::string("cleared a stale tail lock with no recorded owner"));
    } else {
      wr64(img.file, img.layout == Layout::haproxy_v2 ? 16 : 64, img.tail % size);
      rep.fixed.push_back("cleared the stale tail lock bit");
    }
    img.locked = false;
  }

  if (img.tail_rebuilt) rep.fixed.push_back(img.tail_why);

  // -- where the messages are.
  std::vector<Inflight> inflight = inflight_batches(img);
  if (!scannable(img)) return give_up("the area is too large to scan");
  // The boundary map costs a frame decode per position of the window: it is built
  // when head must be rebuilt or the walk meets damage, not for a ring that frames
  // well. Built late, it is the same map: the walk only rewrites bytes before the
  // position it has reached, and the map of a position depends on the bytes from
  // there to the tail.
  std::vector<std::uint8_t> good;
  auto map = [&]() -> const std::vector<std::uint8_t>& {
    if (good.empty()) good = chain_map(img, inflight);
    return good;
  };
  const std::uint64_t t = img.tail, lo = img.window_lo(), limit = t - 1;
  auto first_good = [&](std::uint64_t from) {
    const std::vector<std::uint8_t>& g = map();
    for (std::uint64_t p = std::max(from, lo); p < t; ++p)
      if (g[p - lo]) return p;
    return limit;
  };
  std::uint64_t head = img.head;
  if (!img.positions_ok || head < lo || head > limit) {
    std::uint64_t nh = rebuilt_head(img, map());
    rep.fixed.push_back(fmt("head was not trustworthy (%s); rebuilt by scanning for message boundaries: %" PRIu64,
                            img.positions_ok ? "outside the window" : img.positions_why.c_str(),
                            rl ? nh : nh % size));
    head = nh;
  }

  // -- walk from head, keeping what frames well, discarding what does not.
  std::vector<std::uint64_t> kept;  // RC positions of kept messages (and the tail RC)
  std::uint64_t pos = head, prev = head, discard_from = head;
  bool have_prev = false, have_discard = false, prev_counted = false;
  while (pos < limit) {
    const std::uint64_t off = pos % size;  // of the RC byte; pos < limit
    std::uint8_t rc = img.area()[off];
    const Inflight* b = rc == kRcWriting ? inflight_at(inflight, pos) : nullptr;
    Frame f = rc == kRcWriting ? Frame{} : frame_from(img, pos, off + 1 == size ? 0 : off + 1, limit);
    if (b || f.span == 0) {
      // Discard [from, q): a torn batch, or damage up to the next good boundary.
      std::uint64_t from = pos, q = b ? b->end - 1 : first_good(pos + 1);
      if (rl && q - from < 2) {  // a pad needs 2 bytes: take the message before in too
        if (have_prev) {
          from = prev;
          kept.pop_back();
          if (prev_counted) {
            --rep.kept_msgs;
            rep.kept_bytes -= pos - prev;
          }
        } else if (have_discard) {
          from = discard_from;
        }
      }
      std::uint64_t bytes = q - from;
      if (b) {
        ++rep.torn_batches;
        rep.fixed.push_back(fmt("discarded the torn batch of %s writer pid %u at %" PRIu64 " (%" PRIu64 " bytes)",
                                b->dead ? "dead" : "live", b->pid, from, bytes));
        img.hdr_mut().torn_discarded.fetch_add(1, std::memory_order_relaxed);
      } else {
        rep.fixed.push_back(fmt("discarded %" PRIu64 " damaged bytes at %" PRIu64 " (%s)", bytes,
                                rl ? from : from % size,
                                rc == kRcWriting ? "RC 0xFF with no writer record" : "bad framing"));
      }
      ++rep.discarded_msgs;
      rep.discarded_bytes += bytes;
      if (rl && bytes >= 2) {
        fill_pad(img, from, q);
      } else {
        // HAProxy's readers know no pad (nor can one byte be padded): head moves past
        // the damage, and the messages before it go too.
        for (std::size_t i = 0; i < kept.size(); ++i) {
          std::uint64_t nx = i + 1 < kept.size() ? kept[i + 1] : from;
          rep.discarded_bytes += nx - kept[i];
        }
        rep.discarded_msgs += kept.size();
        rep.kept_msgs = 0;
        rep.kept_bytes = 0;
        kept.clear();
        head = q;
      }
      have_prev = false;
      have_discard = true;
      discard_from = from;
      pos = q;
      continue;
    }
    if (f.kind == MsgKind::data && !is_haproxy(img.layout) && f.len && img.at(pos + 1 + f.vl) == kBatchMarker &&
        !decodes(copy_payload(img, pos + 1 + f.vl, f.len)))
      ++rep.bad_records;
    prev_counted = f.kind != MsgKind::pad && f.raw_kind != 3;
    if (prev_counted) {
      ++rep.kept_msgs;
      rep.kept_bytes += f.span;
    }
    kept.push_back(pos);
    prev = pos;
    have_prev = true;
    have_discard = false;
    pos += f.span;
  }
  kept.push_back(limit);

  // -- readers: RC bytes and reader slots.
  std::vector<std::pair<std::uint64_t, unsigned>> holds;  // position, live readers there
  if (rl) {
    Header& h = img.hdr_mut();
    unsigned pinned = 0;
    for (unsigned i = 0; i < kReaderSlots; ++i) {
      ReaderSlot& rs = h.readers[i];
      std::uint32_t pid = rs.pid.load(std::memory_order_relaxed);
      if (!pid) continue;
      bool a = img.alive(pid, rs.start_time.load(std::memory_order_relaxed));
      if (a && o.in_place) {
        ++pinned;
        std::uint64_t p = rs.pos.load(std::memory_order_relaxed);
        if (p != kNoPos) holds.emplace_back(p, 1);
        continue;
      }
      rep.fixed.push_back(a ? fmt("reader slot %u (live pid %u) not carried into the copy", i, pid)
                            : fmt("released reader slot %u of dead pid %u", i, pid));
      repair::free_reader_slot(rs);
      h.readers_released.fetch_add(1, std::memory_order_relaxed);
    }
    if (h.pinned.load(std::memory_order_relaxed) != pinned) {
      h.pinned.store(pinned, std::memory_order_relaxed);
    }
    // Writer slots of dead processes (or, in a copy, of everyone).
    for (unsigned i = 0; i < kWriterSlots; ++i) {
      WriterSlot& ws = h.writers[i];
      std::uint32_t pid = ws.pid.load(std::memory_order_relaxed);
      if (!pid && ws.inflight_pos.load(std::memory_order_relaxed) == 0) continue;
      if (pid && o.in_place && img.alive(pid, ws.start_time.load(std::memory_order_relaxed))) continue;
      ws.inflight_pos.store(0, std::memory_order_relaxed);
      ws.pid.store(0, std::memory_order_relaxed);
      if (pid) rep.fixed.push_back(fmt("freed writer slot %u of %s pid %u", i, o.in_place ? "dead" : "gone", pid));
    }
  }
  unsigned reset = 0;
  for (std::uint64_t k : kept) {
    unsigned want = 0;
    for (auto& [p, n] : holds)
      if (p == k) want += n;
    want = std::min(want, unsigned(kRcMaxReaders));
    if (img.at(k) != want) {
      put(img, k, static_cast<std::uint8_t>(want));
      ++reset;
    }
  }
  if (reset) rep.fixed.push_back(fmt("reset %u readers-count bytes that no live reader holds", reset));

  // -- positions.
  if (rl) {
    Header& h = img.hdr_mut();
    if (head != img.head) h.head.store(head, std::memory_order_release);
    if (holding) {
      h.owner.store(0, std::memory_order_relaxed);
      h.owner_saved_rc.store(kRcNotRecorded, std::memory_order_relaxed);
    }
    h.tail.store(t, std::memory_order_release);  // releases the lock when holding
  } else if (head != img.head || !img.positions_ok) {
    if (img.layout == Layout::haproxy_v1) {
      wr64(img.file, 24, head % size);
      wr64(img.file, 16, t - head);
    } else {
      wr64(img.file, img.layout == Layout::haproxy_v2 ? 24 : 128, head % size);
    }
    if (head != img.head && img.positions_ok)
      rep.fixed.push_back(fmt("moved head to %" PRIu64 ", past the damage", head % size));
  }
  img.head = head;
  img.positions_ok = true;
  img.positions_why.clear();

  // -- the result must read cleanly.
  WalkResult check = walk(img, WalkOptions{.scan = false, .live_recheck = false, .keep_messages = false});
  if (!check.complete) return give_up("internal: the repaired ring does not read cleanly: " + check.stop_reason);
  return rep.changed() ? RepairStatus::repaired : RepairStatus::clean;
}

}  // namespace ringlog::dump
