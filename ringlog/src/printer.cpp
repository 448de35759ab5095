// The shared text printer (varnishlog's layout). Pure text building, no I/O: tools
// decide where the text goes. Each record line is written through one pointer into
// room reserved for its longest form; the payload is copied and checked for bytes that
// need escaping in the same pass, 16 bytes at a time.
#include "ringlog/printer.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ringlog {

void OutBuffer::grow(std::size_t n) {
  std::size_t want = std::max<std::size_t>({size_ + n, buf_.size() * 2, 4096});
  buf_.resize(want);  // zero-filled once: the bytes past size_ stay initialised
}

namespace {

// Room a record line needs at most, beyond its payload's worst case (4 bytes per byte,
// "\ooo"): vxid or marker, the tag name, side, quotes or "[len] ", " [truncated]",
// newline, and 16 bytes for the wide loads and stores.
constexpr std::size_t kLineRoom = 128;
std::size_t line_room(std::string_view name, std::size_t payload) noexcept {
  return kLineRoom + name.size() + 4 * payload;
}

constexpr bool needs_escape(unsigned char c) noexcept { return c < 0x20 || c >= 0x7f || c == '"' || c == '\\'; }
constexpr bool is_control(unsigned char c) noexcept { return c < 0x20 || c == 0x7f; }

// Copies n < 16 bytes with a few fixed-size moves (never reads past s + n).
inline void copy_small(char* d, const char* s, std::size_t n) noexcept {
  if (n >= 8) {
    std::uint64_t a, b;
    std::memcpy(&a, s, 8);
    std::memcpy(&b, s + n - 8, 8);
    std::memcpy(d, &a, 8);
    std::memcpy(d + n - 8, &b, 8);
  } else if (n >= 4) {
    std::uint32_t a, b;
    std::memcpy(&a, s, 4);
    std::memcpy(&b, s + n - 4, 4);
    std::memcpy(d, &a, 4);
    std::memcpy(d + n - 4, &b, 4);
  } else if (n > 0) {
    d[0] = s[0];
    d[n >> 1] = s[n >> 1];
    d[n - 1] = s[n - 1];
  }
}

#if defined(__SSE2__)
// Bit i set: byte i cannot be printed as is (Unsafe: needs_escape; else a control byte).
template <bool Unsafe>
inline unsigned special_mask(__m128i v) noexcept {
  __m128i m = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);  // < 0x20
  m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
  if constexpr (Unsafe) {
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('"')));
    m = _mm_or_si128(m, _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
    m = _mm_or_si128(m, v);  // >= 0x80: the sign bit, which is all movemask reads
  }
  return unsigned(_mm_movemask_epi8(m));
}
#endif

// Copies s[0, n) to d and returns the index of the first byte that cannot be printed as
// is, or n. When it returns less than n, d holds only part of the copy. d must have
// room for n + 16 bytes (they may be read, never beyond them).
template <bool Unsafe>
[[gnu::always_inline]] inline std::size_t copy_scan(char* d, const char* s, std::size_t n) noexcept {
#if defined(__SSE2__)
  if (n < 16) {
    copy_small(d, s, n);
    unsigned m = special_mask<Unsafe>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d))) & ((1u << n) - 1);
    return m ? std::size_t(std::countr_zero(m)) : n;
  }
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), v);
    if (unsigned m = special_mask<Unsafe>(v)) return i + std::size_t(std::countr_zero(m));
  }
  if (i < n) {  // the last 16 bytes, overlapping bytes already found clean
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + n - 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + n - 16), v);
    if (unsigned m = special_mask<Unsafe>(v)) return n - 16 + std::size_t(std::countr_zero(m));
  }
  return n;
#else
  if (n) std::memcpy(d, s, n);
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (Unsafe ? needs_escape(c) : is_control(c)) return i;
  }
  return n;
#endif
}

// Decimal digits of v at d; returns the end.
inline char* put_u64(char* d, std::uint64_t v) noexcept {
  char tmp[20];
  int k = 0;
  do {
    tmp[k++] = char('0' + v % 10);
    v /= 10;
  } while (v);
  while (k) *d++ = tmp[--k];
  return d;
}

