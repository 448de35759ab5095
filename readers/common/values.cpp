// The shared command-line values (see values.hpp). Hand-parsed rather than through
// strtod/stoull, which accept signs, exponents, hex, "inf" and leading spaces.
#include "values.hpp"

#include <cmath>

namespace ringlog::tool {

namespace {

// A plain decimal number: digits, optionally '.' and more digits (at least one digit
// in all). Advances i past it; nullopt when there is none.
std::optional<double> decimal(std::string_view s, std::size_t& i) {
  double v = 0;
  std::size_t digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) v = v * 10 + (s[i] - '0');
  if (i < s.size() && s[i] == '.') {
    ++i;
    double scale = 0.1;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits, scale /= 10) v += (s[i] - '0') * scale;
  }
  if (digits == 0) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view s, std::uint64_t max) {
  std::size_t i = 0;
  auto v = decimal(s, i);
  if (!v) return std::nullopt;
  // Exact in integers when there is no fraction, so that 2^64-1 is not rounded away.
  bool whole = s.substr(0, i).find('.') == std::string_view::npos;
  if (i + 1 < s.size() && s[i] == ' ') ++i;  // one space before the unit
  unsigned shift = 0;
  if (i < s.size()) {
    switch (s[i]) {
      case 'k': case 'K': shift = 10; ++i; break;
      case 'm': case 'M': shift = 20; ++i; break;
      case 'g': case 'G': shift = 30; ++i; break;
      case 't': case 'T': shift = 40; ++i; break;
      case 'p': case 'P': shift = 50; ++i; break;
      default: break;
    }
  }
  if (i < s.size() && (s[i] == 'b' || s[i] == 'B')) ++i;
  if (i != s.size()) return std::nullopt;
  if (whole) {
    std::uint64_t n = 0;
    for (char c : s) {
      if (c < '0' || c > '9') break;
      unsigned d = unsigned(c - '0');
      if (d > max || n > (max - d) / 10) return std::nullopt;
      n = n * 10 + d;
    }
    if (shift && n > (max >> shift)) return std::nullopt;
    return n << shift;
  }
  double bytes = std::round(std::ldexp(*v, int(shift)));
  // 2^64 is the first double above every uint64_t.
  if (!(bytes < 18446744073709551616.0) || bytes > double(max)) return std::nullopt;
  auto n = static_cast<std::uint64_t>(bytes);
  if (n > max) return std::nullopt;
  return n;
}

std::optional<double> parse_wait(std::string_view s) {
  if (s == "off") return -1.0;
  std::size_t i = 0;
  auto v = decimal(s, i);
  if (!v || i != s.size() || *v > 1e9) return std::nullopt;
  return *v;
}

}  // namespace ringlog::tool
