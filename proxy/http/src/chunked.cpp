// Chunked decoder: one byte-at-a-time state machine for the framing (so a split at
// any byte boundary behaves like the whole), and whole spans for chunk data. Strict:
// a size line is hex digits, optional extensions, CRLF; nothing else.
#include "ringproxy/http/chunked.hpp"

#include "chars.hpp"

namespace ringproxy::http {

namespace {
constexpr unsigned kMaxSizeDigits = 15;  // < 2^60: no overflow in any sum we make

int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

void ChunkedDecoder::reset() {
  state_ = State::Size;
  remaining_ = 0;
  digits_ = 0;
  any_digit_ = false;
  ext_bytes_ = 0;
  trailer_bytes_ = 0;
  trailer_fields_ = 0;
  body_bytes_ = 0;
}

ChunkedDecoder::Step ChunkedDecoder::fail(Error e, std::size_t consumed) {
  state_ = State::Failed;
  Step s;
  s.kind = Step::Failed;
  s.error = e;
  s.consumed = consumed;
  return s;
}

ChunkedDecoder::Step ChunkedDecoder::step(std::string_view in) {
  const std::size_t n = in.size();
  std::size_t i = 0;
  Step s;
  if (state_ == State::Done) {
    s.kind = Step::Done;
    return s;
  }
  if (state_ == State::Failed) {
    s.kind = Step::Failed;
    s.error = Error::BadChunkSize;
    return s;
  }
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(in[i]);
    switch (state_) {
      case State::Size: {
        int h = hex_value(c);
        if (h >= 0) {
          if (remaining_ != 0 || h != 0) {
            if (++digits_ > kMaxSizeDigits) return fail(Error::BadChunkSize, i);
          }
          remaining_ = remaining_ * 16 + static_cast<unsigned>(h);
          any_digit_ = true;
          break;
        }
        if (!any_digit_) return fail(Error::BadChunkSize, i);
        if (c == ';') state_ = State::Ext;
        else if (c == ' ' || c == '\t') state_ = State::SizeBWS;
        else if (c == '\r') state_ = State::SizeLF;
        else if (c == '\n') return fail(Error::BareLF, i);
        else return fail(Error::BadChunkSize, i);
        break;
      }
      case State::SizeBWS:
        // BWS is only allowed before ';' (chunk-ext = *( BWS ";" ... )).
        if (++ext_bytes_ > max_ext_) return fail(Error::BadChunkExtension, i);
        if (c == ';') state_ = State::Ext;
        else if (c != ' ' && c != '\t') return fail(Error::BadChunkExtension, i);
        break;
      case State::Ext:
        if (c == '\r') {
          state_ = State::SizeLF;
        } else if (c == '\n') {
          return fail(Error::BareLF, i);
        } else {
          if (!(detail::kCharClass[c] & detail::kValue)) return fail(Error::BadChunkExtension, i);
          if (++ext_bytes_ > max_ext_) return fail(Error::BadChunkExtension, i);
        }
        break;
      case State::SizeLF:
        if (c != '\n') return fail(Error::BareCR, i);
        digits_ = 0;
        any_digit_ = false;
        ext_bytes_ = 0;
        state_ = remaining_ == 0 ? State::TrailerLineStart : State::Data;
        break;
      case State::Data: {
        std::size_t avail = n - i;
        std::size_t k = remaining_ < avail ? static_cast<std::size_t>(remaining_) : avail;
        remaining_ -= k;
        body_bytes_ += k;
        if (remaining_ == 0) state_ = State::DataCR;
        s.kind = Step::Data;
        s.data = in.substr(i, k);
        s.consumed = i + k;
        return s;
      }
      case State::DataCR:
        if (c != '\r') return fail(Error::MissingChunkCRLF, i);
        state_ = State::DataLF;
        break;
      case State::DataLF:
        if (c != '\n') return fail(Error::MissingChunkCRLF, i);
        state_ = State::Size;
        break;
      case State::TrailerLineStart:
        if (c == '\r') {
          state_ = State::FinalLF;
          break;
        }
        if (++trailer_bytes_ > max_trailer_) return fail(Error::TrailerTooLarge, i);
        if (c == '\n') return fail(Error::BareLF, i);
        if (!(detail::kCharClass[c] & detail::kTchar)) return fail(Error::BadTrailer, i);  // obs-fold too
        state_ = State::TrailerName;
        break;
      case State::TrailerName:
        if (++trailer_bytes_ > max_trailer_) return fail(Error::TrailerTooLarge, i);
        if (c == ':') state_ = State::TrailerValue;
        else if (!(detail::kCharClass[c] & detail::kTchar)) return fail(Error::BadTrailer, i);
        break;
      case State::TrailerValue:
        if (++trailer_bytes_ > max_trailer_) return fail(Error::TrailerTooLarge, i);
        if (c == '\r') state_ = State::TrailerLF;
        else if (c == '\n') return fail(Error::BareLF, i);
        else if (!(detail::kCharClass[c] & detail::kValue)) return fail(Error::BadTrailer, i);
        break;
      case State::TrailerLF:
        if (c != '\n') return fail(Error::BareCR, i);
        ++trailer_fields_;
        state_ = State::TrailerLineStart;
        break;
      case State::FinalLF:
        if (c != '\n') return fail(Error::BareCR, i);
        state_ = State::Done;
        s.kind = Step::Done;
        s.consumed = i + 1;
        return s;
      case State::Done:
      case State::Failed:
        break;  // handled before the loop
    }
    ++i;
  }
  s.kind = Step::NeedMore;
  s.consumed = n;
  return s;
}

std::size_t chunk_header(char* out, std::uint64_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  char tmp[16];
  std::size_t n = 0;
  do {
    tmp[n++] = kHex[size & 15];
    size >>= 4;
  } while (size);
  for (std::size_t i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  out[n] = '\r';
  out[n + 1] = '\n';
  return n + 2;
}

void append_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return;
  char h[kChunkHeaderMax];
  out.append(h, chunk_header(h, data.size()));
  out.append(data);
  out.append(kChunkDataEnd);
}

}  // namespace ringproxy::http
