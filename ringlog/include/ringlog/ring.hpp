// The ringlog ring: a file-backed, multi-writer, multi-process message ring
// (HAProxy 3.x write algorithm; see docs/FORMAT.md and docs/RING.md).
// Thread safety: a Ring may be shared by any number of threads; write() never blocks
// on readers (it drops instead), and never throws on the hot path.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ringlog/format.hpp"

namespace ringlog {

// What went wrong when opening or creating a ring; tools map these to exit codes.
enum class Errc {
  not_found = 1,    // no file at the path (or instance)
  permission = 2,   // the file exists but may not be opened
  bad_format = 3,   // not a ringlog ring, or a damaged or incompatible header
  io = 4,           // any other system error
  invalid_arg = 5,  // a bad size or option
  busy = 6,         // an operation that needs the writers gone found one alive
};

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& what) : std::runtime_error(what), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

// Instances: `-n NAME` means $RINGLOG_DIR/NAME (default /dev/shm/ringlog/NAME), a
// directory that holds the ring ("ring") and, beside it, the stats file.
std::string instance_dir(std::string_view name);
// A ring argument that contains a '/' or names an existing file is a path; otherwise it
// is an instance name. An empty argument is the "default" instance.
std::string resolve_ring_path(std::string_view name_or_path);
inline constexpr std::string_view kDefaultInstance = "default";
inline constexpr std::string_view kRingFileName = "ring";

struct CreateOptions {
  std::uint64_t area_size = 16u << 20;  // bytes of message area
  unsigned mode = 0640;                 // file mode (like Varnish's shm files)
  std::uint32_t max_msg_len = 0;        // truncate longer payloads; 0: no limit but the ring's
};

struct OpenOptions {
  unsigned queues = 6;  // per-process writer wait queues (HAProxy's default)
  // A batch that does not fit because reclaim met a writer still copying (descheduled
  // while the others lapped the ring) waits for it, yielding, up to this long for one
  // position, then is dropped. Readers are never waited for.
  std::chrono::milliseconds writer_wait{10};
  // A pinned reader of this Ring whose next position (or the one it attaches at) is
  // held by a batch in flight waits for it, yielding then sleeping, at most this long
  // (less when its back-off steps run out first: about 25 ms moving, 80 ms attaching),
  // then checks for dead writers (or fails to attach). 0: no waiting, for a ring
  // nobody else writes to.
  std::chrono::milliseconds reader_wait{100};
  // Map every page of the ring writable at open (madvise MADV_POPULATE_WRITE, Linux
  // 5.14; a no-op where the kernel lacks it), as LTTng-UST's populate policy does for
  // its buffers: the first write to each page then takes no page fault. On tmpfs
  // (/dev/shm) the pages were allocated at creation already, so this costs only the
  // time to zero and map them, once, at open: about 0.1 s for a 256 MiB ring (2 vCPUs,
  // 2026-12-03), against one fault per 4 KiB page (~6 us each) spread over the first
  // lap of the ring (docs/RING.md). On a disk file system it dirties the whole file once.
  bool populate = false;
};

enum class WriteStatus : std::uint8_t {
  ok,         // copied into the ring
  truncated,  // copied, cut to the ring's max_msg_len
  dropped,    // the batch it was in did not fit (readers pinned, or ring too small)
  too_big,    // larger than the ring can ever hold; refused
};
const char* to_string(WriteStatus s) noexcept;

// Counters and positions, read from the header (see format::Header).
struct RingStats {
  std::uint64_t head, tail, area_size;
  std::uint64_t msgs_written, bytes_written, batches;
  std::uint64_t msgs_dropped, bytes_dropped, msgs_truncated, msgs_refused;
  std::uint64_t lock_waits, lock_recoveries, torn_discarded, readers_released, writer_waits;
  unsigned pinned_readers, writer_threads;
  bool locked;
};
// The same, from any ring header (a mapping of the file or a copy of it): relaxed
// loads of each field, so the figures of a live ring are each current but not taken
// at one instant. Ring::stats() and Reader::stats() call it on their mapping.
RingStats read_stats(const format::Header& h) noexcept;

// Process identity used for liveness checks: pid plus start time (from /proc).
std::uint64_t process_start_time(pid_t pid) noexcept;  // 0 if the process is gone
bool process_alive(pid_t pid, std::uint64_t start_time) noexcept;

// Picks this thread's wait queue (thread index mod queue count). Threads get increasing
// indexes automatically; servers with worker threads set their worker index instead.
void set_thread_index(unsigned index) noexcept;

class Reader;

class Ring {
 public:
  // Creates (or atomically replaces) the ring at path: the header is written in a
  // temporary file that is renamed into place, so readers never see a partial header.
  static Ring create(const std::string& path, const CreateOptions& opts = {},
                     const OpenOptions& open = {});
  // Opens an existing ring read-write (writers, pinned readers). Throws Error.
  static Ring open(const std::string& path, const OpenOptions& opts = {});
  // A ring over a whole ring file's image in this process's memory (no file): checked
  // as open() checks a file, then used in place. The image must be aligned as a
  // format::Header (64 bytes) and outlive the Ring. For tests and fuzzing: other
  // processes cannot see it.
  static Ring open_memory(std::span<std::byte> image, const OpenOptions& opts = {});

