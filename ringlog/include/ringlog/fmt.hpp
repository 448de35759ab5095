// Record payloads without printf: decimal integers three digits per table load, and
// fixed six-decimal numbers, appended into a stack line. A record like ReqAcct's six numbers costs a tenth of what vsnprintf
// spends on it (callgrind), and the hot path of a server writes a dozen such records
// per request. Timestamps ("seconds.micros") have one formatter, format_seconds, which
// Txn::timestamp uses too.
//
//   ringlog::Line l;
//   txn.record(Tag::ReqAcct, l.u(hdr).sp().u(body).sp().u(hdr + body).view());
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ringlog {

namespace fmt_detail {
// Copies n bytes with a few fixed-size moves instead of a libc call (short strings
// are the common case); never reads or writes outside [s, s + n) and [d, d + n).
template <std::size_t K>
inline void copy_pair(void* d, const void* s, std::size_t n) noexcept {
  unsigned char a[K], b[K];
  std::memcpy(a, s, K);
  std::memcpy(b, static_cast<const unsigned char*>(s) + n - K, K);
  std::memcpy(d, a, K);
  std::memcpy(static_cast<unsigned char*>(d) + n - K, b, K);
}
inline void copy_short(void* d, const void* s, std::size_t n) noexcept {
  if (n > 64) {
    std::memcpy(d, s, n);
  } else if (n >= 32) {
    copy_pair<32>(d, s, n);
  } else if (n >= 16) {
    copy_pair<16>(d, s, n);
  } else if (n >= 8) {
    copy_pair<8>(d, s, n);
  } else if (n >= 4) {
    copy_pair<4>(d, s, n);
  } else if (n) {
    auto* dd = static_cast<unsigned char*>(d);
    const auto* ss = static_cast<const unsigned char*>(s);
    dd[0] = ss[0];
    dd[n / 2] = ss[n / 2];
    dd[n - 1] = ss[n - 1];
  }
}

// The three digits of 0..999 as ASCII in the low three bytes of a word (memory order
// on a little-endian machine): a number is formatted three digits per table load, with
// multiplies instead of a division loop. 4 KiB, shared by the whole program.
inline constexpr auto kDigits3 = [] {
  std::array<std::uint32_t, 1000> t{};
  for (std::uint32_t i = 0; i < 1000; ++i)
    t[i] = (std::uint32_t('0' + i / 100)) | (std::uint32_t('0' + i / 10 % 10) << 8) | (std::uint32_t('0' + i % 10) << 16);
  return t;
}();
static_assert(std::endian::native == std::endian::little, "kDigits3 holds digits in little-endian memory order");

// x (0..999) without leading zeros at out (4 bytes written); returns the length.
inline std::size_t put_head3(char* out, std::uint32_t x) noexcept {
  std::size_t n = 1 + (x >= 10) + (x >= 100);
  std::uint32_t w = kDigits3[x] >> (8 * (3 - n));
  std::memcpy(out, &w, 4);
  return n;
}
// x (0..999) as exactly three digits at out.
inline void put3(char* out, std::uint32_t x) noexcept { std::memcpy(out, &kDigits3[x], 3); }
}  // namespace fmt_detail

// Writes v in decimal at out and returns the length. out must have room for 20 bytes:
// a number of fewer than 4 digits may overwrite the bytes after it up to out + 4.
inline std::size_t format_u64(char* out, std::uint64_t v) noexcept {
  if (v < 1000) return fmt_detail::put_head3(out, std::uint32_t(v));
  if (v < 1000000) {
    auto hi = std::uint32_t(v / 1000);
    std::size_t n = fmt_detail::put_head3(out, hi);
    fmt_detail::put3(out + n, std::uint32_t(v) - hi * 1000);
    return n + 3;
  }
  std::uint64_t hi = v / 1000000;
  std::size_t n = format_u64(out, hi);  // at most three more levels
  auto lo = std::uint32_t(v - hi * 1000000);
  auto mid = lo / 1000;
  fmt_detail::put3(out + n, mid);
  fmt_detail::put3(out + n + 3, lo - mid * 1000);
  return n + 6;
}

// Writes the six decimal digits of frac (0..999999), zero-padded.
inline void format_6digits(char* out, std::uint32_t frac) noexcept {
  std::uint32_t hi = frac / 1000;
  fmt_detail::put3(out, hi);
  fmt_detail::put3(out + 3, frac - hi * 1000);
}

// "seconds.micros" of a duration or time in nanoseconds, truncated to the microsecond
// (the Timestamp record's numbers); at most 18 characters, out must have room for 20.
// A duration under a second is one division and one store.
inline std::size_t format_seconds(char* out, std::uint64_t ns) noexcept {
  std::uint64_t us = ns / 1000;
  if (us < 1000000) {
    // "0.dddddd" in one store.
    auto hi = std::uint32_t(us / 1000);
    std::uint64_t t = 0x2E30u | (std::uint64_t(fmt_detail::kDigits3[hi]) << 16) |
                      (std::uint64_t(fmt_detail::kDigits3[std::uint32_t(us) - hi * 1000]) << 40);
    std::memcpy(out, &t, 8);
    return 8;
  }
  std::uint64_t sec = us / 1000000;
  std::size_t n = format_u64(out, sec);
  out[n] = '.';
  format_6digits(out + n + 1, std::uint32_t(us - sec * 1000000));
  return n + 7;
}

// format_seconds of a signed difference now - then ("-" first when then is later: the
// realtime clock stepped back); at most 19 characters, out must have room for 21.
inline std::size_t format_seconds_delta(char* out, std::uint64_t now, std::uint64_t then) noexcept {
  if (now >= then) [[likely]]
    return format_seconds(out, now - then);
  out[0] = '-';
  return 1 + format_seconds(out + 1, then - now);
}

// A record payload under construction: at most Cap bytes, longer input is cut.
template <std::size_t Cap = 256>
class BasicLine {
 public:
  BasicLine& s(std::string_view t) noexcept {
    std::size_t k = t.size() < Cap - n_ ? t.size() : Cap - n_;
    fmt_detail::copy_short(b_ + n_, t.data(), k);
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
