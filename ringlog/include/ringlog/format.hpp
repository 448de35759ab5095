// On-disk layout of a ringlog ring file, format version 1 (docs/FORMAT.md).
// Every offset here is asserted against the document; change both or neither.
// Shared fields live in the mapped file; nothing process-private may be stored here.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ringlog::format {

inline constexpr std::uint64_t kMagic = 0x31474f4c474e4952ULL;  // "RINGLOG1" little-endian
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::uint32_t kByteOrderMark = 0x01020304;
inline constexpr std::uint64_t kTailLock = 1ULL << 63;  // top bit of tail = writer lock
inline constexpr std::uint64_t kPosMask = kTailLock - 1;

inline constexpr std::uint8_t kRcWriting = 0xFF;  // readers-count byte: a writer fills what follows
inline constexpr std::uint8_t kRcMaxReaders = 0xFE;
inline constexpr std::uint32_t kRcNotRecorded = 0x100;  // owner_saved_rc: no count saved yet
inline constexpr std::uint64_t kNoPos = ~0ULL;          // ReaderSlot::pos: no RC byte held yet

inline constexpr unsigned kWriterSlots = 256;
inline constexpr unsigned kReaderSlots = 64;
inline constexpr std::size_t kControlSize = 512;

// Message kinds, carried in the two low bits of the varint length word:
// word = payload_length << 2 | kind.
enum class MsgKind : std::uint8_t {
  data = 0,    // an application message
  notice = 1,  // written by the ring itself (drops, recoveries); text payload
  pad = 2,     // discarded bytes (a torn batch of a dead writer); readers skip it
};
inline constexpr std::uint64_t kKindBits = 2;
inline constexpr std::uint64_t kKindMask = (1u << kKindBits) - 1;

// A pid-and-start-time pair names a process across pid reuse.
// Owner word of the tail lock: pid << 32 | (writer slot + 1); 0 = not recorded.
inline constexpr std::uint64_t owner_word(std::uint32_t pid, std::uint32_t slot) {
  return (std::uint64_t{pid} << 32) | (slot + 1);
}

struct alignas(64) WriterSlot {                // one per writing thread, 64 bytes
  std::atomic<std::uint32_t> pid;              // 0: free
  std::atomic<std::uint32_t> tid;              // kernel thread id
  std::atomic<std::uint64_t> start_time;       // process start time (clock ticks since boot)
  std::atomic<std::uint64_t> inflight_pos;     // RC position + 1 of a batch being copied; 0: none
  std::atomic<std::uint64_t> inflight_end;     // tail after that batch
  std::atomic<std::uint32_t> saved_rc;         // readers count to restore at inflight_pos - 1
  std::uint32_t reserved0;
  std::atomic<std::uint64_t> batches;          // batches this thread carried as leader
  std::uint8_t reserved1[16];
};

enum class ReaderMode : std::uint32_t { none = 0, pinned = 1 };

struct alignas(64) ReaderSlot {                // one per pinned reader, 64 bytes
  std::atomic<std::uint32_t> pid;              // 0: free
  std::atomic<std::uint32_t> mode;             // ReaderMode
  std::atomic<std::uint64_t> start_time;       // process start time
  std::atomic<std::uint64_t> pos;              // absolute position of the RC byte it holds
  std::atomic<std::uint64_t> last_active_ns;   // CLOCK_REALTIME of attach or last wait
  std::atomic<std::uint64_t> msgs_read;
  std::atomic<std::uint64_t> bytes_read;
  std::atomic<std::uint64_t> next_pos;         // position it is moving to (+1); 0: none
  std::uint8_t reserved[8];
};

