// ringlog-dump core: reads any ring file (ringlog's own, or HAProxy's pre-3.0 and 3.0+
// layouts) from bytes that are never trusted, lists its messages, describes its header,
// and repairs what crashed processes left behind. The tool and the fuzz targets link
// this library; it never writes to a file unless repair() is given a writable image.
// Its files, in the order a dump uses them: image.cpp (layouts, parse), framing.cpp
// (one message's framing, in-flight batches, the boundary map), walk.cpp, output.cpp
// (messages, --info, the repair report), repair.cpp; main.cpp is the command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringlog/format.hpp"
#include "ringlog/repair.hpp"

namespace ringlog::dump {

enum class Layout : std::uint8_t {
  ringlog,      // "RINGLOG1" magic, docs/FORMAT.md
  haproxy_v1,   // HAProxy < 3.0: struct buffer {size, area*, data, head} at the start
  haproxy_v2,   // HAProxy 3.0+: size, rsvd, tail, head (32-byte header), area at rsvd
  haproxy_v2a,  // HAProxy 3.0+, cache-aligned: size, rsvd, tail @64, head @128, area at rsvd
};
std::string_view layout_name(Layout l) noexcept;  // "ringlog", "haproxy-v1", ...
std::optional<Layout> layout_by_name(std::string_view s) noexcept;

// A ring file seen through bytes (a mapping or a copy). Positions are absolute and
// continuous for every layout: byte p lives at area offset p mod area_size. For HAProxy
// files (offsets only) head becomes area_size + head offset and tail head + data.
struct Image {
  Layout layout = Layout::ringlog;
  std::span<std::uint8_t> file;   // writable only when repairing
  std::uint64_t header_len = 0;
  std::uint64_t area_size = 0;
  std::uint64_t head = 0;
  std::uint64_t tail = 0;         // without the lock bit
  bool locked = false;
  bool positions_ok = false;      // head < tail and tail - head <= area_size
  std::string positions_why;      // when not
  bool tail_ok = true;            // where the messages end is known (else nothing can be read)
  std::uint64_t hap_head = 0, hap_tail = 0;  // HAProxy: the offsets as the file holds them (v1: head + data)
  std::uint64_t tail_stored = 0;  // ringlog: tail as the file holds it, without the lock bit
  bool tail_rebuilt = false;      // ringlog: the stored tail was damaged; tail is 1 + bytes_written
  std::string tail_why;           // when rebuilt
  std::vector<std::string> warnings;  // layout checks that -f overrode
  // How processes named in the file are judged (walk, info, repair): the system's view
  // by default; tests and fuzz targets set a function of their own after parse().
  repair::Liveness alive = repair::system_alive;

  // Inlined even at -O1 (the fuzz build): the framing reads call them per byte.
  [[gnu::always_inline]] const std::uint8_t* area() const noexcept { return file.data() + header_len; }
  [[gnu::always_inline]] std::uint8_t at(std::uint64_t pos) const noexcept { return area()[pos % area_size]; }
  // ringlog layout only (the file is 64-byte aligned: parse() checks it).
  const format::Header& hdr() const noexcept { return *reinterpret_cast<const format::Header*>(file.data()); }
  format::Header& hdr_mut() const noexcept { return *reinterpret_cast<format::Header*>(file.data()); }
  // The most bytes from head to tail: the area, but one less in HAProxy's v2 layouts,
  // whose head and tail are offsets that may not be equal (parse() refuses them).
  std::uint64_t max_span() const noexcept {
    return layout == Layout::haproxy_v2 || layout == Layout::haproxy_v2a ? area_size - 1 : area_size;
  }
  // Oldest position a message may start at (tail - max_span(), or 0).
  std::uint64_t window_lo() const noexcept { return tail > max_span() ? tail - max_span() : 0; }
  // Reloads head and tail (a live ring moves).
  void reload_positions() noexcept;
};

// Parses the layout. forced: the layout to use (-f); otherwise detected (ringlog by its
// magic, HAProxy files as haring does). Returns "" on success, else why the file cannot
// be read. With force, layout mismatches become warnings where the bytes still allow it.
std::string parse(std::span<std::uint8_t> file, std::optional<Layout> forced, bool force, Image& out);

// One message found in the ring.
struct Message {
  std::uint64_t pos = 0;  // position of its RC byte
  std::uint8_t rc = 0;
  format::MsgKind kind = format::MsgKind::data;
  std::string payload;
};

// A range of the area that could not be read as messages.
struct Skipped {
  std::uint64_t pos = 0, end = 0;  // [pos, end): from its first RC to the next good RC
  std::string why;
};

struct WalkOptions {
  bool scan = false;           // resynchronise after damage by scanning (haring -r)
  bool live_recheck = true;    // ringlog: discard copies that head overtook meanwhile
  std::uint64_t max_messages = ~0ULL;
  bool keep_messages = true;   // false: only check the framing (messages stays empty; no payload copies)
};

struct WalkResult {
  std::vector<Message> messages;   // data and notices, oldest first (pads are counted)
  std::vector<Skipped> skipped;    // torn batches, in-flight batches and damaged ranges
  std::uint64_t start = 0;         // where the walk started (head, or a rebuilt head)
  std::uint64_t end = 0;           // where it stopped
  std::uint64_t pads = 0, pad_bytes = 0;
  std::uint64_t lost_bytes = 0;    // overtaken by writers while reading (live ring)
  bool head_rebuilt = false;
  bool complete = false;           // reached tail - 1 exactly
  std::string stop_reason;         // when not complete
};

// Lists the messages from head to tail. Torn batches of writers recorded in writer
// slots are skipped whole; anything else that breaks the framing stops the walk, or
// with scan, is skipped up to the next position from which the framing reaches tail.
WalkResult walk(const Image& img, const WalkOptions& opts);

// Output of messages.
enum class Mode : std::uint8_t { raw, records };
struct PrintOptions {
  Mode mode = Mode::raw;
  bool lf_remap = false;   // LF inside payloads -> CR VT (haring -l)
  bool json = false;
};
std::string format_messages(const Image& img, const WalkResult& w, const PrintOptions& o);
std::string format_info(const Image& img, const WalkResult& w, bool json);

// Repair.
struct RepairOptions {
  bool in_place = false;   // the image is the live file: processes still alive keep their entries
};
struct RepairReport {
  std::vector<std::string> fixed;        // one line per fix
  std::uint64_t kept_msgs = 0, kept_bytes = 0;
  std::uint64_t discarded_msgs = 0, discarded_bytes = 0;  // framed bytes
  std::uint64_t torn_batches = 0;
  std::uint64_t bad_records = 0;         // data messages whose record batch does not decode (found, kept: no fix)
  bool changed() const noexcept { return !fixed.empty(); }
};
enum class RepairStatus : std::uint8_t { clean, repaired, refused, unrecoverable };
// Repairs img.file (which must be writable). error: why, when refused or unrecoverable.
RepairStatus repair(Image& img, const RepairOptions& opts, RepairReport& rep, std::string& error);
std::string format_report(const RepairReport& rep, bool json);

// The tail-lock owner of a ringlog ring: its pid (0 = not recorded), writer slot (-1 =
// none) and whether it is alive (img.alive, with the start time in its writer slot).
repair::LockOwner lock_owner(const Image& img);

}  // namespace ringlog::dump
