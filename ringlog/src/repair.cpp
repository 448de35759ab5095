// Inspection and repair steps over a ring file's bytes (ringlog/repair.hpp): header
// validation, the torn-batch padding, undoing a dead lock holder, releasing dead
// readers, and the dead-process check built from them. Shared by the ring's own
// recovery (ring.cpp, under the tail lock) and ringlog-dump --repair; nothing here
// trusts the bytes: every position is reduced modulo the area, every loop is bounded.
#include "ringlog/repair.hpp"

#include <cinttypes>
#include <cstdio>

#include "ring_impl.hpp"

namespace ringlog {

using namespace format;

namespace detail {

std::string validate_header(const Header* hp, std::uint64_t file_size) {
  char buf[256];
  if (file_size < sizeof(Header) || !hp) {
    std::snprintf(buf, sizeof buf, "file is %" PRIu64 " bytes, smaller than a ring header (%zu)",
                  file_size, sizeof(Header));
    return buf;
  }
  const Header& h = *hp;
  if (h.magic != kMagic) {
    std::snprintf(buf, sizeof buf,
                  "bad magic 0x%016" PRIx64 ": not a ringlog ring (ringlog-dump -f reads other layouts)",
                  h.magic);
    return buf;
  }
  if (h.byte_order != kByteOrderMark) {
    if (h.byte_order == __builtin_bswap32(kByteOrderMark))
      return "written on a machine of the other byte order";
    std::snprintf(buf, sizeof buf, "bad byte-order mark 0x%08x", h.byte_order);
    return buf;
  }
  if (h.version != kVersion) {
    std::snprintf(buf, sizeof buf, "format version %u; this build reads version %u", h.version, kVersion);
    return buf;
  }
  if (h.word_size != sizeof(void*) || h.pos_size != 8) {
    std::snprintf(buf, sizeof buf, "written by a %u-bit process (position size %u); this one is %zu-bit",
                  h.word_size * 8u, h.pos_size, sizeof(void*) * 8);
    return buf;
  }
  if (h.header_len != kHeaderLen || h.writer_slots != kWriterSlots || h.reader_slots != kReaderSlots) {
    std::snprintf(buf, sizeof buf,
                  "header length %u with %u writer and %u reader slots; expected %zu, %u and %u",
                  h.header_len, h.writer_slots, h.reader_slots, kHeaderLen, kWriterSlots, kReaderSlots);
    return buf;
  }
  if (h.area_size < kMinAreaSize || h.area_size > kMaxAreaSize) {
    std::snprintf(buf, sizeof buf, "area size %" PRIu64 " out of range [%zu, %" PRIu64 "]", h.area_size,
                  kMinAreaSize, kMaxAreaSize);
    return buf;
  }
  if (h.header_len + h.area_size != file_size) {
    std::snprintf(buf, sizeof buf,
                  "inconsistent sizes: header %u + area %" PRIu64 " != file size %" PRIu64
                  " (truncated or damaged file)",
                  h.header_len, h.area_size, file_size);
    return buf;
  }
  if (h.max_msg_len > h.area_size) {
    std::snprintf(buf, sizeof buf, "max message length %u larger than the area", h.max_msg_len);
    return buf;
  }
  // head and tail move while we look: read head first, so that head <= tail holds.
  for (int attempt = 0;; ++attempt) {
    // P5: head then tail (acquire); nothing pairs (W2's head store is relaxed): a pair
    // caught mid-update fails the check and is read again.
    std::uint64_t head = h.head.load(std::memory_order_acquire);
    std::uint64_t tail = h.tail.load(std::memory_order_acquire) & kPosMask;  // P5
    if (tail > head && tail - head <= h.area_size) break;
    if (attempt == 3) {
      std::snprintf(buf, sizeof buf,
                    "damaged positions: head %" PRIu64 ", tail %" PRIu64 " (run ringlog-dump --repair)", head,
                    tail);
      return buf;
    }
  }
  return "";
}

}  // namespace detail

namespace repair {

bool system_alive(std::uint32_t pid, std::uint64_t start_time) noexcept {
  return process_alive(static_cast<pid_t>(pid), start_time);
}

std::string check_header(std::span<const std::uint8_t> file) {
  if (file.size() >= sizeof(Header) && reinterpret_cast<std::uintptr_t>(file.data()) % alignof(Header) != 0)
    return "the header is not 64-byte aligned in memory";
  const auto* h = file.size() >= sizeof(Header) ? reinterpret_cast<const Header*>(file.data()) : nullptr;
  return detail::validate_header(h, file.size());
}

std::optional<View> View::of(std::span<std::uint8_t> file, std::string* why) {
  std::string w = check_header(file);
  const bool usable = w.empty() || w.rfind("damaged positions", 0) == 0;
  if (why) *why = std::move(w);
  if (!usable) return std::nullopt;
  auto* h = reinterpret_cast<Header*>(file.data());
  return View{h, file.data() + h->header_len, h->area_size};
}

// ---- inspection

LockOwner lock_owner(const Header& h, std::uint64_t word, const Liveness& alive) {
  LockOwner o;
  o.pid = static_cast<std::uint32_t>(word >> 32);
  auto slot = static_cast<std::uint32_t>(word & 0xffffffffu) - 1;
  if (slot < kWriterSlots) o.slot = static_cast<int>(slot);
  o.alive = o.pid && alive && alive(o.pid, o.slot >= 0 ? h.writers[o.slot].start_time.load(std::memory_order_relaxed) : 0);
  return o;
}

std::optional<InflightBatch> inflight_batch(const Header& h, unsigned slot, std::uint64_t lo,
                                            std::uint64_t tail) noexcept {
  if (slot >= kWriterSlots) return std::nullopt;
  const WriterSlot& ws = h.writers[slot];
  // T3: the in-flight record (W9, relaxed): under the tail lock, L1 ordered it after
  // the dead writer's W3.
  std::uint64_t p1 = ws.inflight_pos.load(std::memory_order_relaxed);
  if (p1 == 0) return std::nullopt;
  InflightBatch b;
  b.slot = slot;
  b.x = p1 - 1;
  b.end = ws.inflight_end.load(std::memory_order_relaxed);
  // Written so that no sum can wrap: the record may be anything.
  if (b.x < lo || b.end > tail || b.end < b.x || b.end - b.x < 2 || b.end - b.x > h.area_size)
    return std::nullopt;
  b.pid = ws.pid.load(std::memory_order_relaxed);
  b.start_time = ws.start_time.load(std::memory_order_relaxed);
  b.saved_rc = ws.saved_rc.load(std::memory_order_relaxed);
  return b;
}

std::uint32_t live_readers_at(const View& v, std::uint64_t p, const Liveness& alive) {
  std::uint32_t n = 0;
  for (auto& rs : v.hdr->readers) {
    std::uint32_t pid = rs.pid.load(std::memory_order_relaxed);
    if (pid &&
        // D7: pos / next_pos (acquire); pair with R11/R5 and R7 (via R3)
        (rs.pos.load(std::memory_order_acquire) == p || rs.next_pos.load(std::memory_order_acquire) == p + 1) &&
        alive(pid, rs.start_time.load(std::memory_order_relaxed)))
      ++n;
  }
  return n;
}

// ---- repair steps

void write_pad(const View& v, std::uint64_t from, std::uint64_t to) noexcept {
  if (to < from || to - from < 2) return;
  constexpr auto kPad = static_cast<std::uint64_t>(MsgKind::pad);
  std::uint64_t pos = from;
  for (;;) {
    if (pos != from) v.put(pos, 0);  // T5: pad framing, inner RCs (relaxed), published by T6
    const std::uint64_t room = to - pos - 1;  // bytes for varint + payload
    std::size_t vl = 0;
    for (std::size_t c = 1; c <= kVarintMax && c <= room; ++c)
      if (varint_size(((room - c) << kKindBits) | kPad) == c) {
        vl = c;
        break;
      }
    if (vl) {
      std::uint8_t vb[kVarintMax];
      varint_encode(((room - vl) << kKindBits) | kPad, vb);
      for (std::size_t i = 0; i < vl; ++i) v.put(pos + 1 + i, vb[i]);
      for (std::uint64_t p = pos + 1 + vl; p < to; ++p) v.put(p, 0);
      return;
    }
    // No single varint fits exactly (rooms just past a length boundary): an empty pad
    // (one byte) and an RC byte, then the rest. Small rooms always fit one byte.
    if (room < 3) return;
    v.put(pos + 1, static_cast<std::uint8_t>(kPad));
    pos += 2;
  }
}

bool discard_torn(const View& v, const InflightBatch& b) noexcept {
  // T4: RC[x] (acquire) still 0xFF: the writer's W1 was never undone by its W4.
  if (b.end < b.x || b.end - b.x < 3 || v.rc(b.x).load(std::memory_order_acquire) != kRcWriting) return false;
  // [x+1, end-1) become pads: readers skip them, the framing stays valid.
  write_pad(v, b.x, b.end - 1);
  // T6: RC[x] = saved (release) exposes the pads; pairs with R2/H1 as W4 would have.
  v.rc(b.x).store(static_cast<std::uint8_t>(std::min<std::uint32_t>(b.saved_rc, kRcMaxReaders)),
                  std::memory_order_release);
  v.hdr->torn_discarded.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool undo_dead_lock(const View& v, std::uint64_t tail, const LockOwner& owner, std::uint32_t readers) noexcept {
  Header* h = v.hdr;
  bool restored = false;
  if (tail >= 1) {
    auto rc = v.rc(tail - 1);
    if (rc.load(std::memory_order_acquire) == kRcWriting) {  // D5: as in recover_dead_owner
      // D8: RC[t-1] = the saved count (release); pairs with R2/R3 of the readers parked there.
      rc.store(static_cast<std::uint8_t>(std::min<std::uint32_t>(readers, kRcMaxReaders)), std::memory_order_release);
      restored = true;
    }
  }
  // Its batch never got published (the tail is unchanged): forget it.
  if (owner.slot >= 0 && owner.pid && h->writers[owner.slot].pid.load(std::memory_order_relaxed) == owner.pid)
    forget_writer(h->writers[owner.slot]);
  h->owner_saved_rc.store(kRcNotRecorded, std::memory_order_relaxed);
  h->lock_recoveries.fetch_add(1, std::memory_order_relaxed);
  h->owner_since_ns.store(realtime_ns(), std::memory_order_relaxed);
  return restored;
}

bool release_reader(const View& v, unsigned slot) noexcept {
  if (slot >= kReaderSlots) return false;
  Header* h = v.hdr;
  ReaderSlot& rs = h->readers[slot];
  std::uint64_t pos = rs.pos.load(std::memory_order_acquire);  // U2: pairs with R11/R5 (pos, release)
  std::uint64_t head = h->head.load(std::memory_order_relaxed);
  std::uint64_t tail = h->tail.load(std::memory_order_relaxed) & kPosMask;
  if (pos != kNoPos) {  // else: died while attaching, before holding any RC byte
    if (pos >= head && pos < tail) {
      auto rc = v.rc(pos);
      std::uint8_t c = rc.load(std::memory_order_relaxed);
      do {
        if (c == kRcWriting) return false;  // a writer is on it; try again next round
        if (c == 0) break;
        // U3: RC decrement (release), as the reader's R4 would have; pairs with H1.
      } while (!rc.compare_exchange_weak(c, static_cast<std::uint8_t>(c - 1), std::memory_order_release,
                                         std::memory_order_relaxed));
    }
    h->pinned.fetch_sub(1, std::memory_order_release);  // U4: after the RC; pairs with W6
  }
  free_reader_slot(rs);
  h->readers_released.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void free_reader_slot(ReaderSlot& rs) noexcept {
  rs.start_time.store(0, std::memory_order_relaxed);
  rs.pos.store(kNoPos, std::memory_order_relaxed);
  rs.mode.store(0, std::memory_order_relaxed);
  rs.next_pos.store(0, std::memory_order_relaxed);
  rs.pid.store(0, std::memory_order_release);  // S4: pid last (release); pairs with S3/U1/U6
}

void forget_writer(WriterSlot& ws) noexcept {
  ws.inflight_pos.store(0, std::memory_order_relaxed);
  ws.pid.store(0, std::memory_order_release);  // S5: slot free after its record; pairs with S1
}

DeadCheck recover_dead(const View& v, const Liveness& alive) noexcept {
  DeadCheck r;
  Header* h = v.hdr;
  for (unsigned i = 0; i < kWriterSlots; ++i) {
    WriterSlot& ws = h->writers[i];
    std::uint32_t pid = ws.pid.load(std::memory_order_acquire);  // T1: pairs with S1 (claim)
    // T2: inflight_pos (relaxed, W9/W11 of that writer, ordered by L1): a batch in flight.
    if (pid == 0 || ws.inflight_pos.load(std::memory_order_relaxed) == 0 || alive(pid, ws.start_time.load(std::memory_order_relaxed))) continue;
    std::uint64_t head = h->head.load(std::memory_order_relaxed);
    std::uint64_t tail = h->tail.load(std::memory_order_relaxed) & kPosMask;
    if (auto b = inflight_batch(*h, i, head, tail); b && discard_torn(v, *b)) ++r.torn_discarded;
    forget_writer(ws);  // torn or not: its batch is over
    ++r.writers_freed;
  }
  for (unsigned i = 0; i < kReaderSlots; ++i) {
    ReaderSlot& rs = h->readers[i];
    std::uint32_t pid = rs.pid.load(std::memory_order_acquire);  // U1: pairs with S3 (claim)
    if (pid == 0 || alive(pid, rs.start_time.load(std::memory_order_relaxed))) continue;
    if (release_reader(v, i)) ++r.readers_released;
    else ++r.readers_busy;
  }
  // A readers count at head that no live reader accounts for (a reader died in the
  // middle of a move) would pin the ring forever: recount it.
  std::uint64_t head = h->head.load(std::memory_order_relaxed);
  auto rc = v.rc(head);
  std::uint8_t c = rc.load(std::memory_order_acquire);  // U5: RC[head]; pairs with R3/R10 (increments)
  if (c != 0 && c != kRcWriting) {
    unsigned live = 0;
    for (auto& rs : h->readers) {
      std::uint32_t pid = rs.pid.load(std::memory_order_acquire);  // U6: pairs with S3/S4
      // U7: next_pos, then U8: pos (acquire): pair with R6 then R5 (stored pos first,
      // next_pos = 0 second), so a reader between the two halves of a move is counted.
      std::uint64_t next = rs.next_pos.load(std::memory_order_acquire);
      std::uint64_t at = rs.pos.load(std::memory_order_acquire);  // U8
      if (pid && (at == head || next == head + 1)) ++live;
    }
    // U9: RC[head] CAS v -> 0 (acq_rel): fails if any reader moved meanwhile.
    if (live == 0 && rc.compare_exchange_strong(c, 0, std::memory_order_acq_rel)) {
      h->readers_released.fetch_add(1, std::memory_order_relaxed);
      r.head_recounted = true;
    }
  }
  return r;
}

}  // namespace repair
}  // namespace ringlog
