// ringlog-forward: RFC 5424 syslog messages and their transport framing (RFC 6587
// octet counting or LF for TCP; one datagram per message for UDP, RFC 5426).
// Pure functions: no I/O, no global state; they must never produce a frame a
// collector could split or misread (header fields are sanitised, LF framing escapes LF).
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace ringlog::forward {

enum class Framing : std::uint8_t {
  octet_counting,  // "LEN SP MSG" (RFC 6587 3.4.1), the default: any byte may appear
  lf,              // "MSG LF" (RFC 6587 3.4.2, non-transparent): LF in MSG becomes "#012"
};
std::optional<Framing> framing_by_name(std::string_view s) noexcept;  // "octet-counting", "lf"

// Facility and severity by their RFC 5424 / syslog(3) names ("local0", "info"...).
std::optional<int> facility_by_name(std::string_view s) noexcept;
std::optional<int> severity_by_name(std::string_view s) noexcept;

struct HeaderFields {
  int facility = 16;            // local0
  int severity = 6;             // info
  std::string hostname = "-";   // HOSTNAME, 1*255 PRINTUSASCII
  std::string app_name = "ringlog";  // APP-NAME, 1*48
  std::string procid = "-";     // PROCID, 1*128
};

// Keeps PRINTUSASCII (33..126) and at most max bytes; "-" when nothing is left.
std::string sanitize_field(std::string_view s, std::size_t max);

// "2026-11-30T01:35:47.123456Z" (RFC 5424 TIMESTAMP, UTC, microseconds).
void append_timestamp(std::string& out, std::uint64_t realtime_ns);

// One RFC 5424 message: "<PRI>1 TIMESTAMP HOST APP PROCID MSGID - MSG" (no SD), dated
// realtime_ns (ringlog::realtime_ns(): nanoseconds since the epoch).
// Fields must already be sanitised (sanitize_field); msgid likewise (at most 32).
void append_rfc5424(std::string& out, const HeaderFields& h, std::string_view msgid, std::uint64_t realtime_ns,
                    std::string_view msg);

// The bytes to write on a TCP stream for one message.
void append_frame(std::string& out, Framing f, std::string_view msg);

// Reads one frame back (for tests and tools): returns the message and sets used, or
// nullopt when more bytes are needed (or the frame is malformed: bad is set then).
std::optional<std::string> read_frame(std::string_view in, Framing f, std::size_t& used, bool& bad);

}  // namespace ringlog::forward
