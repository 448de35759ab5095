// Readers of a ring: passive (read-only mapping, copy then re-check head, may lose)
// and pinned (registered, holds the readers-count byte of its position, never loses).
// A reader must never return bytes that a writer may have been changing meanwhile.
//
// Ordered accesses carry a label at the access saying what it pairs with; the table
// of all labels is docs/RING.md section 3. Prefixes here: R readers (both kinds, and
// the pinned reader's moves, attach and detach), P passive reader, S reader slots,
// K wake-ups. The pairings the read path rests on:
//  R1 tail (acquire)        <-  W3 (writer unlocks at the new tail, release)
//  R2 RC[pos] (acquire)     <-  W4/T6 (batch exposed, release); 0xFF: stop
//  R3 RC[next]++ then R4 RC[pos]-- : never holding neither; R4 (release) -> H1
//  R5 pos, then R6 next_pos = 0 (release)  ->  U7/U8 (recount at head), D7
//  P1 head (acquire), copy a batch, P2 fence(acquire) + head  <-  W2 (head, fence(release))
//  K1 waiters++ (seq_cst) before the last look  <->  W5 (fence, waiters)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "ring_impl.hpp"

namespace ringlog {

using namespace format;
using detail::Backoff;

struct Reader::Impl {
  std::shared_ptr<Ring::Impl> ring;        // pinned readers: the read-write ring
  std::unique_ptr<detail::Mapping> own;    // passive readers: their read-only mapping
  const detail::Mapping* m = nullptr;
  ReaderKind kind = ReaderKind::passive;
  std::uint64_t pos = 0;
  std::uint64_t lost_total = 0;
  int slot = -1;
  unsigned idle = 0;  // consecutive empty polls (passive back-off)
  std::uint64_t known_tail = 0;  // a tail loaded earlier (acquire): no need to reload below it

  // A passive reader copies messages in batches: every complete message from pos up to
  // the tail it loaded (at most kBatchBytes of the area), then one P2 re-check of head
  // for all of them; next() hands them out from this private copy. Head is then loaded
  // twice per batch rather than twice per message: each load pulls the head line from
  // the writer, who stores it for every batch it writes, and the writer's next store
  // then waits for the line to come back.
  static constexpr std::uint64_t kBatchBytes = 64 * 1024;
  struct Staged {
    std::uint64_t pos;   // its RC byte's position
    std::size_t off;     // payload in stage[off, off + len)
    std::size_t len;
    MsgKind kind;
  };
  std::vector<std::byte> stage;
  std::vector<Staged> staged;
  std::size_t served = 0;       // staged[served..] not handed out yet
  std::uint64_t stage_end = 0;  // the position after the batch (pads included)
  bool has_staged() const noexcept { return served < staged.size(); }
  bool fetch_passive(ReadResult& res);

  // The tail to read up to; reloaded (R1) only once the reader has caught up with the
  // last one it loaded, so that it does not pull the writers' tail line per message.
  std::uint64_t tail_for(std::uint64_t p) noexcept {
    // R1: tail.load(acquire); pairs with W3: below it, room was reserved and the
    // trailing RC written (W8).
    if (p + 1 >= known_tail) known_tail = m->hdr->tail.load(std::memory_order_acquire) & kPosMask;
    return known_tail;
  }

  // The framing of the message whose RC byte is at p, once one is complete there.
  struct Frame {
    bool ready = false;       // a whole message follows p (tail past it, RC not 0xFF)
    std::uint64_t t = 0;      // the tail it was checked against
    std::size_t vl = 0;       // varint bytes; 0: malformed
    std::uint64_t word = 0;   // len << 2 | kind
    std::uint64_t len() const noexcept { return word >> kKindBits; }
    std::uint64_t next(std::uint64_t p) const noexcept { return p + 1 + vl + len(); }
    bool framed(std::uint64_t p, std::uint64_t size) const noexcept {
      return vl != 0 && len() <= size && next(p) < t;
    }
  };
  Frame frame_at(std::uint64_t p) noexcept {
    Frame f;
    f.t = tail_for(p);
    if (p + 1 >= f.t) return f;
    // R2: RC[p].load(acquire): 0xFF (W1) means a batch is being written, stop; any other
    // value came from W4/T6/D8 (release) or a reader RMW in their release sequence.
    if (m->rc(p).load(std::memory_order_acquire) == kRcWriting) return f;
    f.ready = true;
    f.vl = varint_decode([&](std::size_t i) { return m->byte(p + 1 + i); },
                         static_cast<std::size_t>(std::min<std::uint64_t>(kVarintMax, f.t - p - 1)), f.word);
    return f;
  }

