// The embedding API: a Log is a ring opened for tagged records; transactions begin
// here. Typical use:
//     auto log = ringlog::Log::open("myserver");          // instance name or path
//     ringlog::Txn req = log.begin(ringlog::TxnType::req, "rxreq", session_vxid);
//     req.timestamp("Start");
//     req.record(ringlog::Tag::ReqURL, url);
//     req.recordf(ringlog::Tag::RespStatus, "%d", status);
//     req.end();                                           // one ring write
// Thread safety: a Log may be shared by any number of threads (begin(), record() and
// the mask calls are safe concurrently); each Txn belongs to one thread at a time.
// Transactions keep a pointer into the Log, so the Log must outlive them (it may move).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ringlog/control.hpp"
#include "ringlog/ring.hpp"
#include "ringlog/txn.hpp"

namespace ringlog {

struct LogOptions {
  std::size_t txn_buffer = 16 * 1024;  // bytes per transaction; clamped to the ring's largest message
  std::uint32_t vxid_chunk = 4096;     // vxids each thread takes from the ring at once
  OpenOptions ring = {};               // when the Log opens the ring itself
  // Where Txn::timestamp(label) reads the time, in ns since the epoch; null (the
  // default) reads CLOCK_REALTIME. For a clock of one's own, or a test's counting clock.
  std::uint64_t (*realtime_ns)() noexcept = nullptr;
};

class Log {
 public:
  // Opens an existing ring: an instance name ($RINGLOG_DIR/NAME/ring) or a path.
  static Log open(std::string_view name_or_path, const LogOptions& opts = {});
  // Creates (or atomically replaces) the ring at path.
  static Log create(const std::string& path, const CreateOptions& create = {}, const LogOptions& opts = {});
  explicit Log(Ring ring, const LogOptions& opts = {});

  Log(Log&&) noexcept;
  Log& operator=(Log&&) noexcept;
  ~Log();

  // Begins a transaction: takes a vxid and writes Begin "<type> <parent> <reason>".
  Txn begin(TxnType type, std::string_view reason, std::uint64_t parent_vxid = 0);
  // A record outside any transaction (vxid 0), written at once as its own batch.
  void record(Tag t, std::string_view text) noexcept;
  // A fresh vxid from this thread's chunk (no shared write but once per chunk).
  std::uint64_t new_vxid() noexcept;

  // Tag mask, trace switch and maximum record length: shared by every process using
  // the ring, changeable while writers run (see RecordsControl).
  RecordsControl& control() noexcept;
  const RecordsControl& control() const noexcept;
  bool tag_enabled(Tag t) const noexcept { return control().enabled(t); }
  bool set_tag_enabled(Tag t, bool on) noexcept { return control().set_enabled(t, on); }
  void set_mask(std::string_view spec) { control().apply_mask(spec); }
  std::string mask() const { return control().mask_spec(); }
  void set_trace(bool on) noexcept { control().set_trace(on); }
  bool trace() const noexcept { return control().trace(); }

  Ring& ring() noexcept;
  std::size_t txn_buffer() const noexcept;
  // Batches the ring refused or dropped (ring full with pinned readers, too big).
  std::uint64_t dropped_batches() const noexcept;

 private:
  std::unique_ptr<detail::LogState> st_;
};

}  // namespace ringlog