struct Header {
  // -- 0: identity, written once at creation (before the file is renamed into place)
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t byte_order;      // kByteOrderMark as written by the creator
  std::uint8_t word_size;        // sizeof(void*) of the creator
  std::uint8_t pos_size;         // sizeof(std::uint64_t) == 8
  std::uint16_t writer_slots;    // kWriterSlots
  std::uint32_t header_len;      // offset of the area
  std::uint64_t area_size;       // bytes in the area
  std::uint64_t created_ns;      // CLOCK_REALTIME at creation
  std::uint32_t creator_pid;
  std::uint32_t flags;           // reserved, 0
  std::uint16_t reader_slots;    // kReaderSlots
  std::uint16_t reserved0;
  std::uint32_t max_msg_len;     // per-message truncation length; 0: only the ring's maximum
  std::uint64_t instance_id;     // random at creation: a recreated ring has a new one

  // -- 64: tail line; the counters here are written only by the tail-lock holder
  alignas(64) std::atomic<std::uint64_t> tail;
  std::atomic<std::uint64_t> msgs_written;
  std::atomic<std::uint64_t> bytes_written;  // message bytes, framing included
  std::atomic<std::uint64_t> batches;
  std::atomic<std::uint64_t> pending_drop_msgs;  // drops not yet announced in-band
  std::atomic<std::uint64_t> pending_drop_bytes;
  // The tail-lock owner shares the tail's line: the holder has that line anyway.
  std::atomic<std::uint64_t> owner;                  // owner_word(), 0 when unknown
  std::atomic<std::uint32_t> owner_saved_rc;         // 0x100+: not recorded yet
  std::atomic<std::uint32_t> pinned;  // pinned readers attached (incremented under the tail lock)

  // -- 128: head line, written only by the tail-lock holder
  alignas(64) std::atomic<std::uint64_t> head;

  // -- 192: recovery log
  alignas(64) std::atomic<std::uint64_t> owner_since_ns;  // time of the last lock recovery

  // -- 256: wake-ups
  alignas(64) std::atomic<std::uint32_t> futex;      // bumped on wake
  std::atomic<std::uint32_t> waiters;                // readers sleeping on futex
  std::atomic<std::uint32_t> waking;                 // a writer is waking readers
  std::atomic<std::uint32_t> wake_again;             // more data came while waking

  // -- 320: rare-path counters (atomic adds)
  alignas(64) std::atomic<std::uint64_t> msgs_dropped;
  std::atomic<std::uint64_t> bytes_dropped;
  std::atomic<std::uint64_t> lock_waits;       // leaders that found the tail locked
  std::atomic<std::uint64_t> msgs_truncated;
  std::atomic<std::uint64_t> lock_recoveries;  // dead tail-lock owners recovered
  std::atomic<std::uint64_t> torn_discarded;   // torn batches of dead writers discarded
  std::atomic<std::uint64_t> readers_released; // pins of dead readers released
  std::atomic<std::uint64_t> msgs_refused;     // larger than the ring can ever hold
  std::atomic<std::uint64_t> writer_waits;     // batches that waited for a writer still copying
  std::uint8_t reserved_counters[120];          // room for more rare-path counters

  // -- 512: control area for the layers above (records: tag mask, tracing)
  alignas(64) std::uint8_t control[kControlSize];

  // -- 1024: reserved
  std::uint8_t reserved1[3072];

  // -- 4096: writer slots, then reader slots
  WriterSlot writers[kWriterSlots];
  ReaderSlot readers[kReaderSlots];
};

inline constexpr std::size_t kHeaderLen = 24576;
inline constexpr std::size_t kMinAreaSize = 4096;
inline constexpr std::uint64_t kMaxAreaSize = 1ULL << 40;

