// Varnish's text layout for records and groups, shared by every tool:
//   grouped:  "*   << Request  >> 32770     "   then  "-   ReqURL         /"
//             (level markers padded to 3 columns, tag left-aligned in 14, vxid in 10,
//             a blank line after each group)
//   raw:      "     32770 ReqURL         c /"  (vxid right-aligned in 10, c/b/-)
// Unsafe tags are printed escaped and quoted when they hold anything unprintable;
// binary tags as "[len] hex". Truncated records end with " [truncated]".
// Thread safety: stateless functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ringlog/group.hpp"
#include "ringlog/record.hpp"

namespace ringlog {

// A growable text buffer the printers write into through a pointer: one room check per
// record line instead of one per piece appended. Its bytes are always initialised
// (grown with zeros), so a printer may load a little past what it wrote.
class OutBuffer {
 public:
  OutBuffer() = default;
  OutBuffer(OutBuffer&& o) noexcept : buf_(std::move(o.buf_)), size_(o.size_), memo_(o.memo_) { o.size_ = 0; }
  OutBuffer& operator=(OutBuffer&& o) noexcept {
    buf_ = std::move(o.buf_);
    size_ = o.size_;
    memo_ = o.memo_;
    o.size_ = 0;
    return *this;
  }

  // Room for n more bytes at the returned pointer; commit() says how far was written.
  char* reserve(std::size_t n) {
    if (buf_.size() - size_ < n) [[unlikely]] grow(n);
    return buf_.data() + size_;
  }
  void commit(const char* end) noexcept { size_ = std::size_t(end - buf_.data()); }

  void append(std::string_view s) {
    char* p = reserve(s.size());
    if (!s.empty()) std::memcpy(p, s.data(), s.size());
    size_ += s.size();
  }
  void append(std::size_t n, char c) {
    char* p = reserve(n);
    std::memset(p, c, n);
    size_ += n;
  }
  void push_back(char c) { *reserve(1) = c, ++size_; }
  OutBuffer& operator+=(std::string_view s) { return append(s), *this; }
  OutBuffer& operator+=(char c) { return push_back(c), *this; }

  const char* data() const noexcept { return buf_.data(); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::string_view view() const noexcept { return {buf_.data(), size_}; }
  void clear() noexcept { size_ = 0; }

  // The printers' memo of the last vxid column they formatted here (records come a
  // batch at a time: the same vxid line after line).
  struct VxidMemo {
    std::uint64_t vxid = 0;
    std::uint32_t len = 0;  // 0: empty
    char text[28];
  };
  VxidMemo& vxid_memo() noexcept { return memo_; }

 private:
  void grow(std::size_t n);
  std::vector<char> buf_;  // its size is the capacity; size_ bytes are text
  std::size_t size_ = 0;
  VxidMemo memo_;
};

// "<< Request  >>" and friends, 14 columns (Record for vxid 0, Unknown for no Begin).
std::string_view txn_label(const Transaction& t) noexcept;

// The payload as Varnish prints it, by the tag's flags.
void append_payload(OutBuffer& out, Tag tag, std::string_view payload);
// One -g raw line.
void print_raw(OutBuffer& out, const Record& r);
// One record line at a group level (1 = "-", 2 = "--"...).
void print_terse(OutBuffer& out, unsigned level, const Record& r);
// A whole group: raw lines for Grouping::raw, else the transaction layout.
void print_group(OutBuffer& out, const Group& g);

// The same, appended to a string.
void append_payload(std::string& out, Tag tag, std::string_view payload);
void print_raw(std::string& out, const Record& r);
void print_terse(std::string& out, unsigned level, const Record& r);
void print_group(std::string& out, const Group& g);

}  // namespace ringlog
