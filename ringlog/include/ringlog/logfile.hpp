// ringlog binary log files (`ringlog -w FILE` / `-r FILE`, docs/FORMAT.md "Log files"):
// a 16-byte file header (magic "RLOGFILE", version, flags), then entries, each a
// 4-byte little-endian payload length, a 1-byte message kind (format::MsgKind) and
// the payload: a record batch exactly as it travels in the ring. A header may appear
// again at any entry boundary (files concatenated, or appended to after a reopen).
// The reader trusts nothing: a damaged or cut file ends with an error, never a crash.
// Thread safety: a LogFileWriter / LogFileReader belongs to one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringlog/format.hpp"
#include "ringlog/group.hpp"

namespace ringlog {

namespace logfile {
inline constexpr char kMagic[8] = {'R', 'L', 'O', 'G', 'F', 'I', 'L', 'E'};
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kHeaderSize = 16;       // magic, u32 version, u32 flags (0)
inline constexpr std::size_t kEntryHeaderSize = 5;   // u32 length, u8 kind
inline constexpr std::uint32_t kMaxEntry = 64u << 20;  // larger lengths mean damage
}  // namespace logfile

class LogFileWriter {
 public:
  LogFileWriter() = default;
  // Opens (truncating, or appending with append=true) the file at path; "-" is
  // stdout. Writes the file header unless appending to a file that already has one.
  // Throws std::system_error on I/O errors, std::runtime_error when appending to a
  // file that is not a ringlog log file.
  static LogFileWriter open(const std::string& path, bool append = false);
  LogFileWriter(LogFileWriter&&) noexcept;
  LogFileWriter& operator=(LogFileWriter&&) noexcept;
  ~LogFileWriter();

  // One message (a record batch, or a notice). Buffered.
  void write(std::span<const std::byte> msg, format::MsgKind kind = format::MsgKind::data);
  // Each transaction of the group as one batch message (Begin..End, first/last flags
  // from what was seen): what `ringlog -w` stores for the selected groups.
  void write_group(const Group& g);
  void flush();  // throws std::system_error
  // Closes and opens the same path again in append mode (logrotate's SIGHUP).
  void reopen();
  bool is_open() const noexcept { return fd_ >= 0; }
  const std::string& path() const noexcept { return path_; }

 private:
  void put(const void* p, std::size_t n);
  int fd_ = -1;
  bool own_fd_ = false;
  std::string path_;
  std::string buf_;
};

// Encodes one transaction as a record batch (for write_group and tests).
void encode_transaction(std::string& out, const Transaction& t);

enum class LogFileStatus : std::uint8_t {
  message,   // out holds one message
  end,       // clean end of the file
  bad_magic, // the file (or a part appended to it) is not a ringlog log file
  bad_version,
  damaged,   // an entry header makes no sense (length too large, unknown kind)
  cut,       // the file ends inside an entry (a writer was killed mid-write)
  io_error,
};
const char* to_string(LogFileStatus s) noexcept;

class LogFileReader {
 public:
  // "-" reads stdin. Throws std::system_error when the file cannot be opened.
  static LogFileReader open(const std::string& path);
  // Reads from memory (tests, fuzzing).
  static LogFileReader from_memory(std::string_view bytes);
  LogFileReader(LogFileReader&&) noexcept;
  LogFileReader& operator=(LogFileReader&&) noexcept;
  ~LogFileReader();

  LogFileStatus next(std::vector<std::byte>& out, format::MsgKind& kind);
  std::uint64_t offset() const noexcept { return offset_; }  // bytes consumed so far
  const std::string& path() const noexcept { return path_; }

 private:
  LogFileReader() = default;
  bool fill(std::size_t need);  // ensures need bytes buffered; false at EOF/error
  int fd_ = -1;
  bool own_fd_ = false;
  bool io_error_ = false;
  std::string path_;
  std::string buf_;
  std::size_t pos_ = 0;
  std::uint64_t offset_ = 0;
  bool header_seen_ = false;
};

}  // namespace ringlog
