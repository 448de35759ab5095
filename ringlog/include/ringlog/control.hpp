// The records layer's part of the ring header (format::Header::control, 512 bytes):
// the tag mask, the global trace switch, the maximum record length and the vxid
// allocator, shared by every process that maps the ring. A ring file is created
// zero-filled, and zero means "defaults" everywhere here, so no process has to
// initialise anything and a ring made by any tool is ready to log into.
// Thread safety: every field is atomic; any thread of any process may change the mask
// while writers run (a writer sees the change on its next record).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ringlog/format.hpp"
#include "ringlog/record.hpp"
#include "ringlog/tags.hpp"

namespace ringlog {

class Ring;
class Reader;

struct RecordsControl {
  // -- control + 0: read by every record written (one cache line, rarely written)
  // Bit t of word t/64 set = tag t's state differs from its default (kDefaultTagMask),
  // so the zero-filled area of a new ring is the default mask.
  std::atomic<std::uint64_t> mask_flip[4];
  std::atomic<std::uint64_t> mask_generation;  // bumped on every mask change
  std::atomic<std::uint32_t> max_record_len;   // 0: kDefaultMaxRecordLen
  std::uint32_t reserved0;
  std::uint8_t reserved1[16];
  // -- control + 64: vxid allocator, touched once per chunk of transactions
  alignas(64) std::atomic<std::uint64_t> next_vxid;  // next chunk start; 0: none handed out yet
  std::uint8_t reserved2[56];
  // -- control + 128: free for later use
  std::uint8_t reserved3[format::kControlSize - 128];

  // Is the tag logged? One load and one bit test (the XOR folds for a constant tag).
  bool enabled(Tag t) const noexcept {
    unsigned i = std::uint8_t(t);
    return (((mask_flip[i >> 6].load(std::memory_order_relaxed) ^ kDefaultTagMask[i >> 6]) >> (i & 63)) & 1) != 0;
  }
  // Returns false (and changes nothing) for tags that cannot be masked or unmasked:
  // invalid ids, structural tags (Begin, End, Link), reader-made tags.
  bool set_enabled(Tag t, bool on) noexcept;
  // Back to the default mask (everything but Debug and Trace).
  void reset_mask() noexcept;
  // Varnish's vsl_mask syntax: comma-separated "+Tag" / "-Tag", "default", "all" or
  // "none" (the last two apply to every maskable tag). Throws Error(invalid_arg) naming
  // the first unknown or unmaskable tag, having changed nothing.
  void apply_mask(std::string_view spec);
  // The current mask as a spec relative to the default: "default", or e.g. "+Debug,-ReqHeader".
  std::string mask_spec() const;

  // The global trace switch is the Trace tag's mask bit: one bit, one place.
  void set_trace(bool on) noexcept { set_enabled(Tag::Trace, on); }
  bool trace() const noexcept { return enabled(Tag::Trace); }

  std::uint32_t max_record() const noexcept {
    std::uint32_t v = max_record_len.load(std::memory_order_relaxed);
    return v ? v : kDefaultMaxRecordLen;
  }
  void set_max_record(std::uint32_t len) noexcept { max_record_len.store(len, std::memory_order_relaxed); }

  // Reserves n consecutive vxids for one thread; returns the first (never 0).
  std::uint64_t allocate_vxids(std::uint64_t n) noexcept;
};

static_assert(sizeof(RecordsControl) == format::kControlSize, "the records control area is the header's control area");
static_assert(offsetof(RecordsControl, mask_flip) == 0);
static_assert(offsetof(RecordsControl, mask_generation) == 32);
static_assert(offsetof(RecordsControl, max_record_len) == 40);
static_assert(offsetof(RecordsControl, next_vxid) == 64, "the vxid allocator must not share the mask's cache line");
static_assert(std::uint8_t(Tag::Trace) < 64, "tracing() tests the Trace bit in mask word 0");

// The control area of an open ring (writable), or of a reader's mapping (read-only).
RecordsControl& records_control(Ring& ring) noexcept;
const RecordsControl& records_control(const Reader& reader) noexcept;

}  // namespace ringlog
