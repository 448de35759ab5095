// Chunked transfer coding (RFC 9112 §7.1): an incremental decoder that consumes
// every byte it is given (the caller never keeps a partial line) and hands out chunk
// data as views into the input, and the encoder's framing bytes. The decoder must
// reject every size line a stricter or laxer peer could read differently.
#pragma once

#include "ringproxy/http/parser.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringproxy::http {

class ChunkedDecoder {
 public:
  struct Step {
    enum Kind : std::uint8_t {
      NeedMore,  // all of the input was consumed (framing bytes only); give more
      Data,      // `data` is body bytes (a view into the input)
      Done,      // last chunk and trailer section complete; `consumed` ends the body
      Failed,    // `error` says why; answer 400 (request) / 502 (response) and close
    };
    Kind kind = NeedMore;
    std::size_t consumed = 0;   // input bytes used by this step (framing and data)
    std::string_view data;      // Data: the body bytes
    Error error = Error::None;
  };

  // max_trailer_bytes bounds the trailer section; max_ext_bytes one chunk's extensions.
  explicit ChunkedDecoder(std::size_t max_trailer_bytes = 64 * 1024, std::size_t max_ext_bytes = 4096)
      : max_trailer_(max_trailer_bytes), max_ext_(max_ext_bytes) {}

  // Decode from the start of `in`. Loop: step, drop step.consumed bytes, forward
  // Data, until NeedMore (input exhausted), Done or Failed. Bytes after Done belong to
  // the next message.
  Step step(std::string_view in);
  void reset();

  bool done() const { return state_ == State::Done; }
  std::uint64_t body_bytes() const { return body_bytes_; }  // decoded data so far
  std::size_t trailer_fields() const { return trailer_fields_; }  // validated; not forwarded

 private:
  enum class State : std::uint8_t {
    Size, SizeBWS, Ext, SizeLF, Data, DataCR, DataLF,
    TrailerLineStart, TrailerName, TrailerValue, TrailerLF, FinalLF, Done, Failed
  };
  Step fail(Error e, std::size_t consumed);

  State state_ = State::Size;
  std::uint64_t remaining_ = 0;  // data bytes left in the current chunk, or the size being read
  unsigned digits_ = 0;          // significant hex digits of the size line
  bool any_digit_ = false;
  std::size_t ext_bytes_ = 0;
  std::size_t trailer_bytes_ = 0;
  std::size_t trailer_fields_ = 0;
  std::uint64_t body_bytes_ = 0;
  std::size_t max_trailer_;
  std::size_t max_ext_;
};

// Encoder: "<hex>\r\n" before each chunk's data, "\r\n" after it, and the last chunk.
// A zero-length chunk must never be written as data (it would end the body).
inline constexpr std::string_view kChunkDataEnd = "\r\n";
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::size_t kChunkHeaderMax = 18;  // 16 hex digits + CRLF
// Writes "<hex>\r\n" into out (at least kChunkHeaderMax bytes); returns its length.
std::size_t chunk_header(char* out, std::uint64_t size);
// out += "<hex>\r\n" data "\r\n" (nothing when data is empty).
void append_chunk(std::string& out, std::string_view data);

}  // namespace ringproxy::http
