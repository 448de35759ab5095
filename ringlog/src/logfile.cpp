// ringlog binary log files: what `ringlog -w` writes and `-r` reads (docs/FORMAT.md,
// "Log files"). The writer never loses an accepted message silently (I/O errors
// throw); the reader never trusts a length it has not bounded.
#include "ringlog/logfile.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "ringlog/record.hpp"

namespace ringlog {

namespace {

constexpr std::size_t kFlushAt = 256 * 1024;

void put_u32(std::string& out, std::uint32_t v) {
  char b[4] = {char(v & 0xff), char((v >> 8) & 0xff), char((v >> 16) & 0xff), char((v >> 24) & 0xff)};
  out.append(b, 4);
}
std::uint32_t get_u32(const char* p) {
  auto b = [&](int i) { return std::uint32_t(static_cast<unsigned char>(p[i])); };
  return b(0) | (b(1) << 8) | (b(2) << 16) | (b(3) << 24);
}

std::string file_header() {
  std::string h(logfile::kMagic, sizeof logfile::kMagic);
  put_u32(h, logfile::kVersion);
  put_u32(h, 0);
  return h;
}

bool known_kind(std::uint8_t k) {
  return k == std::uint8_t(format::MsgKind::data) || k == std::uint8_t(format::MsgKind::notice);
}

void write_all(int fd, const char* p, std::size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "write " + path);
    }
    p += w;
    n -= std::size_t(w);
  }
}

}  // namespace

// ---------------------------------------------------------------- writer

LogFileWriter LogFileWriter::open(const std::string& path, bool append) {
  LogFileWriter w;
  w.path_ = path;
  if (path == "-") {
    w.fd_ = STDOUT_FILENO;
    w.own_fd_ = false;
    w.buf_ = file_header();
    return w;
  }
  // Appending reads the existing header back, hence O_RDWR.
  int flags = O_CREAT | O_CLOEXEC | (append ? (O_RDWR | O_APPEND) : (O_WRONLY | O_TRUNC));
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
  w.fd_ = fd;
  w.own_fd_ = true;
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::system_error(errno, std::generic_category(), "stat " + path);
  if (!append || st.st_size == 0) {
    w.buf_ = file_header();
  } else {
    // Appending: the file must already be one of ours.
    char head[logfile::kHeaderSize];
    ssize_t n = ::pread(fd, head, sizeof head, 0);
    if (n != ssize_t(sizeof head) || std::memcmp(head, logfile::kMagic, sizeof logfile::kMagic) != 0)
      throw std::runtime_error(path + ": not a ringlog log file; refusing to append to it");
  }
  return w;
}

LogFileWriter::LogFileWriter(LogFileWriter&& o) noexcept
    : fd_(o.fd_), own_fd_(o.own_fd_), path_(std::move(o.path_)), buf_(std::move(o.buf_)) {
  o.fd_ = -1;
  o.own_fd_ = false;
}