  Ring(Ring&&) noexcept;
  Ring& operator=(Ring&&) noexcept;
  ~Ring();

  // One message, from one buffer or gathered from parts. Never blocks on readers.
  WriteStatus write(std::string_view payload) noexcept;
  WriteStatus write(std::span<const std::byte> payload) noexcept;
  WriteStatus writev(std::span<const iovec> parts) noexcept;
  // Same, with an explicit kind (notice messages are normally the ring's own).
  WriteStatus writev(std::span<const iovec> parts, format::MsgKind kind) noexcept;

  std::uint64_t max_payload() const noexcept;  // the largest message the ring can ever hold
  std::uint32_t max_msg_len() const noexcept;  // truncation length, 0: none
  std::uint64_t area_size() const noexcept;
  std::uint64_t instance_id() const noexcept;
  const std::string& path() const noexcept;
  RingStats stats() const noexcept;

  // Raw access to the mapped header, for tools (ringlog-dump) and tests. Writing to it
  // bypasses the ring's algorithm.
  format::Header& header() noexcept;

  // The 512-byte control area shared with the layers above (tag mask, tracing).
  std::uint8_t* control() noexcept;

  // Runs the dead-process checks now (normally done by writers every ~50 ms and
  // whenever a write is blocked): releases pins of dead readers, discards torn
  // batches of dead writers, recovers a tail lock held by a dead process.
  void check_dead() noexcept;

  struct Impl;

 private:
  friend class Reader;
  explicit Ring(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

enum class ReaderKind : std::uint8_t {
  passive,  // read-only mapping, writes nothing; may lose data it did not keep up with
  pinned,   // registered, protects its position; writers drop rather than overwrite it
};
enum class StartAt : std::uint8_t { oldest, tail };

struct ReaderOptions {
  ReaderKind kind = ReaderKind::passive;
  StartAt start = StartAt::tail;
};

enum class ReadStatus : std::uint8_t {
  message,  // a message is in the buffer
  empty,    // nothing new (yet)
  lost,     // the reader fell behind: `lost` bytes were overwritten before it read them
};

// Where a reader stands, in one look (Reader::progress()).
struct ReaderProgress {
  std::uint64_t instance_id = 0;  // of the ring it reads: a recreated ring has a new one
  std::uint64_t pos = 0;          // Reader::position(); a pinned reader holds the RC byte
                                  // there: writers reclaim nothing at or after it
  std::uint64_t tail = 0;         // where the next message will be written
  std::uint64_t area_size = 0;
  // Bytes written and not yet read (Reader::behind()).
  std::uint64_t unread() const noexcept { return tail > pos + 1 ? tail - (pos + 1) : 0; }
  // The part of the area from pos to the tail: for a pinned reader, how full the ring
  // is behind its pin (writers drop once it nears 1).
  double fill() const noexcept {
    return area_size && tail > pos ? static_cast<double>(tail - pos) / static_cast<double>(area_size) : 0;
  }
};

struct ReadResult {
  ReadStatus status = ReadStatus::empty;
  format::MsgKind kind = format::MsgKind::data;
  std::uint64_t pos = 0;   // absolute position of the message (its RC byte)
  std::uint64_t lost = 0;  // with ReadStatus::lost: bytes lost this time
};

class Reader {
 public:
  // Opens the ring file for reading. Passive readers map it read-only.
  static Reader open(const std::string& path, const ReaderOptions& opts = {});
  // A passive reader of a ring image in memory (as Ring::open_memory); it only reads
  // the image, which must outlive the Reader. A pinned reader attaches to a Ring.
  static Reader open_memory(std::span<const std::byte> image, const ReaderOptions& opts = {});
  // A pinned reader on an already open ring (same process).
  static Reader attach(Ring& ring, const ReaderOptions& opts = {});

  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  // Copies the next message's payload into out (resized to fit).
  ReadResult next(std::vector<std::byte>& out);
  // Waits until there may be something to read, or the timeout passes. Pinned readers
  // sleep on the ring's futex; passive readers (which may not write) poll.
  void wait(std::chrono::milliseconds timeout);
  // True when the file at the path is no longer the ring this reader mapped
  // (removed or recreated by a restarted writer): reopen to follow it.
  bool stale() const;

  std::uint64_t position() const noexcept;
  std::uint64_t lost_bytes() const noexcept;  // total so far
  std::uint64_t behind() const noexcept;      // bytes between position and tail
  // The ring's identity, this reader's position and the tail (loaded with acquire) at
  // once: what a forwarder needs for its stall policy, without looking the reader up
  // in the file's reader table. Cheap: two loads.
  ReaderProgress progress() const noexcept;
  // A pinned reader's index in the ring's reader table (format::Header::readers: the
  // slot ringlog-dump --info lists for it, whose pos is position()); -1 for a passive one.
  int slot() const noexcept;
  RingStats stats() const noexcept;
  const format::Header& header() const noexcept;

  struct Impl;

 private:
  explicit Reader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringlog
