// Transaction buffers: the slow paths of Txn (buffer full, formatting, timestamps,
// begin/end). The fast path is inline in txn.hpp. Nothing here takes a lock; the only
// shared write is the ring write of a finished (or full) batch.
#include "ringlog/txn.hpp"
#include "ringlog/fmt.hpp"
#include "ringlog/clock.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "records_impl.hpp"

namespace ringlog {

namespace detail {

const std::atomic<std::uint64_t> kTxnInactiveMask[4] = {
    {kDefaultTagMask[0]}, {kDefaultTagMask[1]}, {kDefaultTagMask[2]}, {kDefaultTagMask[3]}};

const std::atomic<std::uint64_t> kTraceForcedOn{kTraceBit};
const std::atomic<std::uint64_t> kTraceForcedOff{0};

std::size_t format_u64(char* out, std::uint64_t v) noexcept { return ringlog::format_u64(out, v); }

}  // namespace detail

namespace {

// Transaction buffers kept per thread, so beginning a transaction (or a parked one
// taking its buffer again) does not go to malloc. A proxy thread has a session, a
// request and a fetch transaction alive for each connection it is serving at once:
// with a few kept, a thread busy with 25 connections went to malloc and free for two
// 16 KiB buffers per request. trim_txn_buffers() gives them back when the thread idles.
thread_local bool t_buffers_gone = false;  // trivial: still readable after the cache is destroyed

struct BufferCache {
  std::uint8_t* bufs[kTxnBuffersKept] = {};
  std::size_t n = 0;
  std::size_t cap = 0;  // the size of the kept buffers (one Log's txn_buffer, as a rule)
  ~BufferCache() {
    (void)trim(0);
    t_buffers_gone = true;  // a Txn that outlives this thread's cache (a static one) frees its own
  }
  std::uint8_t* take(std::size_t c) {
    if (n && cap == c) return bufs[--n];
    return new std::uint8_t[c];
  }
  void give(std::uint8_t* buf, std::size_t c) {
    if (c != cap) {
      if (n) {  // another size while some are kept: not kept
        delete[] buf;
        return;
      }
      cap = c;  // none kept: this size is kept from now on
    }
    if (n == kTxnBuffersKept) {
      delete[] buf;
      return;
    }
    bufs[n++] = buf;
  }
  std::size_t trim(std::size_t keep) noexcept {
    std::size_t freed = 0;
    for (; n > keep; ++freed) delete[] bufs[--n];
    return freed;
  }
};
thread_local BufferCache t_buffers;

// The cache is not touched once destroyed (a static Txn ending after thread exit).
std::uint8_t* take_buffer(std::size_t cap) { return t_buffers_gone ? new std::uint8_t[cap] : t_buffers.take(cap); }
void give_buffer(std::uint8_t* buf, std::size_t cap) {
  if (t_buffers_gone)
    delete[] buf;
  else
    t_buffers.give(buf, cap);
}

// The seconds of absolute times with their '.', per thread: a thread formats the same
// second many times in a row. Constant-initialized, so reading it costs no guard.
struct SecondText {
  std::uint64_t sec = ~std::uint64_t{0};
  std::size_t len = 0;
  char txt[24] = {};  // digits and '.'; copied 16 bytes at a time
};
thread_local SecondText t_second;

// "<type> <vxid> <reason>", the payload of Begin and Link: at most kRefMax bytes.
constexpr std::size_t kRefMax = 160;
// type_name() and its space, padded for one 8-byte store (records_txn tests hold the
// two spellings together).
struct RefName {
  char text[9];
  std::uint8_t len;
};
constexpr RefName kRefNames[] = {{"unknown ", 8}, {"sess ", 5}, {"req ", 4}, {"bereq ", 6}};
static_assert(std::size(kRefNames) == std::size_t(TxnType::bereq) + 1, "one name per TxnType");

[[gnu::always_inline]] inline std::size_t format_ref(char* out, std::size_t room, TxnType type, std::uint64_t vxid,
                                                     std::string_view reason) {
  auto ti = std::uint8_t(type);
  const RefName& name = kRefNames[ti < std::size(kRefNames) ? ti : 0];
  std::memcpy(out, name.text, 8);
  std::size_t n = name.len;
  n += ringlog::format_u64(out + n, vxid);
  out[n++] = ' ';
  std::size_t r = std::min(reason.size(), room - n);
  fmt_detail::copy_short(out + n, reason.data(), r);
  return n + r;
}

}  // namespace

Txn::Txn(detail::LogState* log, TxnType type, std::uint64_t vxid, std::uint64_t parent, std::string_view reason)
    : mask_(log->ctl->mask_flip), trace_src_(&log->ctl->mask_flip[0]), type_(type), log_(log), vxid_(vxid) {
  cap_ = log->txn_buffer;
  buf_ = take_buffer(cap_);
  hdr_len_ = encode_batch_header(buf_, vxid, kind_of(type), 0);
  pos_ = buf_ + hdr_len_;
  end_ = buf_ + cap_;
  // At most what an empty buffer holds, with the byte vsnprintf needs for its NUL.
  max_rec_ = static_cast<std::uint32_t>(
      std::min<std::size_t>(log->ctl->max_record(), cap_ - hdr_len_ - kRecordHeaderMax - 1));
  auto ref = [&](char* out) { return format_ref(out, kRefMax, type, parent, reason); };
  put_with<kRefMax>(Tag::Begin, ref);
}

Txn::Txn(Txn&& o) noexcept
    : pos_(o.pos_), end_(o.end_), mask_(o.mask_), trace_src_(o.trace_src_),
      max_rec_(o.max_rec_), type_(o.type_), first_(o.first_), buf_(o.buf_), cap_(o.cap_), hdr_len_(o.hdr_len_),
      log_(o.log_), vxid_(o.vxid_), t_start_ns_(o.t_start_ns_), t_prev_ns_(o.t_prev_ns_) {
  o.buf_ = nullptr;
  o.release();
}

Txn& Txn::operator=(Txn&& o) noexcept {
  if (this == &o) return *this;
  if (log_) end();
  pos_ = o.pos_;
  end_ = o.end_;
  mask_ = o.mask_;
  trace_src_ = o.trace_src_;
  max_rec_ = o.max_rec_;
  type_ = o.type_;
  first_ = o.first_;
  buf_ = o.buf_;
  cap_ = o.cap_;
  hdr_len_ = o.hdr_len_;
  log_ = o.log_;
  vxid_ = o.vxid_;
  t_start_ns_ = o.t_start_ns_;
  t_prev_ns_ = o.t_prev_ns_;
  o.buf_ = nullptr;
  o.release();
  return *this;
}

void Txn::release() noexcept {
  if (buf_) give_buffer(buf_, cap_);
  buf_ = pos_ = end_ = nullptr;
  mask_ = detail::kTxnInactiveMask;
  trace_src_ = &detail::kTraceForcedOff;
  max_rec_ = 0;
  cap_ = hdr_len_ = 0;
  log_ = nullptr;
  first_ = true;
}

void Txn::send(bool last) noexcept {
  std::uint8_t flags = (first_ ? kBatchFirst : 0) | (last ? kBatchLast : 0);
  buf_[1] = static_cast<std::uint8_t>((buf_[1] & kBatchKindMask) | flags);
  log_->count_write(log_->ring.write(std::span<const std::byte>(reinterpret_cast<std::byte*>(buf_), pos_ - buf_)));
  first_ = false;
  pos_ = buf_ + hdr_len_;
}

void Txn::put_slow(Tag t, const void* p, std::size_t n) noexcept {
  if (!buf_ && !unpark()) return;
  bool trunc = false;
  if (n > max_rec_) {
    n = max_rec_;
    trunc = true;
  }
  if (std::size_t(end_ - pos_) < n + kRecordHeaderMax) send(false);  // full: ship what we have
  // max_rec_ leaves room for one record in an empty buffer.
  pos_ += encode_record_header(pos_, t, n, trunc);
  std::memcpy(pos_, p ? p : "", n);
  pos_ += n;
}

void Txn::place_long(Tag t, std::size_t n) noexcept {
  std::uint8_t h[kRecordHeaderMax];
  std::size_t hl = encode_record_header(h, t, n, false);
  std::memmove(pos_ + hl, pos_ + kShortRecordHeader, n);
  std::memcpy(pos_, h, hl);
  pos_ += hl + n;
}

void Txn::recordf(Tag t, const char* fmt, ...) noexcept {
  if (!enabled(t)) return;
  va_list ap;
  va_start(ap, fmt);
  vput(t, fmt, ap);
  va_end(ap);
}

void Txn::vrecordf(Tag t, const char* fmt, va_list ap) noexcept {
  if (enabled(t)) vput(t, fmt, ap);
}

void Txn::trace_slow(std::string_view text) noexcept { put(Tag::Trace, text.data(), text.size()); }

void Txn::trace_printf(const char* fmt, ...) noexcept {
  if (!tracing()) return;
  va_list ap;
  va_start(ap, fmt);
  vput(Tag::Trace, fmt, ap);
  va_end(ap);
}

void Txn::vput(Tag t, const char* fmt, va_list ap) noexcept {
  if (!buf_ && !unpark()) return;
  // Format after room for the largest record header, then slide it into place.
  for (int attempt = 0;; ++attempt) {
    std::size_t room = std::size_t(end_ - pos_);
    std::size_t avail = room > kRecordHeaderMax ? room - kRecordHeaderMax : 0;
    std::size_t limit = std::min<std::size_t>(avail, std::size_t{max_rec_} + 1);
    char* dst = reinterpret_cast<char*>(pos_ + kRecordHeaderMax);
    va_list aq;
    va_copy(aq, ap);
    int r = limit ? std::vsnprintf(dst, limit, fmt, aq) : 0;
    va_end(aq);
    if (r < 0) return;
    std::size_t len = static_cast<std::size_t>(r);
    bool trunc = false;
    if (len >= limit) {
      if (limit < std::size_t{max_rec_} + 1 && attempt == 0 && pos_ > buf_ + hdr_len_) {
        send(false);  // the buffer, not the record limit, cut it: retry in an empty buffer
        continue;
      }
      len = limit ? limit - 1 : 0;
      trunc = true;
      if (limit == 0) return;
    }
    std::size_t h = encode_record_header(pos_, t, len, trunc);
    std::memmove(pos_ + h, dst, len);
    pos_ += h + len;
    return;
  }
}

std::uint64_t Txn::now_ns() const noexcept {
  if (log_ && log_->realtime_ns) [[unlikely]]
    return log_->realtime_ns();
  return ringlog::realtime_ns();
}

void Txn::timestamp_now(std::string_view label) noexcept { timestamp_at(label, now_ns()); }

// "Label: <absolute> <since start> <since previous>" at b; returns its length. b must
// have room for kTimestampMax bytes (the stores run up to 8 bytes past the text).
constexpr std::size_t kTimestampLabelMax = 64;
constexpr std::size_t kTimestampMax = kTimestampLabelMax + 2 + 20 + 1 + 21 + 1 + 21;
[[gnu::always_inline]] inline std::size_t format_timestamp(char* b, std::string_view label, std::uint64_t ns, std::uint64_t start,
                                                        std::uint64_t prev) noexcept {
  std::size_t n = std::min<std::size_t>(label.size(), kTimestampLabelMax);
  fmt_detail::copy_short(b, label.data(), n);
  b[n] = ':';
  b[n + 1] = ' ';
  n += 2;
  std::uint64_t us = ns / 1000;
  std::uint64_t sec = us / 1000000;
  SecondText& st = t_second;
  if (sec != st.sec) [[unlikely]] {
    st.len = format_u64(st.txt, sec);
    st.txt[st.len++] = '.';
    st.sec = sec;
  }
  std::memcpy(b + n, st.txt, 16);  // the seconds and '.': at most 12 bytes (u64 nanoseconds)
  n += st.len;
  // The six decimals in one store; its last two bytes are overwritten by what follows.
  auto frac = std::uint32_t(us - sec * 1000000);
  auto hi = frac / 1000;
  std::uint64_t w = std::uint64_t(fmt_detail::kDigits3[hi]) | (std::uint64_t(fmt_detail::kDigits3[frac - hi * 1000]) << 24);
  std::memcpy(b + n, &w, 8);
  n += 6;
  b[n++] = ' ';
  n += format_seconds_delta(b + n, ns, start);
  b[n++] = ' ';
  n += format_seconds_delta(b + n, ns, prev);
  return n;
}

void Txn::timestamp_at(std::string_view label, std::uint64_t ns) noexcept {
  if (t_start_ns_ == 0) t_start_ns_ = t_prev_ns_ = ns;
  std::uint64_t prev = t_prev_ns_;
  t_prev_ns_ = ns;
  // Straight into the buffer after a two-byte record header (payloads under 120 bytes)
  // when it has room for the longest one, else the slow path.
  if (max_rec_ >= kTimestampMax && std::size_t(end_ - pos_) >= kTimestampMax + kRecordHeaderMax) [[likely]] {
    // (a long label and long deltas take the longer header)
    place_formatted(Tag::Timestamp,
                    format_timestamp(reinterpret_cast<char*>(pos_) + kShortRecordHeader, label, ns, t_start_ns_, prev));
    return;
  }
  timestamp_slow(label, ns, prev);
}

void Txn::timestamp_slow(std::string_view label, std::uint64_t ns, std::uint64_t prev) noexcept {
  char tmp[kTimestampMax];
  put_slow(Tag::Timestamp, tmp, format_timestamp(tmp, label, ns, t_start_ns_, prev));
}

void Txn::link(TxnType child_type, std::uint64_t child_vxid, std::string_view reason) noexcept {
  if (!log_) return;
  auto ref = [&](char* out) { return format_ref(out, kRefMax, child_type, child_vxid, reason); };
  put_with<kRefMax>(Tag::Link, ref);
}

Txn Txn::child(TxnType type, std::string_view reason) {
  if (!log_) return Txn();
  Txn c(log_, type, log_->new_vxid(), vxid_, reason);
  link(type, c.vxid_, reason);
  c.trace_src_ = trace_src_;  // the global word or a forced one: both outlive the child
  return c;
}

void Txn::set_trace(bool on) noexcept {
  if (!log_) return;
  trace_src_ = on ? &detail::kTraceForcedOn : &detail::kTraceForcedOff;
}

void Txn::inherit_trace() noexcept {
  if (!log_) return;
  trace_src_ = &mask_[0];
}

void Txn::flush() noexcept {
  if (buf_ && pos_ > buf_ + hdr_len_) send(false);
}

void Txn::park() noexcept {
  if (!buf_) return;
  flush();
  give_buffer(buf_, cap_);
  buf_ = pos_ = end_ = nullptr;  // the next put() takes the slow path, which unparks
}

std::size_t trim_txn_buffers(std::size_t keep) noexcept { return t_buffers_gone ? 0 : t_buffers.trim(keep); }

bool Txn::unpark() noexcept {
  if (!log_) return false;
  buf_ = take_buffer(cap_);
  hdr_len_ = encode_batch_header(buf_, vxid_, kind_of(type_), 0);
  pos_ = buf_ + hdr_len_;
  end_ = buf_ + cap_;
  return true;
}

void Txn::end() noexcept {
  if (!log_) return;
  put(Tag::End, "", 0);
  send(true);
  release();
}

}  // namespace ringlog
