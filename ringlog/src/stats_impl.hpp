// Process-private state of the stats writer and readers (stats.cpp, stats_reader.cpp).
// Nothing here is in the file. Every access to shared words of the mapping goes through
// relaxed or ordered atomics: the file is read concurrently by other processes.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ringlog/stats.hpp"
#include "ringlog/stats_format.hpp"

namespace ringlog::stats::detail {

// A mapped stats file (read-write for the writer, read-only for readers).
struct FileMap {
  std::string path;
  void* base = nullptr;
  std::uint64_t size = 0;
  dev_t dev = 0;
  ino_t ino = 0;

  FileMap() = default;
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;
  ~FileMap();
  void map(const std::string& p, bool writable);  // throws Error
  bool stale() const;                             // path now names another file, or none
};

// Checks a header found in a file of file_size bytes; "" when good, else what is wrong.
std::string validate_header(const format::Header& h, std::uint64_t file_size);

// Word-wise copies to and from the mapping (n a multiple of 8, both 8-aligned): loads
// acquire, stores release (the directory seqlock, see stats.cpp).
void load_words(void* dst, const void* src, std::size_t n) noexcept;
void store_words(void* dst, const void* src, std::size_t n) noexcept;

// A slab value, read whole (acquire: keeps the seqlock re-check after it).
inline std::uint64_t load_value(const std::uint64_t& w) noexcept {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(w)).load(std::memory_order_acquire);  // SR2
}

// A string field of the file, bounded and made printable (the file is not trusted).
std::string clean_string(const char* p, std::size_t cap);

struct StatsImpl : std::enable_shared_from_this<StatsImpl> {
  FileMap m;
  format::Header* hdr = nullptr;
  format::GroupEntry* groups = nullptr;
  format::DescEntry* descs = nullptr;
  std::uint8_t* slabs = nullptr;
  std::uint64_t stride = 0;
  std::uint64_t key = 0;  // process-unique, never reused: thread caches compare it

  std::mutex mu;                          // directory changes and slab claims
  std::vector<std::uint8_t> slot_used;    // per counter slot
  std::vector<std::string> group_names;   // per group entry; "" when free
  // Per group entry: its slots as this process assigned them. Removal uses this copy,
  // never the shared table, which any process that maps the file could have damaged.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> group_slots;
  std::vector<std::uint32_t> free_slabs;  // released by threads that exited
  std::uint32_t next_slab = 1;            // slab 0 is the direct slab
  std::uint64_t next_serial = 1;

  format::SlabHeader* slab_header(std::uint32_t s) const noexcept {
    return reinterpret_cast<format::SlabHeader*>(slabs + s * stride);
  }
  std::uint64_t* slab_values(std::uint32_t s) const noexcept {
    return reinterpret_cast<std::uint64_t*>(slabs + s * stride + sizeof(format::SlabHeader));
  }
  // Under mu. Returns a slab index, or the direct slab when none is left.
  std::uint32_t claim_slab() noexcept;
  void release_slab(std::uint32_t s) noexcept;
  void remove_group(std::uint32_t entry) noexcept;
  void begin_change() noexcept;  // seqlock: generation odd
  void end_change() noexcept;    // seqlock: generation even again
};

}  // namespace ringlog::stats::detail
