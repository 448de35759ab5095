// A transaction's log: records accumulate in a buffer the transaction owns and enter
// the ring as one message (a batch) when it ends or the buffer fills. The tag mask is
// tested before anything is formatted; a disabled trace point is one branch, no call.
// Thread safety: a Txn is used by one thread at a time (it may move between threads);
// it needs no lock. The Log it came from must outlive it.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "ringlog/fmt.hpp"
#include "ringlog/record.hpp"
#include "ringlog/tags.hpp"

namespace ringlog {

namespace detail {
struct LogState;
// The mask seen by an inactive Txn: every tag off, so records on it cost a bit test.
extern const std::atomic<std::uint64_t> kTxnInactiveMask[4];
inline constexpr std::uint64_t kTraceBit = 1ULL << std::uint8_t(Tag::Trace);
// Where a transaction that overrides the global trace switch reads its switch from.
extern const std::atomic<std::uint64_t> kTraceForcedOn;
extern const std::atomic<std::uint64_t> kTraceForcedOff;
}  // namespace detail

class Txn {
 public:
  Txn() noexcept = default;  // inactive: records are ignored
  Txn(Txn&& o) noexcept;
  Txn& operator=(Txn&& o) noexcept;  // ends the transaction this one held
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn() { if (log_) end(); }  // a transaction is never silently dropped

  bool active() const noexcept { return log_ != nullptr; }
  std::uint64_t vxid() const noexcept { return vxid_; }
  TxnType type() const noexcept { return type_; }

  // Would a record with this tag be logged now? One load and one bit test.
  bool enabled(Tag t) const noexcept {
    unsigned i = std::uint8_t(t);
    return (((mask_[i >> 6].load(std::memory_order_relaxed) ^ kDefaultTagMask[i >> 6]) >> (i & 63)) & 1) != 0;
  }

  // A record with a text payload (any bytes; unsafe tags are escaped when printed).
  // Longer than the ring's maximum record length: cut and marked truncated.
  void record(Tag t, std::string_view text) noexcept {
    if (enabled(t)) put(t, text.data(), text.size());
  }
  void record(Tag t, std::span<const std::byte> bytes) noexcept {
    if (enabled(t)) put(t, bytes.data(), bytes.size());
  }
  // record() for a caller that tested enabled(t) itself, once for many records (the
  // fields of a head): the mask as it was at that test decides for all of them.
  void record_enabled(Tag t, std::string_view text) noexcept { put(t, text.data(), text.size()); }
  // A payload of at most Max bytes formatted straight into the buffer by f(char* out),
  // which writes at most Max bytes at out and returns the payload's length; called only
  // when the tag is enabled. Saves the stack line and its copy of record(t, line.view()):
  //   txn.record_with<20>(Tag::Length, [&](char* o) { return ringlog::format_u64(o, n); });
  template <std::size_t Max, class F>
  void record_with(Tag t, F&& f) noexcept {
    if (enabled(t)) put_with<Max>(t, f);
  }
  // printf-style; formats straight into the transaction's buffer, only when enabled.
  void recordf(Tag t, const char* fmt, ...) noexcept __attribute__((format(printf, 3, 4)));
  void vrecordf(Tag t, const char* fmt, va_list ap) noexcept __attribute__((format(printf, 3, 0)));

  // "Label: <absolute> <since start> <since previous>" in seconds with microseconds
  // (CLOCK_REALTIME). The first timestamp of a transaction is its start. While the
  // Timestamp tag is masked nothing is read or stored, so "since previous" counts
  // from the previous timestamp that was logged.
  void timestamp(std::string_view label) noexcept {
    if (enabled(Tag::Timestamp)) timestamp_now(label);
  }
  void timestamp(std::string_view label, std::uint64_t realtime_ns) noexcept {
    if (enabled(Tag::Timestamp)) timestamp_at(label, realtime_ns);
  }
  // The clock timestamp(label) reads (the Log's realtime_ns option when set), for
  // records of several transactions that mark one instant with one clock read.
  std::uint64_t now_ns() const noexcept;

  // Link "<child type> <child vxid> <reason>" (Link is never masked).
  void link(TxnType child_type, std::uint64_t child_vxid, std::string_view reason) noexcept;
  void link(const Txn& child, std::string_view reason) noexcept { link(child.type_, child.vxid_, reason); }
  // Begins a child transaction (Begin "<type> <this vxid> <reason>" there) and links it
  // from here. The child inherits this transaction's trace override.
  Txn child(TxnType type, std::string_view reason);