[[gnu::noinline]] char* put_escaped(char* d, const unsigned char* s, std::size_t n) noexcept {
  *d++ = '"';
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char c = s[i];
    if (!needs_escape(c)) {
      *d++ = char(c);
      continue;
    }
    *d++ = '\\';
    switch (c) {
      case '"': *d++ = '"'; break;
      case '\\': *d++ = '\\'; break;
      case '\n': *d++ = 'n'; break;
      case '\r': *d++ = 'r'; break;
      case '\t': *d++ = 't'; break;
      default:
        *d++ = char('0' + (c >> 6));
        *d++ = char('0' + ((c >> 3) & 7));
        *d++ = char('0' + (c & 7));
    }
  }
  *d++ = '"';
  return d;
}

[[gnu::noinline]] char* put_binary(char* d, std::string_view p) noexcept {
  static constexpr char kHex[] = "0123456789abcdef";
  *d++ = '[';
  d = put_u64(d, p.size());
  *d++ = ']';
  *d++ = ' ';
  for (unsigned char c : p) {
    *d++ = kHex[c >> 4];
    *d++ = kHex[c & 15];
  }
  return d;
}

// Safe tags come from our own code; still never let a control byte reach a terminal.
[[gnu::noinline]] char* put_controls_masked(char* d, std::string_view p, std::size_t special) noexcept {
  std::memcpy(d, p.data(), p.size());
  for (std::size_t i = special; i < p.size(); ++i)
    if (is_control(static_cast<unsigned char>(d[i]))) d[i] = '?';
  return d + p.size();
}

// The payload by its tag's flags (binary as "[len] hex"; unsafe escaped and quoted when
// anything needs it; safe with control bytes shown as '?'); returns the end.
[[gnu::always_inline]] inline char* put_payload(char* d, Tag tag, std::string_view p) noexcept {
  const std::uint8_t flags = tag_flags(tag);
  if (flags & kTagBinary) [[unlikely]]
    return put_binary(d, p);
  if (flags & kTagUnsafe) {
    if (copy_scan<true>(d, p.data(), p.size()) == p.size()) [[likely]]
      return d + p.size();
    return put_escaped(d, reinterpret_cast<const unsigned char*>(p.data()), p.size());
  }
  std::size_t special = copy_scan<false>(d, p.data(), p.size());
  if (special != p.size()) [[unlikely]]
    return put_controls_masked(d, p, special);
  return d + p.size();
}

[[gnu::always_inline]] inline char* put_tail(char* d, const Record& r) noexcept {
  d = put_payload(d, r.tag, r.payload);
  if (r.truncated) [[unlikely]] {
    std::memcpy(d, " [truncated]", 12);
    d += 12;
  }
  *d++ = '\n';
  return d;
}

// The tag name padded to 14 columns and a space.
inline char* put_name(char* d, Tag tag, std::string_view name) noexcept {
  if (name.size() <= kPaddedNameMax) [[likely]] {
    std::memcpy(d, tag_name_padded(tag), 16);  // name, then spaces past column 15
    return d + kPaddedNameMax + 1;
  }
  std::memcpy(d, name.data(), name.size());
  d += name.size();
  *d++ = ' ';
  return d;
}

// "-   ", "--  ", "--- ", then "-4- " (c is '-' or '*').
inline char* put_marker(char* d, unsigned level, char c) noexcept {
  if (level <= 3) [[likely]] {
    static constexpr char kMarkers[2][4][4] = {{{' ', ' ', ' ', ' '}, {'-', ' ', ' ', ' '}, {'-', '-', ' ', ' '}, {'-', '-', '-', ' '}},
                                               {{' ', ' ', ' ', ' '}, {'*', ' ', ' ', ' '}, {'*', '*', ' ', ' '}, {'*', '*', '*', ' '}}};
    std::memcpy(d, kMarkers[c == '*'][level], 4);
    return d + 4;
  }
  *d++ = c;
  d = put_u64(d, level);
  *d++ = c;
  *d++ = ' ';
  return d;
}