  ~Impl() { detach(); }
  void attach(StartAt start);
  void detach() noexcept;
  bool has_data() const noexcept;
  ReadResult next_passive(std::vector<std::byte>& out);
  ReadResult next_pinned(std::vector<std::byte>& out);
};

namespace {

// A bounded wait for a writer to leave an RC byte: at most `steps` back-off pauses and
// the ring's reader_wait_ns (OpenOptions::reader_wait), whichever ends first.
struct HeldWait {
  Backoff b;
  std::uint64_t limit_ns, deadline = 0;
  unsigned steps;
  HeldWait(const Ring::Impl& r, unsigned max_steps) noexcept : limit_ns(r.reader_wait_ns), steps(max_steps) {}
  bool pause() noexcept {  // false: waited long enough
    if (b.n > steps || limit_ns == 0) return false;
    if (b.n >= 8) {  // past the spins: the clock is cheap next to a yield or a sleep
      std::uint64_t now = monotonic_ns();
      if (deadline == 0) deadline = now + limit_ns;
      if (now >= deadline) return false;
    }
    b.pause();
    return true;
  }
};

// Increments the readers count at pos, waiting while a writer holds it (0xFF).
// Returns false if it stayed 0xFF for too long (the caller checks for dead writers).
bool rc_acquire(const Ring::Impl& r, const detail::Mapping& m, std::uint64_t pos) noexcept {
  auto rc = m.rc(pos);
  HeldWait w(r, 200);
  std::uint8_t v = rc.load(std::memory_order_relaxed);
  for (;;) {
    if (v == kRcWriting || v == kRcMaxReaders) {
      if (!w.pause()) return false;
      v = rc.load(std::memory_order_relaxed);
      continue;
    }
    // R3: RC[next] increment (acq_rel), never on 0xFF: acquire pairs with W4 (the batch
    // there is complete); release publishes R7 to D7/U7. Serialised with W1's exchange.
    if (rc.compare_exchange_weak(v, static_cast<std::uint8_t>(v + 1), std::memory_order_acq_rel,
                                 std::memory_order_relaxed))
      return true;
  }
}

void rc_release(const detail::Mapping& m, std::uint64_t pos) noexcept {
  auto rc = m.rc(pos);
  Backoff b;
  std::uint8_t v = rc.load(std::memory_order_relaxed);
  for (;;) {
    if (v == kRcWriting) {  // a writer saved our count; it puts it back shortly
      b.pause();
      v = rc.load(std::memory_order_relaxed);
      continue;
    }
    if (v == 0) return;  // already released by recovery
    // R4: RC[pos] decrement (release), never on 0xFF (a writer holds our count in its
    // saved value, W1..W4); pairs with H1: our copy is done before the bytes are reused.
    if (rc.compare_exchange_weak(v, static_cast<std::uint8_t>(v - 1), std::memory_order_release,
                                 std::memory_order_relaxed))
      return;
  }
}

long futex_wait(std::atomic<std::uint32_t>* addr, std::uint32_t val, std::chrono::milliseconds t) noexcept {
  timespec ts{static_cast<time_t>(t.count() / 1000), static_cast<long>((t.count() % 1000) * 1000000)};
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAIT, val, &ts, nullptr, 0);
}

}  // namespace