  // Tracing: on when this transaction forces it, else when the ring's global switch
  // (the Trace tag's mask bit) is on. The override only changes which word is read,
  // so the check is the same load and bit test as a masked record.
  bool tracing() const noexcept { return (trace_src_->load(std::memory_order_relaxed) & detail::kTraceBit) != 0; }
  void set_trace(bool on) noexcept;      // per-transaction override
  void inherit_trace() noexcept;          // back to following the global switch
  // A trace point. Disabled: one predictable branch, no call. For formatted trace
  // points whose arguments must not even be evaluated, use RINGLOG_TRACEF.
  void trace(std::string_view text) noexcept {
    if (tracing()) [[unlikely]]
      trace_slow(text);
  }
  [[gnu::cold]] void trace_printf(const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3)));

  // Sends what is buffered now (a non-final batch); end() sends the rest with End.
  void flush() noexcept;
  // Flushes and gives the buffer back, for a long-lived transaction about to sit idle
  // (a keep-alive session between requests); its next record takes a buffer again.
  void park() noexcept;
  bool parked() const noexcept { return log_ && !buf_; }
  void end() noexcept;
  std::size_t buffered() const noexcept { return buf_ ? std::size_t(pos_ - buf_) - hdr_len_ : 0; }

 private:
  friend class Log;
  Txn(detail::LogState* log, TxnType type, std::uint64_t vxid, std::uint64_t parent, std::string_view reason);

  void put(Tag t, const void* p, std::size_t n) noexcept {
    if (n <= max_rec_ && std::size_t(end_ - pos_) >= n + kRecordHeaderMax) [[likely]] {
      pos_ += encode_record_header(pos_, t, n, false);
      fmt_detail::copy_short(pos_, p, n);  // short records: inline moves, no libc call
      pos_ += n;
      return;
    }
    put_slow(t, p, n);
  }
  void put_slow(Tag t, const void* p, std::size_t n) noexcept;
  template <std::size_t Max, class F>
  void put_with(Tag t, F& f) noexcept {
    static_assert(Max <= 4096, "record_with formats on the stack when the buffer is short");
    if (max_rec_ >= Max && std::size_t(end_ - pos_) >= Max + kRecordHeaderMax) [[likely]] {
      place_formatted(t, f(reinterpret_cast<char*>(pos_) + kShortRecordHeader));
      return;
    }
    char b[Max];
    put_slow(t, b, f(b));
  }
  // Ends a record whose n-byte payload was formatted at pos_ + kShortRecordHeader: its
  // header goes before it (a payload too long for the short header slides along).
  void place_formatted(Tag t, std::size_t n) noexcept {
    if (n < kShortRecordPayload) [[likely]] {
      pos_ += encode_record_header(pos_, t, n, false) + n;
      return;
    }
    place_long(t, n);
  }
  void place_long(Tag t, std::size_t n) noexcept;
  // Out of line and cold, so that a disabled trace point's code stays a fall-through.
  [[gnu::cold, gnu::noinline]] void trace_slow(std::string_view text) noexcept;
  void vput(Tag t, const char* fmt, va_list ap) noexcept __attribute__((format(printf, 3, 0)));
  void timestamp_now(std::string_view label) noexcept;
  void timestamp_at(std::string_view label, std::uint64_t ns) noexcept;
  [[gnu::cold, gnu::noinline]] void timestamp_slow(std::string_view label, std::uint64_t ns, std::uint64_t prev) noexcept;
  void send(bool last) noexcept;
  void release() noexcept;
  bool unpark() noexcept;  // a parked transaction takes a buffer again; false if inactive

  // Hot fields first: the record fast path touches only this cache line.
  std::uint8_t* pos_ = nullptr;
  std::uint8_t* end_ = nullptr;  // room ends here (kept 0 for an inactive Txn)
  const std::atomic<std::uint64_t>* mask_ = detail::kTxnInactiveMask;
  const std::atomic<std::uint64_t>* trace_src_ = &detail::kTraceForcedOff;  // mask_ word 0 unless overridden
  std::uint32_t max_rec_ = 0;
  TxnType type_ = TxnType::unknown;
  bool first_ = true;
  std::uint8_t* buf_ = nullptr;
  std::size_t cap_ = 0;
  std::size_t hdr_len_ = 0;
  detail::LogState* log_ = nullptr;
  std::uint64_t vxid_ = 0;
  std::uint64_t t_start_ns_ = 0;
  std::uint64_t t_prev_ns_ = 0;
};

// This thread keeps the buffers of the transactions it ended or parked for the next ones
// it begins (up to kTxnBuffersKept). Frees those beyond `keep` and returns how many it
// freed: for a server thread going idle after a burst of connections, as HAProxy's
// pool_gc() gives its pools back.
inline constexpr std::size_t kTxnBuffersKept = 64;
std::size_t trim_txn_buffers(std::size_t keep = 0) noexcept;

}  // namespace ringlog

// A formatted trace point that evaluates nothing but the switch when tracing is off.
#define RINGLOG_TRACEF(txn, ...)              \
  do {                                        \
    if ((txn).tracing()) [[unlikely]]         \
      (txn).trace_printf(__VA_ARGS__);        \
  } while (0)
