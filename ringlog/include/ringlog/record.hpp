// Record encoding inside a ring message (docs/FORMAT-records.md): a batch is the
// records of one transaction, behind a small header; BatchDecoder is the one routine
// every tool uses to read them. The decoder trusts nothing in the bytes it is given.
// Thread safety: stateless functions; a BatchDecoder belongs to one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "ringlog/format.hpp"
#include "ringlog/tags.hpp"

namespace ringlog {

// Batch header:  marker 0xB1 | flags byte | varint vxid
//   flags: bits 0-1 VxidKind, bit 2 first (holds the Begin), bit 3 last (holds the End).
// Record:        tag byte | varint (length << 1 | truncated) | payload
inline constexpr std::uint8_t kBatchMarker = 0xB1;
inline constexpr std::uint8_t kBatchKindMask = 0x03;
inline constexpr std::uint8_t kBatchFirst = 0x04;
inline constexpr std::uint8_t kBatchLast = 0x08;
inline constexpr std::uint8_t kBatchKnownFlags = 0x0F;
inline constexpr std::size_t kBatchHeaderMax = 2 + format::kVarintMax;
inline constexpr std::size_t kRecordHeaderMax = 1 + format::kVarintMax;

// Records longer than this are cut and marked truncated (Varnish's vsl_reclen);
// changeable per ring at run time (RecordsControl::max_record_len).
inline constexpr std::uint32_t kDefaultMaxRecordLen = 4096;

// What kind of transaction a vxid names; printed as c, b or - by `-g raw`.
enum class VxidKind : std::uint8_t { none = 0, session = 1, client = 2, backend = 3 };

// Transaction types, as written in Begin and Link payloads.
enum class TxnType : std::uint8_t { unknown = 0, sess = 1, req = 2, bereq = 3 };

constexpr VxidKind kind_of(TxnType t) noexcept {
  switch (t) {
    case TxnType::sess: return VxidKind::session;
    case TxnType::req: return VxidKind::client;
    case TxnType::bereq: return VxidKind::backend;
    case TxnType::unknown: break;
  }
  return VxidKind::none;
}
constexpr char kind_char(VxidKind k) noexcept {
  return k == VxidKind::client ? 'c' : k == VxidKind::backend ? 'b' : '-';
}
std::string_view type_name(TxnType t) noexcept;   // "sess", "req", "bereq", "unknown"
TxnType type_by_name(std::string_view s) noexcept;  // unknown if not one of them

// One decoded record. payload points into the decoded message (or a group's storage).
struct Record {
  Tag tag = Tag::invalid;
  VxidKind kind = VxidKind::none;
  bool truncated = false;  // the writer cut it to the maximum record length
  bool synthetic = false;  // made by a reader (grouping), not by a writer
  std::uint64_t vxid = 0;
  std::string_view payload;
};

struct BatchHeader {
  std::uint64_t vxid = 0;
  VxidKind kind = VxidKind::none;
  bool first = false;
  bool last = false;
};

enum class DecodeStatus : std::uint8_t {
  ok,          // so far so good (after next() returned false: clean end of batch)
  not_batch,   // the message is not a record batch (marker or flags wrong)
  bad_header,  // the vxid varint is malformed or cut
  bad_record,  // a record's length runs past the message (cut batch) or is malformed
};
const char* to_string(DecodeStatus s) noexcept;

// Iterates the records of one batch message without copying.
class BatchDecoder {
 public:
  explicit BatchDecoder(std::span<const std::byte> msg) noexcept;
  bool valid() const noexcept { return status_ != DecodeStatus::not_batch && status_ != DecodeStatus::bad_header; }
  const BatchHeader& header() const noexcept { return hdr_; }
  // The next record, or false at the end of the batch or on malformed bytes
  // (status() tells which; records already returned stay valid).
  bool next(Record& out) noexcept {
    // The common record inline (a one-byte length word); anything else, and every
    // check that fails, goes through next_slow().
    if (status_ == DecodeStatus::ok && n_ - pos_ >= 2 && pos_ < n_) [[likely]] {
      const std::uint8_t tag = p_[pos_], w = p_[pos_ + 1];
      const std::size_t len = w >> 1;
      if (w < 240 && tag != 0 && len <= n_ - pos_ - 2) [[likely]] {
        out.tag = static_cast<Tag>(tag);
        out.kind = hdr_.kind;
        out.truncated = (w & 1) != 0;
        out.synthetic = false;
        out.vxid = hdr_.vxid;
        out.payload = std::string_view(reinterpret_cast<const char*>(p_ + pos_ + 2), len);
        pos_ += 2 + len;
        return true;
      }
    }
    return next_slow(out);
  }
  DecodeStatus status() const noexcept { return status_; }
  std::size_t offset() const noexcept { return pos_; }

 private:
  bool next_slow(Record& out) noexcept;
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
  BatchHeader hdr_;
  DecodeStatus status_ = DecodeStatus::ok;
};

// Encoding, shared by Txn, Log and tests. out must have room for kBatchHeaderMax.
std::size_t encode_batch_header(std::uint8_t* out, std::uint64_t vxid, VxidKind kind, std::uint8_t flags) noexcept;
// A payload shorter than kShortRecordPayload bytes has a header of kShortRecordHeader
// bytes (its length word fits one byte): a writer may format it at out + 2 first and put
// the header before it after.
inline constexpr std::size_t kShortRecordHeader = 2;
inline constexpr std::size_t kShortRecordPayload = 120;
// Record header (tag and length word); out must have room for kRecordHeaderMax.
inline std::size_t encode_record_header(std::uint8_t* out, Tag tag, std::size_t len, bool truncated) noexcept {
  out[0] = static_cast<std::uint8_t>(tag);
  std::uint64_t w = (std::uint64_t{len} << 1) | (truncated ? 1u : 0u);
  if (w < 2 * kShortRecordPayload) [[likely]] {
    out[1] = static_cast<std::uint8_t>(w);
    return kShortRecordHeader;
  }
  return 1 + format::varint_encode(w, out + 1);
}

}  // namespace ringlog
