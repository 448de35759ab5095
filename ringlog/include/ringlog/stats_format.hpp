// On-disk layout of a ringlog stats file, format version 1 (docs/FORMAT-stats.md).
// Every offset here is asserted against the document; change both or neither.
// Shared fields live in the mapped file; nothing process-private may be stored here.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ringlog::stats::format {

inline constexpr std::uint64_t kMagic = 0x3153544154534c52ULL;  // "RLSTATS1" little-endian
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::uint32_t kByteOrderMark = 0x01020304;
inline constexpr std::uint32_t kHeaderLen = 4096;
inline constexpr char kFileName[] = "stats";  // beside the ring file in an instance directory

// Name limits, including the terminating NUL.
inline constexpr std::size_t kKindLen = 16;    // "MAIN", "VBE"
inline constexpr std::size_t kIdentLen = 48;   // "" or a backend name
inline constexpr std::size_t kFieldLen = 32;   // "client_req"
inline constexpr std::size_t kDescLen = 216;   // one-line description

// Hard bounds a reader accepts (a writer picks its sizes below them).
inline constexpr std::uint32_t kMaxGroupsLimit = 1u << 16;
inline constexpr std::uint32_t kMaxCountersLimit = 1u << 20;
inline constexpr std::uint32_t kMaxSlabsLimit = 1u << 14;

// Slab 0 is the shared "direct" slab written by set() (bitmaps, absolute gauges);
// every other slab belongs to one writer thread at a time.
inline constexpr std::uint32_t kDirectSlab = 0;

enum class GroupState : std::uint32_t { free = 0, live = 1 };

struct GroupEntry {                     // 128 bytes, one per group slot
  std::uint32_t state;                  // GroupState
  std::uint32_t first_slot;             // index of its first counter in every slab
  std::uint32_t n_counters;
  std::uint32_t reserved0;
  std::uint64_t serial;                 // increases with every group added; never reused
  char kind[kKindLen];                  // NUL-terminated
  char ident[kIdentLen];                // NUL-terminated, "" for singleton groups
  std::uint8_t reserved1[40];
};

struct DescEntry {                      // 256 bytes, one per counter slot
  char field[kFieldLen];                // NUL-terminated
  std::uint8_t type;                    // stats::Type
  std::uint8_t level;                   // stats::Level
  std::uint8_t format;                  // stats::Format
  std::uint8_t reserved[5];
  char description[kDescLen];           // NUL-terminated
};

struct SlabHeader {                     // 64 bytes, before each slab's values
  std::atomic<std::uint32_t> owner_pid; // 0: free (values stay: a reused slab keeps adding)
  std::uint32_t owner_tid;
  std::atomic<std::uint64_t> claims;    // times the slab was taken by a thread
  std::uint8_t reserved[48];
};

struct Header {
  // -- 0: identity and geometry, written once before the file is renamed into place
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t byte_order;             // kByteOrderMark as written by the creator
  std::uint8_t word_size;               // sizeof(void*) of the creator
  std::uint8_t value_size;              // 8: every value is a 64-bit word
  std::uint16_t reserved0;
  std::uint32_t header_len;             // kHeaderLen
  std::uint64_t file_size;
  std::uint64_t created_ns;             // CLOCK_REALTIME at creation
  std::uint32_t creator_pid;
  std::uint32_t flags;                  // reserved, 0
  std::uint64_t creator_start;          // process start time of the creator (/proc)
  std::uint64_t instance_id;            // random: a recreated file has a new one
  std::uint32_t max_groups;
  std::uint32_t max_counters;           // value slots per slab
  std::uint32_t max_slabs;              // including the direct slab
  std::uint32_t slab_stride;            // bytes from one slab to the next
  std::uint64_t groups_off;             // GroupEntry[max_groups]
  std::uint64_t descs_off;              // DescEntry[max_counters]
  std::uint64_t slabs_off;              // slabs: SlabHeader + uint64 values[max_counters]
  std::uint32_t group_entry_size;       // sizeof(GroupEntry)
  std::uint32_t desc_entry_size;        // sizeof(DescEntry)
  std::uint8_t reserved1[16];

  // -- 128: directory line, written by the writer process only
  alignas(64) std::atomic<std::uint64_t> generation;  // seqlock: odd while the directory changes
  std::atomic<std::uint32_t> slabs_hwm;  // slabs ever claimed (+1 for the direct slab)
  std::atomic<std::uint32_t> groups_hwm; // group entries ever used
  std::atomic<std::uint32_t> live_groups;
  std::atomic<std::uint32_t> live_counters;
  std::uint8_t reserved2[40];

  std::uint8_t reserved3[kHeaderLen - 192];
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared 64-bit atomics must be lock-free");
static_assert(sizeof(std::atomic<std::uint64_t>) == 8, "atomic words must have their plain size in the file");
static_assert(sizeof(GroupEntry) == 128, "group entries are two cache lines");
static_assert(sizeof(DescEntry) == 256, "descriptor entries are four cache lines");
static_assert(sizeof(SlabHeader) == 64, "a slab header is one cache line, so values start aligned");
static_assert(sizeof(Header) == kHeaderLen, "the header is one page");
static_assert(offsetof(Header, magic) == 0);
static_assert(offsetof(Header, version) == 8);
static_assert(offsetof(Header, byte_order) == 12);
static_assert(offsetof(Header, word_size) == 16);
static_assert(offsetof(Header, value_size) == 17);
static_assert(offsetof(Header, header_len) == 20);
static_assert(offsetof(Header, file_size) == 24);
static_assert(offsetof(Header, created_ns) == 32);
static_assert(offsetof(Header, creator_pid) == 40);
static_assert(offsetof(Header, creator_start) == 48);
static_assert(offsetof(Header, instance_id) == 56);
static_assert(offsetof(Header, max_groups) == 64);
static_assert(offsetof(Header, max_counters) == 68);
static_assert(offsetof(Header, max_slabs) == 72);
static_assert(offsetof(Header, slab_stride) == 76);
static_assert(offsetof(Header, groups_off) == 80);
static_assert(offsetof(Header, descs_off) == 88);
static_assert(offsetof(Header, slabs_off) == 96);
static_assert(offsetof(Header, group_entry_size) == 104);
static_assert(offsetof(Header, desc_entry_size) == 108);
static_assert(offsetof(Header, generation) == 128, "the directory seqlock has its own cache line");
static_assert(offsetof(Header, slabs_hwm) == 136);
static_assert(offsetof(Header, groups_hwm) == 140);
static_assert(offsetof(Header, live_groups) == 144);
static_assert(offsetof(Header, live_counters) == 148);
static_assert(offsetof(GroupEntry, serial) == 16);
static_assert(offsetof(GroupEntry, kind) == 24);
static_assert(offsetof(GroupEntry, ident) == 40);
static_assert(offsetof(DescEntry, type) == 32);
static_assert(offsetof(DescEntry, description) == 40);

// Slab stride for a given number of value slots: header line plus values, whole lines,
// so that no two slabs (no two threads) ever share a cache line.
inline constexpr std::uint64_t slab_stride_for(std::uint32_t max_counters) {
  return sizeof(SlabHeader) + ((std::uint64_t{max_counters} * 8 + 63) / 64) * 64;
}

}  // namespace ringlog::stats::format
