// Incremental HTTP/1.1 head parsers. They never copy: the parsed head holds views into
// the buffer passed to parse(). Give them everything received since the start of the
// head (the same bytes again plus what arrived); they resume scanning where they
// stopped, so a head delivered one byte at a time costs O(size), not O(size^2).
// They must never accept what a stricter peer would frame differently (smuggling).
#pragma once

#include "ringproxy/http/message.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ringproxy::http {

// Why a head (or a chunked body) was refused. error_reason() is the text for the
// Error / FetchError record; error_status() the status to answer.
enum class Error : std::uint8_t {
  None,
  HeadTooLarge,        // 431 header block over max_head_bytes
  TooManyHeaders,      // 431 over max_headers
  UrlTooLong,          // 414 request-target over max_url
  BadRequestLine,      // 400 malformed start line
  BadMethod,           // 400 method is not a token
  BadTarget,           // 400 CTL / SP / non-ASCII in the request-target, or empty
  BadVersion,          // 400 not HTTP/<digit>.<digit>
  VersionNotSupported, // 505 HTTP/<major != 1>
  BadStatusLine,       // 502 (response) malformed status line
  BadHeaderName,       // 400 empty name, non-token byte, or whitespace before ':'
  BadHeaderValue,      // 400 CTL (NUL...) in a field value
  ObsFold,             // 400 a line starting with SP/HTAB (obsolete line folding)
  BareCR,              // 400 CR not followed by LF
  BareLF,              // 400 LF without CR where the options forbid it
  MissingHost,         // 400 HTTP/1.1 request without Host
  MultipleHost,        // 400 more than one Host field
  BadContentLength,    // 400 not digits, or overflow
  ConflictingContentLength,  // 400 different Content-Length values
  ContentLengthWithTransferEncoding,  // 400 (requests) both present
  TransferEncodingNotChunked,  // 400 (requests) last coding is not chunked
  ChunkedTwice,        // 400 "chunked" applied more than once
  TransferEncodingHttp10,  // 400 (requests) Transfer-Encoding in an HTTP/1.0 message
  TooManyConnectionHeaders,  // 400 more than ConnectionInfo::kMaxFields Connection fields
  BadChunkSize,        // 400 empty, non-hex or overflowing chunk size
  BadChunkExtension,   // 400 bad byte in a chunk extension, or extension too long
  MissingChunkCRLF,    // 400 chunk data not followed by CRLF
  BadTrailer,          // 400 malformed trailer field
  TrailerTooLarge,     // 400 trailer section over max_head_bytes
  BadHost,             // 400 Host is not uri-host[:port] (RFC 9112 §3.2)
};

std::string_view error_reason(Error e);
// Status to answer a client for a request-side error (400/414/431/505); for a
// response-side error (from ResponseParser or a response's chunked body) a proxy
// answers 502 whatever this says.
int error_status(Error e);

struct ParseResult {
  enum Status : std::uint8_t { NeedMore, Done, Failed };
  Status status = NeedMore;
  std::size_t consumed = 0;  // Done: bytes of the head (the body starts there)
  Error error = Error::None; // Failed: why
  int http_status = 0;       // Failed: error_status(error) (ResponseParser: 502)

  bool done() const { return status == Done; }
  bool need_more() const { return status == NeedMore; }
  bool failed() const { return status == Failed; }
};

class RequestParser {
 public:
  explicit RequestParser(const Limits& limits = {});
  void set_limits(const Limits& limits) { limits_ = limits; reset(); }
  const Limits& limits() const { return limits_; }

  // `buf` starts at the first byte of the head (leading empty lines allowed). On
  // Done, `out` holds views into buf and the parser is ready for the next message
  // (pipelining: call again with buf.substr(consumed + body bytes)). On NeedMore
  // call again with the same bytes plus more. After Failed, answer and close.
  ParseResult parse(std::string_view buf, RequestHead& out);
  void reset() {
    skip_ = scanned_ = line1_end_ = 0;
    line1_checked_ = false;
  }

 private:
  Limits limits_;
  std::size_t skip_ = 0;       // leading empty lines
  std::size_t scanned_ = 0;    // bytes already searched for the end of the head
  std::size_t line1_end_ = 0;  // end of the request line (+1), 0 while not seen
  bool line1_checked_ = false; // request line validated while the head is incomplete
};

class ResponseParser {
 public:
  // allow_bare_lf defaults to true for responses (origins in the wild send them).
  explicit ResponseParser(const Limits& limits = response_defaults());
  static Limits response_defaults() { Limits l; l.allow_bare_lf = true; return l; }
  void set_limits(const Limits& limits) { limits_ = limits; reset(); }
  const Limits& limits() const { return limits_; }

  // As RequestParser::parse. `request_method` decides the framing (HEAD has no body,
  // 2xx to CONNECT is a tunnel). A 1xx head (interim) is Done too: parse again for
  // the final response.
  ParseResult parse(std::string_view buf, ResponseHead& out, Method request_method);
  void reset() { skip_ = scanned_ = line1_end_ = 0; }

 private:
  Limits limits_;
  std::size_t skip_ = 0;
  std::size_t scanned_ = 0;
  std::size_t line1_end_ = 0;
};

}  // namespace ringproxy::http
