// Inspection and repair of a ringlog ring file's shared state: what crashed processes
// leave behind (a torn batch behind a 0xFF readers count, a tail lock nobody will
// release, a reader slot pinning the ring) and the steps that undo it. The ring's own
// recovery (writers, Ring::check_dead) and ringlog-dump --repair both use these; they
// work on any bytes laid out as a ring file (a mapping, a copy in memory, a fuzzer's
// input) and never open a file: the only system calls are those of the liveness check
// given (none with a fake one) and the clock read that dates a lock recovery.
//
// Thread safety: the calls that change bytes are the ring's recovery steps. On a ring
// that other processes use they must run with the tail lock held by the caller (as
// Ring::check_dead() does); otherwise on bytes nobody else uses (a copy, a ring whose
// processes are gone). The inspection calls only read and may run on a live ring; what
// they report may be stale by the time it is used.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "ringlog/format.hpp"

namespace ringlog::repair {

// Whether the process that recorded (pid, start_time) in the file still runs (a start
// time of 0: judge by the pid only). system_alive asks the system (kill(2) and
// /proc/PID/stat, docs/FORMAT.md §8); tests and fuzz targets pass a function of their own
// so that judging costs no system call.
using Liveness = std::function<bool(std::uint32_t pid, std::uint64_t start_time)>;
bool system_alive(std::uint32_t pid, std::uint64_t start_time) noexcept;

// Checks the header at the start of a ring file (all of its bytes, 64-byte aligned as
// a mapping is) as Ring::open and Reader::open do (docs/FORMAT.md §9): "" when it is
// usable, else what is wrong, in the words of the open error. When only the positions
// are wrong the text starts with "damaged positions": the rest of the file can still
// be read and repaired. Reads head and tail atomically; safe on a live ring.
std::string check_header(std::span<const std::uint8_t> file);

// A ring file's bytes seen as its header and message area. Holds no resources: the
// caller keeps the bytes mapped (a Ring, a mapping of its own, a buffer) while it uses
// the view. Byte accesses are relaxed atomics (positions are absolute: byte p is at
// area offset p mod size), so that a view of a live ring races with nobody by accident.
struct View {
  format::Header* hdr = nullptr;
  std::uint8_t* area = nullptr;
  std::uint64_t size = 0;  // area bytes, > 0

  // The view of a whole file, when its header is usable apart from, perhaps, its
  // positions; nullopt otherwise. why (if given) gets check_header()'s verdict.
  static std::optional<View> of(std::span<std::uint8_t> file, std::string* why = nullptr);

