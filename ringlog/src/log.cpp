// Log: a ring opened for records. Hands out vxids in per-thread chunks (one shared
// atomic add per chunk, none per transaction) and writes records outside transactions.
#include "ringlog/log.hpp"

#include <pthread.h>

#include <algorithm>
#include <mutex>

#include "records_impl.hpp"

namespace ringlog {

namespace detail {

namespace {

// This thread's current vxid chunk per ring (by instance id and mapping).
struct VxidChunk {
  std::uint64_t instance = 0;
  const void* ctl = nullptr;
  std::uint64_t next = 0, end = 0;
};
thread_local VxidChunk t_chunks[4];
thread_local unsigned t_chunk_victim = 0;

// A forked child inherits the forking thread's chunks: they belong to the parent.
void forget_chunks_in_child() {
  for (auto& c : t_chunks) c = VxidChunk{};
}
std::once_flag g_atfork_once;

}  // namespace

LogState::LogState(Ring r, std::size_t buf, std::uint32_t chunk)
    : ring(std::move(r)), ctl(&records_control(ring)), vxid_chunk(chunk ? chunk : 1), instance(ring.instance_id()) {
  std::uint64_t limit = ring.max_payload();
  if (std::uint32_t m = ring.max_msg_len(); m && m < limit) limit = m;
  txn_buffer = static_cast<std::size_t>(std::min<std::uint64_t>(buf, limit));
  // Room for a batch header, Begin, one record header and End in any buffer.
  if (txn_buffer < 256) throw Error(Errc::invalid_arg, "transaction buffer too small (ring messages too short)");
  std::call_once(g_atfork_once, [] { ::pthread_atfork(nullptr, nullptr, forget_chunks_in_child); });
}

std::uint64_t LogState::new_vxid() noexcept {
  for (auto& c : t_chunks)
    if (c.instance == instance && c.ctl == ctl) {
      if (c.next == c.end) {
        c.next = ctl->allocate_vxids(vxid_chunk);
        c.end = c.next + vxid_chunk;
      }
      return c.next++;
    }
  VxidChunk& c = t_chunks[t_chunk_victim++ % 4];
  c.instance = instance;
  c.ctl = ctl;
  c.next = ctl->allocate_vxids(vxid_chunk);
  c.end = c.next + vxid_chunk;
  return c.next++;
}

}  // namespace detail

Log::Log(Ring ring, const LogOptions& opts)
    : st_(std::make_unique<detail::LogState>(std::move(ring), opts.txn_buffer, opts.vxid_chunk)) {
  st_->realtime_ns = opts.realtime_ns;
}

Log Log::open(std::string_view name_or_path, const LogOptions& opts) {
  return Log(Ring::open(resolve_ring_path(name_or_path), opts.ring), opts);
}

Log Log::create(const std::string& path, const CreateOptions& create, const LogOptions& opts) {
  return Log(Ring::create(path, create, opts.ring), opts);
}

Log::Log(Log&&) noexcept = default;
Log& Log::operator=(Log&&) noexcept = default;
Log::~Log() = default;

Txn Log::begin(TxnType type, std::string_view reason, std::uint64_t parent_vxid) {
  return Txn(st_.get(), type, st_->new_vxid(), parent_vxid, reason);
}

std::uint64_t Log::new_vxid() noexcept { return st_->new_vxid(); }

void Log::record(Tag t, std::string_view text) noexcept {
  RecordsControl& c = *st_->ctl;
  if (!c.enabled(t)) return;
  std::uint8_t hdr[kBatchHeaderMax + kRecordHeaderMax];
  std::size_t n = encode_batch_header(hdr, 0, VxidKind::none, kBatchFirst | kBatchLast);
  bool trunc = text.size() > c.max_record();
  if (trunc) text = text.substr(0, c.max_record());
  n += encode_record_header(hdr + n, t, text.size(), trunc);
  iovec v[2] = {{hdr, n}, {const_cast<char*>(text.data()), text.size()}};
  st_->count_write(st_->ring.writev(std::span<const iovec>(v, text.empty() ? 1 : 2)));
}

RecordsControl& Log::control() noexcept { return *st_->ctl; }
const RecordsControl& Log::control() const noexcept { return *st_->ctl; }
Ring& Log::ring() noexcept { return st_->ring; }
std::size_t Log::txn_buffer() const noexcept { return st_->txn_buffer; }
std::uint64_t Log::dropped_batches() const noexcept { return st_->dropped.load(std::memory_order_relaxed); }

}  // namespace ringlog