inline void raw_line(OutBuffer& out, const Record& r) {
  std::string_view name = tag_name(r.tag);
  char* d = out.reserve(line_room(name, r.payload.size()));
  // "%10" PRIu64 " ": the digits right-aligned in 10 columns, formatted once a batch.
  OutBuffer::VxidMemo& m = out.vxid_memo();
  if (m.len == 0 || m.vxid != r.vxid) [[unlikely]] {
    char* e = m.text;
    char tmp[20];
    int k = 0;
    std::uint64_t v = r.vxid;
    do {
      tmp[k++] = char('0' + v % 10);
      v /= 10;
    } while (v);
    for (int pad = 10 - k; pad > 0; --pad) *e++ = ' ';
    while (k) *e++ = tmp[--k];
    *e++ = ' ';
    m.vxid = r.vxid;
    m.len = std::uint32_t(e - m.text);
  }
  if (m.len <= 16) [[likely]]
    std::memcpy(d, m.text, 16);
  else
    std::memcpy(d, m.text, sizeof m.text);
  d += m.len;
  d = put_name(d, r.tag, name);
  *d++ = kind_char(r.kind);
  *d++ = ' ';
  out.commit(put_tail(d, r));
}

inline void terse_line(OutBuffer& out, unsigned level, const Record& r) {
  std::string_view name = tag_name(r.tag);
  char* d = out.reserve(line_room(name, r.payload.size()));
  d = put_marker(d, level, '-');
  d = put_name(d, r.tag, name);
  out.commit(put_tail(d, r));
}

// Printing into a string goes through a scratch buffer of the thread.
OutBuffer& scratch() {
  thread_local OutBuffer b;
  b.clear();
  return b;
}

}  // namespace

std::string_view txn_label(const Transaction& t) noexcept {
  switch (t.type) {
    case TxnType::sess: return "<< Session  >>";
    case TxnType::req: return "<< Request  >>";
    case TxnType::bereq: return "<< BeReq    >>";
    case TxnType::unknown: break;
  }
  return t.vxid == 0 ? "<< Record   >>" : "<< Unknown  >>";
}

void append_payload(OutBuffer& out, Tag tag, std::string_view p) {
  char* d = out.reserve(line_room({}, p.size()));
  out.commit(put_payload(d, tag, p));
}

void print_raw(OutBuffer& out, const Record& r) { raw_line(out, r); }

void print_terse(OutBuffer& out, unsigned level, const Record& r) { terse_line(out, level, r); }

void print_group(OutBuffer& out, const Group& g) {
  if (g.mode == Grouping::raw) {
    for (const Transaction* t : g.txns)
      for (std::size_t i = 0; i < t->records.size(); ++i) raw_line(out, t->record(i));
    return;
  }
  for (const Transaction* t : g.txns) {
    // "*   << Request  >> " and the vxid left-aligned in 10 columns.
    char* d = out.reserve(kLineRoom);
    d = put_marker(d, t->level, '*');
    std::memcpy(d, txn_label(*t).data(), 14);
    d[14] = ' ';
    char* v = d + 15;
    d = put_u64(v, t->vxid);
    if (d - v < 10) {
      std::memset(d, ' ', std::size_t(10 - (d - v)));
      d = v + 10;
    }
    *d++ = '\n';
    out.commit(d);
    for (std::size_t i = 0; i < t->records.size(); ++i) terse_line(out, t->level, t->record(i));
  }
  out.push_back('\n');
}

void append_payload(std::string& out, Tag tag, std::string_view payload) {
  OutBuffer& b = scratch();
  append_payload(b, tag, payload);
  out += b.view();
}

void print_raw(std::string& out, const Record& r) {
  OutBuffer& b = scratch();
  print_raw(b, r);
  out += b.view();
}

void print_terse(std::string& out, unsigned level, const Record& r) {
  OutBuffer& b = scratch();
  print_terse(b, level, r);
  out += b.view();
}

void print_group(std::string& out, const Group& g) {
  OutBuffer& b = scratch();
  print_group(b, g);
  out += b.view();
}

}  // namespace ringlog