  std::atomic_ref<std::uint8_t> rc(std::uint64_t pos) const noexcept {
    return std::atomic_ref<std::uint8_t>(area[pos % size]);
  }
  std::uint8_t byte(std::uint64_t pos) const noexcept { return rc(pos).load(std::memory_order_relaxed); }
  void put(std::uint64_t pos, std::uint8_t v) const noexcept { rc(pos).store(v, std::memory_order_relaxed); }
};

// ---- inspection ----------------------------------------------------------------------

// The tail-lock owner named by an owner word (format::owner_word; 0 = not recorded):
// its pid, its writer slot (-1 = none) and whether it runs, judged by its pid and the
// start time in that writer slot (alive stays false when `alive` is empty: decode only).
struct LockOwner {
  std::uint32_t pid = 0;
  int slot = -1;
  bool alive = false;
};
LockOwner lock_owner(const format::Header& h, std::uint64_t owner_word, const Liveness& alive);

// A batch that a writer slot records as in flight: its first RC byte at x (0xFF while
// it is copied), the tail after it at end; the bytes [x + 1, end - 1) are the batch.
struct InflightBatch {
  unsigned slot = 0;
  std::uint32_t pid = 0;
  std::uint64_t start_time = 0;
  std::uint64_t x = 0, end = 0;
  std::uint32_t saved_rc = 0;  // the readers count it hid at x
};
// The batch writer slot `slot` (< kWriterSlots) records, if any and if the record is
// plausible: lo <= x, x + 2 <= end <= tail, end - x <= area_size. Anything else is a
// stale or damaged record, ignored (nullopt).
std::optional<InflightBatch> inflight_batch(const format::Header& h, unsigned slot, std::uint64_t lo,
                                            std::uint64_t tail) noexcept;

// ---- repair steps --------------------------------------------------------------------

// Rewrites [from, to) as pad messages (readers skip them; the framing from `from` lands
// exactly on `to`): one pad whose varint fills the room if such a length exists, else
// an empty pad and an RC byte of 0, and the rest again. Every byte after `from` up to
// `to` is written (pad payloads are zeroed); the RC byte at `from` is left to the
// caller, and so is the byte at `to`. Needs to - from >= 2 (does nothing otherwise).
void write_pad(const View& v, std::uint64_t from, std::uint64_t to) noexcept;

// Discards the torn batch of a dead writer (docs/FORMAT.md §8.2): if RC[b.x] is 0xFF
// and the batch has room for a pad (b.end >= b.x + 3), pads [b.x, b.end - 1), gives
// RC[b.x] back the readers count the writer saved (at most 254; release store) and
// counts torn_discarded. Returns whether it did. The writer slot is left to the caller
// (forget_writer).
bool discard_torn(const View& v, const InflightBatch& b) noexcept;

// Undoes what a dead tail-lock holder may have started at the unlocked tail `tail`
// (docs/FORMAT.md §8.1): if RC[tail - 1] is 0xFF it gets `readers` back (at most 254;
// release store); the owner's writer slot is forgotten if it still names the owner's
// pid; owner_saved_rc is reset to "not recorded"; lock_recoveries += 1 and
// owner_since_ns = now. The tail and owner words, the lock itself, are left to the
// caller. Returns whether RC[tail - 1] was restored.
bool undo_dead_lock(const View& v, std::uint64_t tail, const LockOwner& owner, std::uint32_t readers) noexcept;

// The live pinned readers parked at RC position p (pos == p, or moving onto it), for a
// readers count that a dead lock holder saved without recording it.
std::uint32_t live_readers_at(const View& v, std::uint64_t p, const Liveness& alive);

// Releases the pin of reader slot `slot` (< kReaderSlots), whose process is dead
// (docs/FORMAT.md §8.3): its count is taken off RC[pos] if pos lies in [head, tail),
// pinned -= 1, the slot is freed and readers_released += 1. Returns false, changing
// nothing, when a writer holds that RC byte (0xFF): try again at the next check.
bool release_reader(const View& v, unsigned slot) noexcept;

// Frees a reader slot: its identity is cleared before its pid (release), so that a
// checker never pairs a new owner's pid with the old owner's start time; pos becomes
// format::kNoPos.
void free_reader_slot(format::ReaderSlot& rs) noexcept;
// Frees a writer slot: nothing in flight, then pid = 0 (release).
void forget_writer(format::WriterSlot& ws) noexcept;

// What one dead-process check did.
struct DeadCheck {
  unsigned torn_discarded = 0;   // torn batches of dead writers padded
  unsigned writers_freed = 0;    // writer slots of dead processes with a batch recorded, freed
  unsigned readers_released = 0; // pins of dead readers released
  unsigned readers_busy = 0;     // dead readers whose RC byte a writer holds (left for next time)
  bool head_recounted = false;   // a readers count at head that no reader accounts for, reset to 0
};
// The ring's dead-process check (docs/FORMAT.md §8.2, §8.3): writer slots of dead
// processes with a batch in flight are freed (the batch padded if torn), pins of dead
// readers released, and a readers count at head that no registered reader accounts
// for reset to 0 (readers_released += 1). `alive` must say true for the caller's own
// process. Run it with the tail lock held (Ring::check_dead does), or on private bytes.
DeadCheck recover_dead(const View& v, const Liveness& alive) noexcept;

}  // namespace ringlog::repair
