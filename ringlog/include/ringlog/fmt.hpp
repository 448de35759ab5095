// Record payloads without printf: decimal integers two digits at a time and fixed
// six-decimal numbers, appended into a stack line. A record like ReqAcct's six numbers
// costs a tenth of what vsnprintf spends on it (callgrind), and the hot path of a
// server writes a dozen such records per request.
//
//   ringlog::Line l;
//   txn.record(Tag::ReqAcct, l.u(hdr).sp().u(body).sp().u(hdr + body).view());
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ringlog {

namespace fmt_detail {
inline constexpr char kDigitPairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
}  // namespace fmt_detail

// Writes v in decimal at out (room for 20 characters); returns the length.
inline std::size_t format_u64(char* out, std::uint64_t v) noexcept {
  char tmp[20];
  char* p = tmp + 20;
  while (v >= 100) {
    unsigned r = unsigned(v % 100);
    v /= 100;
    p -= 2;
    std::memcpy(p, fmt_detail::kDigitPairs + 2 * r, 2);
  }
  if (v >= 10) {
    p -= 2;
    std::memcpy(p, fmt_detail::kDigitPairs + 2 * v, 2);
  } else {
    *--p = char('0' + v);
  }
  std::size_t n = std::size_t(tmp + 20 - p);
  std::memcpy(out, p, n);
  return n;
}

// Writes the six decimal digits of frac (0..999999), zero-padded.
inline void format_6digits(char* out, std::uint32_t frac) noexcept {
  std::memcpy(out, fmt_detail::kDigitPairs + 2 * (frac / 10000), 2);
  std::memcpy(out + 2, fmt_detail::kDigitPairs + 2 * (frac / 100 % 100), 2);
  std::memcpy(out + 4, fmt_detail::kDigitPairs + 2 * (frac % 100), 2);
}

// A record payload under construction: at most Cap bytes, longer input is cut.
template <std::size_t Cap = 256>
class BasicLine {
 public:
  BasicLine& s(std::string_view t) noexcept {
    std::size_t k = t.size() < Cap - n_ ? t.size() : Cap - n_;
    std::memcpy(b_ + n_, t.data(), k);
    n_ += k;
    return *this;
  }
  BasicLine& c(char ch) noexcept {
    if (n_ < Cap) b_[n_++] = ch;
    return *this;
  }
  BasicLine& sp() noexcept { return c(' '); }
  BasicLine& u(std::uint64_t v) noexcept {
    if (Cap - n_ >= 20) n_ += format_u64(b_ + n_, v);
    return *this;
  }
  BasicLine& i(std::int64_t v) noexcept {
    if (v < 0) {
      c('-');
      return u(std::uint64_t(0) - std::uint64_t(v));
    }
    return u(std::uint64_t(v));
  }
  // Fixed point with six decimals ("%.6f" for the magnitudes logs carry: |x| < 1.8e13).
  BasicLine& f6(double x) noexcept { return f(x, 6); }
  // Fixed point with d decimals (0..6), rounded ("%.3f" is f(x, 3)).
  BasicLine& f(double x, int d) noexcept {
    static constexpr double kPow[7] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6};
    static constexpr std::uint64_t kPowU[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};
    if (d < 0) d = 0;
    if (d > 6) d = 6;
    if (!(x == x)) return s("nan");
    if (x < 0) {
      c('-');
      x = -x;
    }
    if (x >= 1.8e13) return s("inf");
    // Integer and fraction apart: x * 10^d would lose the last digits of a timestamp.
    auto ip = std::uint64_t(x);
    auto v = std::uint64_t((x - double(ip)) * kPow[d] + 0.5);
    if (v >= kPowU[d]) ++ip, v -= kPowU[d];
    u(ip);
    if (d && Cap - n_ >= std::size_t(d) + 1) {
      b_[n_++] = '.';
      char tmp[8];
      format_6digits(tmp, std::uint32_t(v * kPowU[6 - d]));
      std::memcpy(b_ + n_, tmp, std::size_t(d));
      n_ += std::size_t(d);
    }
    return *this;
  }
  std::string_view view() const noexcept { return {b_, n_}; }
  std::size_t size() const noexcept { return n_; }
  void clear() noexcept { n_ = 0; }

 private:
  char b_[Cap];
  std::size_t n_ = 0;
};
using Line = BasicLine<256>;

}  // namespace ringlog
