// Internal: byte classes and list helpers shared by the parser, decoder and writers.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "ringlog/text.hpp"

namespace ringproxy::http::detail {

enum : std::uint8_t {
  kTchar = 1,   // token character
  kValue = 2,   // field-value byte: VCHAR, SP, HTAB, obs-text
  kTarget = 4,  // request-target byte: VCHAR (no CTL, SP, obs-text)
  kHex = 8,
};

constexpr std::array<std::uint8_t, 256> make_classes() {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    std::uint8_t v = 0;
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    bool digit = c >= '0' && c <= '9';
    if (alpha || digit) v |= kTchar;
    switch (c) {
      case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
      case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        v |= kTchar;
        break;
      default: break;
    }
    if ((c > 0x20 && c < 0x7f) || c >= 0x80 || c == ' ' || c == '\t') v |= kValue;
    if (c > 0x20 && c < 0x7f) v |= kTarget;
    if (digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) v |= kHex;
    t[static_cast<std::size_t>(c)] = v;
  }
  return t;
}
inline constexpr std::array<std::uint8_t, 256> kCharClass = make_classes();

// Word-at-a-time checks (Bit Twiddling Hacks "hasless"/"haszero": exact as "is there
// any such byte" tests). They let the validation loops skip 8 clean bytes at a time.
inline std::uint64_t load8(const char* p) {
  std::uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}
constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kHighs = 0x8080808080808080ULL;
inline bool has_less(std::uint64_t x, std::uint8_t n) { return ((x - kOnes * n) & ~x & kHighs) != 0; }
inline bool has_byte(std::uint64_t x, std::uint8_t b) { return has_less(x ^ (kOnes * b), 1); }
// A byte that is not a field-value byte, or HTAB (allowed, but sent to the slow path).
inline bool value_word_suspect(std::uint64_t x) { return has_less(x, 0x20) || has_byte(x, 0x7f); }
// A byte that is not VCHAR (request-target).
inline bool target_word_suspect(std::uint64_t x) {
  return has_less(x, 0x21) || (x & kHighs) != 0 || has_byte(x, 0x7f);
}

using ringlog::iequals;

inline bool is_ows(char c) { return c == ' ' || c == '\t'; }

inline std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

// Calls f(element) for each non-empty element of a comma-separated list (RFC 9110
// §5.6.1), OWS trimmed. Quoted commas are not special: no list we split has them.
template <class F>
void for_each_list_element(std::string_view v, F&& f) {
  while (!v.empty()) {
    std::size_t comma = v.find(',');
    std::string_view e = trim_ows(v.substr(0, comma));
    if (!e.empty()) f(e);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

}  // namespace ringproxy::http::detail