// The offsets documented in docs/FORMAT.md.
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared 64-bit atomics must be lock-free");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "shared 32-bit atomics must be lock-free");
static_assert(sizeof(std::atomic<std::uint64_t>) == 8, "atomic words must have their plain size in the file");
static_assert(sizeof(WriterSlot) == 64 && sizeof(ReaderSlot) == 64, "slots are one cache line each");
static_assert(offsetof(Header, magic) == 0);
static_assert(offsetof(Header, version) == 8);
static_assert(offsetof(Header, byte_order) == 12);
static_assert(offsetof(Header, word_size) == 16);
static_assert(offsetof(Header, header_len) == 20);
static_assert(offsetof(Header, area_size) == 24);
static_assert(offsetof(Header, created_ns) == 32);
static_assert(offsetof(Header, creator_pid) == 40);
static_assert(offsetof(Header, flags) == 44);
static_assert(offsetof(Header, reader_slots) == 48);
static_assert(offsetof(Header, max_msg_len) == 52);
static_assert(offsetof(Header, instance_id) == 56);
static_assert(offsetof(Header, tail) == 64, "tail has its own cache line");
static_assert(offsetof(Header, pending_drop_bytes) == 104);
static_assert(offsetof(Header, head) == 128, "head and tail must be a cache line apart");
static_assert(offsetof(Header, owner) == 112, "the lock owner rides on the tail's cache line");
static_assert(offsetof(Header, owner_saved_rc) == 120);
static_assert(offsetof(Header, pinned) == 124);
static_assert(offsetof(Header, owner_since_ns) == 192);
static_assert(offsetof(Header, futex) == 256);
static_assert(offsetof(Header, wake_again) == 268);
static_assert(offsetof(Header, msgs_dropped) == 320);
static_assert(offsetof(Header, msgs_refused) == 376);
static_assert(offsetof(Header, writer_waits) == 384);
static_assert(offsetof(Header, control) == 512);
static_assert(offsetof(Header, writers) == 4096);
static_assert(offsetof(Header, readers) == 4096 + 64 * kWriterSlots);
static_assert(sizeof(Header) == kHeaderLen, "the area starts right after the header");

// Varint (HAProxy's encoding): values < 240 take one byte; otherwise the first byte is
// 0xF0 | (v & 0x0F), then v = (v - 0xF0) >> 4 in 7-bit groups, 0x80 meaning "more".
inline constexpr std::size_t kVarintMax = 10;

constexpr std::size_t varint_size(std::uint64_t v) {
  if (v < 240) return 1;
  std::size_t n = 1;
  v = (v - 240) >> 4;
  while (v >= 128) {
    ++n;
    v = (v - 128) >> 7;
  }
  return n + 1;
}

// Writes v at out (at least varint_size(v) bytes); returns the bytes written.
inline std::size_t varint_encode(std::uint64_t v, std::uint8_t* out) {
  if (v < 240) {
    out[0] = static_cast<std::uint8_t>(v);
    return 1;
  }
  std::size_t n = 0;
  out[n++] = static_cast<std::uint8_t>(v | 240);
  v = (v - 240) >> 4;
  while (v >= 128) {
    out[n++] = static_cast<std::uint8_t>(v | 128);
    v = (v - 128) >> 7;
  }
  out[n++] = static_cast<std::uint8_t>(v);
  return n;
}

// The varint of v packed into a word as it is laid out in memory on a little-endian
// machine (its first byte lowest), for one 8-byte store; n gets its length. For
// values whose varint fits 8 bytes (v < 2^53, as every ring's framing words: a payload
// is smaller than the area).
inline std::uint64_t varint_pack(std::uint64_t v, std::size_t& n) {
  if (v < 240) {
    n = 1;
    return v;
  }
  std::uint64_t out = (v | 240) & 0xFF;
  unsigned shift = 8;
  v = (v - 240) >> 4;
  while (v >= 128) {
    out |= ((v | 128) & 0xFF) << shift;
    shift += 8;
    v = (v - 128) >> 7;
  }
  n = shift / 8 + 1;
  return out | (v << shift);
}

// Decodes from a byte source `at(i)`; returns the bytes used, 0 if malformed or longer
// than `avail`. Works on wrapped ring areas through the accessor.
template <class At>
std::size_t varint_decode(At&& at, std::size_t avail, std::uint64_t& v) {
  if (avail == 0) return 0;
  std::uint8_t b = at(0);
  v = b;
  if (b < 240) return 1;
  unsigned shift = 4;
  for (std::size_t i = 1; i < kVarintMax && i < avail; ++i) {
    b = at(i);
    v += std::uint64_t{b} << shift;
    if (b < 128) return i + 1;
    shift += 7;
  }
  return 0;
}

}  // namespace ringlog::format
