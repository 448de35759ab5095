// Private state shared by Log and Txn. Lives behind a unique_ptr so that a Log can
// move while its transactions keep pointing at it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "ringlog/control.hpp"
#include "ringlog/ring.hpp"

namespace ringlog::detail {

struct LogState {
  Ring ring;
  RecordsControl* ctl;
  std::size_t txn_buffer;  // effective: clamped to what one ring message can hold
  std::uint32_t vxid_chunk;
  std::uint64_t instance;
  std::atomic<std::uint64_t> dropped{0};  // rare path only: no hot shared counter
  std::uint64_t (*realtime_ns)() noexcept = nullptr;  // LogOptions::realtime_ns

  LogState(Ring r, std::size_t buf, std::uint32_t chunk);
  std::uint64_t new_vxid() noexcept;
  void count_write(WriteStatus s) noexcept {
    if (s == WriteStatus::dropped || s == WriteStatus::too_big) [[unlikely]]
      dropped.fetch_add(1, std::memory_order_relaxed);
  }
};

// Writes "<u64>" at out (20 bytes of room); returns the length.
std::size_t format_u64(char* out, std::uint64_t v) noexcept;

}  // namespace ringlog::detail
