// The record decoder every tool uses, and the batch header encoder. Decoding must be
// safe on any bytes (a torn or hostile ring file): every length is checked against
// what remains of the message before it is used.
#include "ringlog/record.hpp"

namespace ringlog {

std::string_view type_name(TxnType t) noexcept {
  switch (t) {
    case TxnType::sess: return "sess";
    case TxnType::req: return "req";
    case TxnType::bereq: return "bereq";
    case TxnType::unknown: break;
  }
  return "unknown";
}

TxnType type_by_name(std::string_view s) noexcept {
  if (s == "sess") return TxnType::sess;
  if (s == "req") return TxnType::req;
  if (s == "bereq") return TxnType::bereq;
  return TxnType::unknown;
}

const char* to_string(DecodeStatus s) noexcept {
  switch (s) {
    case DecodeStatus::ok: return "ok";
    case DecodeStatus::not_batch: return "not a record batch";
    case DecodeStatus::bad_header: return "malformed batch header";
    case DecodeStatus::bad_record: return "malformed or cut record";
  }
  return "?";
}

std::size_t encode_batch_header(std::uint8_t* out, std::uint64_t vxid, VxidKind kind, std::uint8_t flags) noexcept {
  out[0] = kBatchMarker;
  out[1] = static_cast<std::uint8_t>((flags & ~kBatchKindMask & kBatchKnownFlags) | std::uint8_t(kind));
  return 2 + format::varint_encode(vxid, out + 2);
}

BatchDecoder::BatchDecoder(std::span<const std::byte> msg) noexcept
    : p_(reinterpret_cast<const std::uint8_t*>(msg.data())), n_(msg.size()) {
  if (n_ < 3 || p_[0] != kBatchMarker || (p_[1] & ~kBatchKnownFlags)) {
    status_ = DecodeStatus::not_batch;
    pos_ = n_;
    return;
  }
  std::uint8_t f = p_[1];
  hdr_.kind = static_cast<VxidKind>(f & kBatchKindMask);
  hdr_.first = (f & kBatchFirst) != 0;
  hdr_.last = (f & kBatchLast) != 0;
  std::size_t used = format::varint_decode([this](std::size_t i) { return p_[2 + i]; }, n_ - 2, hdr_.vxid);
  if (used == 0) {
    status_ = DecodeStatus::bad_header;
    pos_ = n_;
    return;
  }
  pos_ = 2 + used;
}

bool BatchDecoder::next_slow(Record& out) noexcept {
  if (status_ != DecodeStatus::ok || pos_ >= n_) return false;
  std::size_t left = n_ - pos_;
  if (left < 2) {
    status_ = DecodeStatus::bad_record;
    return false;
  }
  std::uint8_t tag = p_[pos_];
  std::uint64_t w = 0;
  std::size_t used = format::varint_decode([this](std::size_t i) { return p_[pos_ + 1 + i]; }, left - 1, w);
  if (used == 0 || tag == 0 || (w >> 1) > left - 1 - used) {
    status_ = DecodeStatus::bad_record;
    return false;
  }
  std::size_t len = static_cast<std::size_t>(w >> 1);
  out.tag = static_cast<Tag>(tag);
  out.kind = hdr_.kind;
  out.truncated = (w & 1) != 0;
  out.synthetic = false;
  out.vxid = hdr_.vxid;
  out.payload = std::string_view(reinterpret_cast<const char*>(p_ + pos_ + 1 + used), len);
  pos_ += 1 + used + len;
  return true;
}

}  // namespace ringlog