void Reader::Impl::attach(StartAt start) {
  Ring::Impl& r = *ring;
  Header* h = r.m.hdr;
  std::uint32_t pid = detail::self_pid();
  for (int pass = 0; pass < 2 && slot < 0; ++pass) {
    if (pass == 1) {  // the table is full: free the pins of dead readers first
      std::uint64_t t = r.lock_tail(-1);
      r.check_dead_locked(true);
      r.unlock_tail(t);
    }
    for (unsigned i = 0; i < kReaderSlots; ++i) {
      std::uint32_t cur = 0;
      // S3: pid CAS 0 -> ours (acq_rel) claims the slot; pairs with S4 (freed, release).
      if (h->readers[i].pid.compare_exchange_strong(cur, pid, std::memory_order_acq_rel)) {
        slot = static_cast<int>(i);
        break;
      }
    }
  }
  if (slot < 0)
    throw Error(Errc::busy, "ring " + r.m.path + ": all " + std::to_string(kReaderSlots) +
                                " pinned-reader slots are in use");
  ReaderSlot& rs = h->readers[slot];
  rs.pos.store(kNoPos, std::memory_order_relaxed);  // R8: holds no RC byte yet (U2)
  rs.mode.store(static_cast<std::uint32_t>(ReaderMode::pinned), std::memory_order_relaxed);
  rs.start_time.store(detail::self_start_time(), std::memory_order_relaxed);
  rs.msgs_read.store(0, std::memory_order_relaxed);
  rs.bytes_read.store(0, std::memory_order_relaxed);
  rs.last_active_ns.store(realtime_ns(), std::memory_order_relaxed);
  // Under the tail lock neither head nor tail moves, so the position is stable.
  HeldWait w(r, 400);
  for (;;) {
    std::uint64_t t = r.lock_tail(-1);
    std::uint64_t p = start == StartAt::oldest ? h->head.load(std::memory_order_relaxed) : t - 1;
    auto rc = r.m.rc(p);
    std::uint8_t v = rc.load(std::memory_order_relaxed);
    if (v != kRcWriting && v != kRcMaxReaders) {
      // Order matters for recovery: pinned count, then the RC byte (an RMW: other
      // pinned readers may be moving onto it), then the position. A reader that dies
      // before its position is stored leaves pos == kNoPos: recovery then touches no
      // RC byte and leaves the count high (safe: it only costs writers the slow path).
      h->pinned.fetch_add(1, std::memory_order_relaxed);  // R9: under the lock: W6 sees it after L4/L1
      // R10: RC increment (acq_rel) under the tail lock: no W1 can run meanwhile.
      while (!rc.compare_exchange_weak(v, static_cast<std::uint8_t>(v + 1), std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
      }
      rs.pos.store(p, std::memory_order_release);  // R11: our position; pairs with U2/D7
      r.unlock_tail(t);
      pos = p;
      return;
    }
    r.unlock_tail(t);  // a batch in flight at head, or too many readers: retry
    if (!w.pause()) {
      repair::free_reader_slot(rs);
      slot = -1;
      throw Error(Errc::busy, "ring " + r.m.path + ": cannot attach (too many readers at one position)");
    }
  }
}

void Reader::Impl::detach() noexcept {
  if (kind != ReaderKind::pinned || slot < 0) return;
  Header* h = ring->m.hdr;
  ReaderSlot& rs = h->readers[slot];
  if (rs.pid.load(std::memory_order_relaxed) == detail::self_pid()) {
    rc_release(*m, pos);
    h->pinned.fetch_sub(1, std::memory_order_release);  // R12: after our last RC access (R4); pairs with W6
    repair::free_reader_slot(rs);
  }
  slot = -1;
}

bool Reader::Impl::has_data() const noexcept {
  if (has_staged()) return true;
  std::uint64_t t = m->hdr->tail.load(std::memory_order_acquire) & kPosMask;  // R1
  if (pos + 1 >= t) return false;
  // P3: head (acquire): lost bytes count as something to read; only a hint, the read
  // itself re-loads head (P1).
  if (kind == ReaderKind::passive && m->hdr->head.load(std::memory_order_acquire) > pos) return true;
  return m->rc(pos).load(std::memory_order_acquire) != kRcWriting;  // R2
}

// Copies the next batch into the stage (returns true), or says why there is none:
// res is then empty, or lost (the reader fell behind head, or the framing is damaged).
bool Reader::Impl::fetch_passive(ReadResult& res) {
  const detail::Mapping& mm = *m;
  Header* h = mm.hdr;
  for (;;) {
    res = ReadResult{};
    staged.clear();
    stage.clear();
    served = 0;
    // P1: head.load(acquire) before reading: behind it, the bytes are gone (lost).
    std::uint64_t head = h->head.load(std::memory_order_acquire);
    if (pos < head) {
      res.status = ReadStatus::lost;
      res.lost = head - pos;
      res.pos = pos;
      lost_total += res.lost;
      pos = head;
      return false;
    }
    // The tail is reloaded (R1) only once the reader has caught up with the last one.
    const std::uint64_t t = tail_for(pos);
    // A batch must be copied before head reaches its start: near head (a reader about
    // a ring behind), no more than half the way to it, and always one message.
    const std::uint64_t limit = pos + std::min(kBatchBytes, (pos - head) / 2);
    std::uint64_t p = pos;
    bool damaged = false;
    while (p + 1 < t && (p == pos || p < limit)) {
      // R2: RC[p].load(acquire): 0xFF (W1) means a batch is being written, stop; any
      // other value came from W4/T6/D8 (release) or a reader RMW in their release
      // sequence: the message behind it is complete.
      if (mm.rc(p).load(std::memory_order_acquire) == kRcWriting) break;
      Frame f;
      f.t = t;
      f.vl = varint_decode([&](std::size_t i) { return mm.byte(p + 1 + i); },
                           static_cast<std::size_t>(std::min<std::uint64_t>(kVarintMax, t - p - 1)), f.word);
      if (!f.framed(p, mm.size)) {  // the batch ends before it; alone, it is examined below
        damaged = p == pos;
        break;
      }
      auto kind_bits = static_cast<std::uint8_t>(f.word & kKindMask);
      if (kind_bits < std::uint8_t(MsgKind::pad)) {  // pads and unknown kinds are skipped
        std::size_t len = static_cast<std::size_t>(f.len()), off = stage.size();
        stage.resize(off + len);
        mm.copy_out(p + 1 + f.vl, stage.data() + off, len);
        staged.push_back({p, off, len, static_cast<MsgKind>(kind_bits)});
      }
      p = f.next(p);
    }
    if (p == pos && !damaged) return false;  // nothing complete yet
    // P2: fence(acquire), then head: pairs with W2. A byte we copied that a writer
    // rewrote had a position below the head it stored before rewriting it, so a head
    // still at or below the batch's start means no byte of the batch was rewritten.
    // Past it, the whole batch is discarded (the framing we followed may be torn too)
    // and the next P1 reports it lost.
    std::atomic_thread_fence(std::memory_order_acquire);
    std::uint64_t head2 = h->head.load(std::memory_order_relaxed);
    if (head2 > pos) continue;
    if (damaged) {
      // Head did not move, yet the framing is bad: damaged ring. Skip to the tail's
      // RC byte (always a boundary) and report the bytes as lost.
      res.status = ReadStatus::lost;
      res.lost = (t - 1) - pos;
      res.pos = pos;
      lost_total += res.lost;
      pos = t - 1;
      return false;
    }
    stage_end = p;
    if (staged.empty()) {  // only pads
      pos = p;
      continue;
    }
    return true;
  }
}

ReadResult Reader::Impl::next_passive(std::vector<std::byte>& out) {
  ReadResult res;
  if (!has_staged() && !fetch_passive(res)) return res;
  const Staged& s = staged[served++];
  out.resize(s.len);
  if (s.len) std::memcpy(out.data(), stage.data() + s.off, s.len);
  res.status = ReadStatus::message;
  res.kind = s.kind;
  res.pos = s.pos;
  pos = has_staged() ? staged[served].pos : stage_end;
  return res;
}

ReadResult Reader::Impl::next_pinned(std::vector<std::byte>& out) {
  const detail::Mapping& mm = *m;
  Header* h = mm.hdr;
  ReaderSlot& rs = h->readers[slot];
  for (;;) {
    ReadResult res;
    Frame f = frame_at(pos);
    if (!f.ready) return res;
    const std::uint64_t t = f.t, word = f.word, len = f.len();
    const std::size_t vl = f.vl;
    if (!f.framed(pos, mm.size)) {
      // Our position is protected, so this is real damage: resynchronise at the tail.
      std::uint64_t q = t - 1;
      rs.next_pos.store(q + 1, std::memory_order_relaxed);  // R7: as below
      if (!rc_acquire(*ring, mm, q)) {
        rs.next_pos.store(0, std::memory_order_relaxed);
        return res;
      }
      rc_release(mm, pos);
      res.status = ReadStatus::lost;
      res.lost = q - pos;
      res.pos = pos;
      lost_total += res.lost;
      pos = q;
      rs.pos.store(q, std::memory_order_release);  // R5: as below
      rs.next_pos.store(0, std::memory_order_release);  // R6: as below
      return res;
    }
    auto kind_bits = static_cast<std::uint8_t>(word & kKindMask);
    bool deliver = kind_bits < std::uint8_t(MsgKind::pad);
    if (deliver) {
      out.resize(static_cast<std::size_t>(len));
      mm.copy_out(pos + 1 + vl, out.data(), static_cast<std::size_t>(len));
    }
    std::uint64_t q = pos + 1 + vl + len;
    // R7: next_pos = q + 1 (relaxed), published by R3's release half: a recount (U7)
    // or recovery (D7) that sees our count at q sees where it came from.
    rs.next_pos.store(q + 1, std::memory_order_relaxed);
    if (!rc_acquire(*ring, mm, q)) {  // R3: protect the next position first
      // A writer has held the next RC byte for long: maybe it died. Check, retry later.
      rs.next_pos.store(0, std::memory_order_relaxed);
      std::uint64_t lt = ring->lock_tail(-1);
      ring->check_dead_locked(true);
      ring->unlock_tail(lt);
      return res;
    }
    rc_release(mm, pos);  // R4: then leave the old one
    res.pos = pos;
    pos = q;
    // R5: pos = q (release), then R6: next_pos = 0 (release); the recount at head reads
    // next_pos then pos (U7, U8, acquire), so it always finds a moving reader.
    rs.pos.store(q, std::memory_order_release);
    rs.next_pos.store(0, std::memory_order_release);  // R6
    if (!deliver) continue;
    rs.msgs_read.store(rs.msgs_read.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    rs.bytes_read.store(rs.bytes_read.load(std::memory_order_relaxed) + len, std::memory_order_relaxed);
    res.status = ReadStatus::message;
    res.kind = static_cast<MsgKind>(kind_bits);
    return res;
  }
}

Reader Reader::open(const std::string& path, const ReaderOptions& opts) {
  if (opts.kind == ReaderKind::pinned) {
    Ring ring = Ring::open(path);
    return attach(ring, opts);
  }
  auto impl = std::make_unique<Impl>();
  impl->own = std::make_unique<detail::Mapping>();
  impl->own->map(path, false);
  impl->m = impl->own.get();
  impl->kind = ReaderKind::passive;
  const Header* h = impl->m->hdr;
  // P4: start position, head or tail - 1 (acquire); the first read re-checks with P1/R1.
  impl->pos = opts.start == StartAt::oldest ? h->head.load(std::memory_order_acquire)
                                            : (h->tail.load(std::memory_order_acquire) & kPosMask) - 1;
  return Reader(std::move(impl));
}

Reader Reader::open_memory(std::span<const std::byte> image, const ReaderOptions& opts) {
  if (opts.kind == ReaderKind::pinned)
    throw Error(Errc::invalid_arg, "ring (memory): a pinned reader attaches to a Ring (Reader::attach)");
  auto impl = std::make_unique<Impl>();
  impl->own = std::make_unique<detail::Mapping>();
  // Read-only like a passive reader's mapping of a file: nothing here writes through it.
  impl->own->over({const_cast<std::byte*>(image.data()), image.size()}, false);
  impl->m = impl->own.get();
  impl->kind = ReaderKind::passive;
  const Header* h = impl->m->hdr;
  impl->pos = opts.start == StartAt::oldest ? h->head.load(std::memory_order_acquire)  // P4: as in open
                                            : (h->tail.load(std::memory_order_acquire) & kPosMask) - 1;
  return Reader(std::move(impl));
}

Reader Reader::attach(Ring& ring, const ReaderOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->ring = ring.impl_;
  impl->m = &impl->ring->m;
  if (opts.kind == ReaderKind::pinned) {
    impl->kind = ReaderKind::pinned;
    impl->attach(opts.start);
  } else {
    impl->kind = ReaderKind::passive;
    const Header* h = impl->m->hdr;
    impl->pos = opts.start == StartAt::oldest ? h->head.load(std::memory_order_acquire)  // P4: as in open
                                              : (h->tail.load(std::memory_order_acquire) & kPosMask) - 1;
  }
  return Reader(std::move(impl));
}

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

ReadResult Reader::next(std::vector<std::byte>& out) {
  ReadResult r = impl_->kind == ReaderKind::pinned ? impl_->next_pinned(out) : impl_->next_passive(out);
  impl_->idle = r.status == ReadStatus::empty ? impl_->idle + 1 : 0;
  return r;
}

void Reader::wait(std::chrono::milliseconds timeout) {
  Impl& im = *impl_;
  Header* h = im.m->hdr;
  if (im.has_data()) return;
  if (im.kind == ReaderKind::pinned) {
    h->readers[im.slot].last_active_ns.store(realtime_ns(), std::memory_order_relaxed);
    // K1: waiters.fetch_add (seq_cst) before the last look for data (has_data: R1, R2);
    // pairs with W5 (Dekker): the writer sees us, or we see its batch.
    h->waiters.fetch_add(1, std::memory_order_seq_cst);
    std::uint32_t seq = h->futex.load(std::memory_order_seq_cst);  // K2: pairs with K6 (FUTEX_WAIT compares it)
    if (!im.has_data()) futex_wait(&h->futex, seq, timeout);
    h->waiters.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  // A passive reader may not write to the file, so it cannot ask to be woken: poll,
  // backing off from 100 us to 10 ms while the ring stays idle (varnishlog polls too).
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!im.has_data()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return;
    auto step = std::chrono::microseconds(std::min<unsigned>(100u << std::min(im.idle / 8, 7u), 10000u));
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    timespec ts{0, static_cast<long>(std::min(step, left).count() * 1000)};
    nanosleep(&ts, nullptr);
    ++im.idle;
  }
}

bool Reader::stale() const { return impl_->m->stale(); }
std::uint64_t Reader::position() const noexcept { return impl_->pos; }
std::uint64_t Reader::lost_bytes() const noexcept { return impl_->lost_total; }
std::uint64_t Reader::behind() const noexcept {
  std::uint64_t t = impl_->m->hdr->tail.load(std::memory_order_acquire) & kPosMask;  // R1: as in tail_for
  return t > impl_->pos + 1 ? t - impl_->pos - 1 : 0;
}
ReaderProgress Reader::progress() const noexcept {
  const Header* h = impl_->m->hdr;
  return {h->instance_id, impl_->pos, h->tail.load(std::memory_order_acquire) & kPosMask, impl_->m->size};  // R1
}
int Reader::slot() const noexcept { return impl_->kind == ReaderKind::pinned ? impl_->slot : -1; }
RingStats Reader::stats() const noexcept { return read_stats(*impl_->m->hdr); }
const format::Header& Reader::header() const noexcept { return *impl_->m->hdr; }

}  // namespace ringlog