LogFileWriter& LogFileWriter::operator=(LogFileWriter&& o) noexcept {
  if (this != &o) {
    if (own_fd_ && fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    own_fd_ = o.own_fd_;
    path_ = std::move(o.path_);
    buf_ = std::move(o.buf_);
    o.fd_ = -1;
    o.own_fd_ = false;
  }
  return *this;
}

LogFileWriter::~LogFileWriter() {
  try {
    flush();
  } catch (...) {
    // Destructors must not throw; callers that care flush() first.
  }
  if (own_fd_ && fd_ >= 0) ::close(fd_);
}

void LogFileWriter::put(const void* p, std::size_t n) {
  buf_.append(static_cast<const char*>(p), n);
  if (buf_.size() >= kFlushAt) flush();
}

void LogFileWriter::write(std::span<const std::byte> msg, format::MsgKind kind) {
  if (msg.size() > logfile::kMaxEntry) throw std::length_error("message too large for a log file entry");
  put_u32(buf_, std::uint32_t(msg.size()));
  buf_ += char(kind);
  put(msg.data(), msg.size());
}

void encode_transaction(std::string& out, const Transaction& t) {
  std::uint8_t hdr[kBatchHeaderMax];
  std::uint8_t flags = 0;
  if (t.begun) flags |= kBatchFirst;
  if (t.ended) flags |= kBatchLast;
  std::size_t n = encode_batch_header(hdr, t.vxid, t.kind, flags);
  out.append(reinterpret_cast<const char*>(hdr), n);
  for (const HeldRecord& r : t.records) {
    std::uint8_t rh[kRecordHeaderMax];
    std::size_t m = encode_record_header(rh, r.tag, r.size, r.truncated);
    out.append(reinterpret_cast<const char*>(rh), m);
    out += t.payload(r);
  }
}

void LogFileWriter::write_group(const Group& g) {
  std::string msg;
  for (const Transaction* t : g.txns) {
    msg.clear();
    encode_transaction(msg, *t);
    write(std::as_bytes(std::span(msg.data(), msg.size())));
  }
}

void LogFileWriter::flush() {
  if (fd_ < 0 || buf_.empty()) return;
  std::string pending;
  pending.swap(buf_);
  write_all(fd_, pending.data(), pending.size(), path_);
}

void LogFileWriter::reopen() {
  if (path_ == "-" || path_.empty()) {
    flush();
    return;
  }
  flush();
  if (own_fd_ && fd_ >= 0) ::close(fd_);
  fd_ = -1;
  *this = open(path_, true);
}

// ---------------------------------------------------------------- reader

const char* to_string(LogFileStatus s) noexcept {
  switch (s) {
    case LogFileStatus::message: return "message";
    case LogFileStatus::end: return "end of file";
    case LogFileStatus::bad_magic: return "not a ringlog log file (bad magic)";
    case LogFileStatus::bad_version: return "unsupported log file version";
    case LogFileStatus::damaged: return "damaged entry header";
    case LogFileStatus::cut: return "file ends inside an entry (cut short)";
    case LogFileStatus::io_error: return "read error";
  }
  return "?";
}

LogFileReader LogFileReader::open(const std::string& path) {
  LogFileReader r;
  r.path_ = path;
  if (path == "-") {
    r.fd_ = STDIN_FILENO;
    return r;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw std::system_error(EISDIR, std::generic_category(), "open " + path);
  }
  r.fd_ = fd;
  r.own_fd_ = true;
  return r;
}

LogFileReader LogFileReader::from_memory(std::string_view bytes) {
  LogFileReader r;
  r.path_ = "(memory)";
  r.buf_.assign(bytes);
  return r;
}

LogFileReader::LogFileReader(LogFileReader&& o) noexcept
    : fd_(o.fd_), own_fd_(o.own_fd_), io_error_(o.io_error_), path_(std::move(o.path_)), buf_(std::move(o.buf_)),
      pos_(o.pos_), offset_(o.offset_), header_seen_(o.header_seen_) {
  o.fd_ = -1;
  o.own_fd_ = false;
}

LogFileReader& LogFileReader::operator=(LogFileReader&& o) noexcept {
  if (this != &o) {
    if (own_fd_ && fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    own_fd_ = o.own_fd_;
    io_error_ = o.io_error_;
    path_ = std::move(o.path_);
    buf_ = std::move(o.buf_);
    pos_ = o.pos_;
    offset_ = o.offset_;
    header_seen_ = o.header_seen_;
    o.fd_ = -1;
    o.own_fd_ = false;
  }
  return *this;
}

LogFileReader::~LogFileReader() {
  if (own_fd_ && fd_ >= 0) ::close(fd_);
}

bool LogFileReader::fill(std::size_t need) {
  if (buf_.size() - pos_ >= need) return true;
  if (fd_ < 0) return false;
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  while (buf_.size() < need) {
    std::size_t old = buf_.size();
    std::size_t want = std::max<std::size_t>(need - old, 1 << 16);
    buf_.resize(old + want);
    ssize_t n = ::read(fd_, buf_.data() + old, want);
    if (n < 0 && errno == EINTR) {
      buf_.resize(old);
      continue;
    }
    if (n <= 0) {
      buf_.resize(old);
      if (n < 0) io_error_ = true;
      return false;
    }
    buf_.resize(old + std::size_t(n));
  }
  return true;
}

LogFileStatus LogFileReader::next(std::vector<std::byte>& out, format::MsgKind& kind) {
  for (;;) {
    if (!fill(logfile::kEntryHeaderSize)) {
      if (io_error_) return LogFileStatus::io_error;
      std::size_t left = buf_.size() - pos_;
      if (left == 0) return header_seen_ ? LogFileStatus::end : LogFileStatus::bad_magic;
      if (!header_seen_) return LogFileStatus::bad_magic;
      return LogFileStatus::cut;
    }
    const char* p = buf_.data() + pos_;
    // A file header: at the start, or again where files were concatenated. Its first
    // four bytes read as a length far above kMaxEntry, so it cannot be an entry.
    if (std::memcmp(p, logfile::kMagic, logfile::kEntryHeaderSize) == 0) {
      if (!fill(logfile::kHeaderSize)) return io_error_ ? LogFileStatus::io_error : LogFileStatus::cut;
      p = buf_.data() + pos_;
      if (std::memcmp(p, logfile::kMagic, sizeof logfile::kMagic) != 0) return LogFileStatus::bad_magic;
      if (get_u32(p + 8) != logfile::kVersion) return LogFileStatus::bad_version;
      pos_ += logfile::kHeaderSize;
      offset_ += logfile::kHeaderSize;
      header_seen_ = true;
      continue;
    }
    if (!header_seen_) return LogFileStatus::bad_magic;
    std::uint32_t len = get_u32(p);
    auto k = static_cast<std::uint8_t>(p[4]);
    if (len > logfile::kMaxEntry || !known_kind(k)) return LogFileStatus::damaged;
    if (!fill(logfile::kEntryHeaderSize + len)) return io_error_ ? LogFileStatus::io_error : LogFileStatus::cut;
    p = buf_.data() + pos_;
    out.resize(len);
    if (len) std::memcpy(out.data(), p + logfile::kEntryHeaderSize, len);
    kind = static_cast<format::MsgKind>(k);
    pos_ += logfile::kEntryHeaderSize + len;
    offset_ += logfile::kEntryHeaderSize + len;
    return LogFileStatus::message;
  }
}

}  // namespace ringlog
