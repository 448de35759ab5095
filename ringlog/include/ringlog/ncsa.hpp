// NCSA access-log lines from transactions, the way varnishncsa makes them: a format
// string is compiled once into a list of operations; each client request (or backend
// fetch) is then scanned once and rendered as one line. Used by ringlog-ncsa and
// ringlog-forward. Every value taken from a record is escaped (C-style \xHH, or JSON
// with -j), so a line never carries a raw control byte or an unescaped quote.
// Thread safety: a compiled NcsaFormatter keeps scratch state; one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ringlog/group.hpp"
#include "ringlog/record.hpp"

namespace ringlog {

// varnishncsa's default: the NCSA "combined" format.
inline constexpr std::string_view kNcsaDefaultFormat =
    "%h %l %u %t \"%r\" %s %b \"%{Referer}i\" \"%{User-agent}i\"";

// A bad format string: pos is the byte offset of the offending '%' (or brace).
class NcsaFormatError : public std::runtime_error {
 public:
  NcsaFormatError(std::size_t pos, const std::string& message);
  std::size_t pos() const noexcept { return pos_; }

 private:
  std::size_t pos_;
};

struct NcsaOptions {
  // varnishncsa -j: JSON escaping (\uXXXX, invalid UTF-8 escaped byte by byte), a
  // missing string is "" and a missing number null, so that a JSON-shaped format
  // always yields valid JSON.
  bool json = false;
};

// Which transactions get a line (varnishncsa's -c / -b).
struct NcsaSides {
  bool client = true;
  bool backend = false;
};

class NcsaFormatter {
 public:
  // Compiles a format (varnishncsa's formatters, \n \t escapes, %% for a '%').
  // Throws NcsaFormatError.
  static NcsaFormatter compile(std::string_view format, const NcsaOptions& opts = {});

  NcsaFormatter(NcsaFormatter&&) noexcept;
  NcsaFormatter& operator=(NcsaFormatter&&) noexcept;
  ~NcsaFormatter();

  // client for a request, backend for a fetch, none for anything else (sessions,
  // raw records). The Begin type decides; without a Begin, the batch kind.
  static VxidKind side_of(const Transaction& t) noexcept;

  // Appends one line, '\n' included, for t (whatever its side).
  void format(const Transaction& t, std::string& out);
  // Appends a line for each transaction of g on a selected side; returns how many.
  std::size_t format_group(const Group& g, const NcsaSides& sides, std::string& out);

  const std::string& source() const noexcept;
  bool json() const noexcept;

 private:
  struct Impl;
  explicit NcsaFormatter(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

// Escaping used for every record value: C-style (\" \\ \n \r \t, \xHH for control and
// non-ASCII bytes) or, with json, append_json_escaped (ringlog/json.hpp).
void ncsa_escape(std::string& out, std::string_view s, bool json);

}  // namespace ringlog
