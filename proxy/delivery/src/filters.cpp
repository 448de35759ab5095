// The pull chain and its filters: range, chunked, gzip/gunzip, crc32.
#include "ringproxy/delivery/filters.hpp"

#include <zlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdio>
#include <cstring>

#include "ringlog/text.hpp"

namespace ringproxy::delivery {

// ---------------------------------------------------------------- Chain
Chain::Chain(ObjRef obj, Notify* notify, std::size_t max_leases)
    : reader_(std::move(obj), notify, max_leases), batch_(reader_) {
  rs_.r = &reader_;
}

Chain::~Chain() {
  filters_.clear();  // they give back what they hold, into the batch
  batch_.flush();
}

void Chain::push(std::unique_ptr<Filter> f) {
  f->prev_ = filters_.empty() ? static_cast<Source*>(&rs_) : filters_.back().get();
  f->chain_ = this;
  filters_.push_back(std::move(f));
}

int Chain::pull(ScatterArray& out) noexcept {
  Source* last = filters_.empty() ? static_cast<Source*>(&rs_) : filters_.back().get();
  int r = last->pull(out);
  batch_.flush();  // transient objects free segments as soon as they come back
  return r;
}

// ---------------------------------------------------------------- Range
namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
bool parse_u64(std::string_view s, std::uint64_t* v) {
  if (s.empty() || s.size() > 19) return false;
  std::uint64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + std::uint64_t(c - '0');
  }
  *v = x;
  return true;
}
using ringlog::iequals;
}  // namespace

RangePlan plan_range(std::string_view header, std::uint64_t length, std::string_view type,
                     std::size_t max_ranges) {
  RangePlan p;
  header = trim(header);
  auto eq = header.find('=');
  if (eq == std::string_view::npos || !iequals(trim(header.substr(0, eq)), "bytes")) return p;
  std::string_view list = header.substr(eq + 1);
  std::vector<ByteRange> rs;
  std::size_t specs = 0;
  while (true) {
    auto comma = list.find(',');
    std::string_view spec = trim(list.substr(0, comma));
    if (!spec.empty()) {
      if (++specs > max_ranges) return RangePlan{};  // a flood of ranges: serve it whole
      auto dash = spec.find('-');
      if (dash == std::string_view::npos) return RangePlan{};
      std::string_view a = spec.substr(0, dash), b = spec.substr(dash + 1);
      std::uint64_t x = 0, y = 0;
      if (a.empty()) {  // suffix: the last y bytes
        if (!parse_u64(b, &y)) return RangePlan{};
        if (y > 0 && length > 0) rs.push_back({length - std::min(y, length), length});
      } else {
        if (!parse_u64(a, &x)) return RangePlan{};
        if (b.empty()) {
          y = UINT64_MAX;
        } else if (!parse_u64(b, &y) || y < x) {
          return RangePlan{};  // invalid: ignore the header
        }
        if (x < length) rs.push_back({x, y >= length ? length : y + 1});
      }
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (specs == 0) return RangePlan{};
  if (rs.empty()) {
    p.status = 416;
    p.content_range = "bytes */" + std::to_string(length);
    return p;
  }
  std::sort(rs.begin(), rs.end(), [](const ByteRange& l, const ByteRange& r) { return l.lo < r.lo; });
  for (const ByteRange& r : rs) {  // coalesce overlapping and adjacent ranges
    if (!p.ranges.empty() && r.lo <= p.ranges.back().hi)
      p.ranges.back().hi = std::max(p.ranges.back().hi, r.hi);
    else
      p.ranges.push_back(r);
  }
  p.status = 206;
  auto cr = [&](const ByteRange& r) {
    return "bytes " + std::to_string(r.lo) + "-" + std::to_string(r.hi - 1) + "/" + std::to_string(length);
  };
  if (p.ranges.size() == 1) {
    p.content_range = cr(p.ranges[0]);
    p.content_length = p.ranges[0].hi - p.ranges[0].lo;
    return p;
  }
  static std::atomic<std::uint64_t> seq{0};
  char bnd[40];
  std::snprintf(bnd, sizeof bnd, "RP%016llx", (unsigned long long)(seq.fetch_add(1) * 0x9E3779B97F4A7C15ULL));
  p.content_type = std::string("multipart/byteranges; boundary=") + bnd;
  for (std::size_t i = 0; i < p.ranges.size(); ++i) {
    std::string h = i ? "\r\n--" : "--";
    h += bnd;
    h += "\r\n";
    if (!type.empty()) {
      h += "Content-Type: ";
      h += type;
      h += "\r\n";
    }
    h += "Content-Range: " + cr(p.ranges[i]) + "\r\n\r\n";
    p.content_length += h.size() + (p.ranges[i].hi - p.ranges[i].lo);
    p.part_heads.push_back(std::move(h));
  }
  p.tail = std::string("\r\n--") + bnd + "--\r\n";
  p.content_length += p.tail.size();
  return p;
}

RangeFilter::RangeFilter(const RangePlan& plan, std::uint64_t start, std::size_t in_cap)
    : r_(plan.ranges), heads_(plan.part_heads), tail_(plan.tail), in_(in_cap), pos_(start) {
  assert(plan.status == 206 && !r_.empty());
}

RangeFilter::~RangeFilter() {
  if (chain_) chain_->give_all(in_);
}

bool RangeFilter::emit_bytes(ScatterArray& out, std::string_view s) noexcept {
  Lease l;
  auto b = chain_->alloc(s.size(), 1, &l);
  if (b.empty() && !s.empty()) {
    failed_ = true;
    return false;
  }
  std::memcpy(b.data(), s.data(), s.size());
  out.add(l, b.data(), s.size());
  return true;
}

int RangeFilter::pull(ScatterArray& out) noexcept {
  if (failed_) return kLeaseError;
  int added = 0;
  const bool multi = r_.size() > 1;
  while (true) {
    if (done_) {
      out.set_end();
      return added;
    }
    if (k_ == r_.size()) {  // every range sent: drop what is left, the rest is never read
      if (multi) {
        if (out.room() == 0) return added;
        if (!emit_bytes(out, tail_)) return kLeaseError;
        ++added;
      }
      chain_->give_all(in_);
      done_ = true;
      continue;
    }
    if (pos_ >= r_[k_].hi) {
      ++k_;
      head_done_ = false;
      continue;
    }
    if (in_.empty()) {
      if (in_.end()) return kLeaseError;  // the object is shorter than its length said
      int r = prev_->pull(in_);
      if (r < 0) return added ? added : r;
      if (in_.empty() && !in_.end()) return added;  // r == 0: not possible with an empty array
      continue;
    }
    iovec& f = in_.at(0);
    Lease l = in_.lease(0);
    const ByteRange& r = r_[k_];
    if (f.iov_len == 0 || pos_ + f.iov_len <= r.lo) {
      pos_ += f.iov_len;
      chain_->give(l);
      in_.drop_front(1);
      continue;
    }
    if (pos_ < r.lo) {
      std::size_t cut = std::size_t(r.lo - pos_);
      f.iov_base = static_cast<char*>(f.iov_base) + cut;
      f.iov_len -= cut;
      pos_ += cut;
      continue;
    }
    if (multi && !head_done_) {
      if (out.room() < 2) return added;
      if (!emit_bytes(out, heads_[k_])) return kLeaseError;
      ++added;
      head_done_ = true;
    }
    if (out.room() == 0) return added;
    std::size_t take = std::size_t(std::min<std::uint64_t>(f.iov_len, r.hi - pos_));
    if (take == f.iov_len) {  // the last piece of this extent carries its lease
      out.add(l, f.iov_base, take);
      in_.drop_front(1);
    } else {  // more of it follows, with the lease: this piece lives at least as long
      out.add_noret(f.iov_base, take);
      f.iov_base = static_cast<char*>(f.iov_base) + take;
      f.iov_len -= take;
    }
    pos_ += take;
    ++added;
  }
}

// ---------------------------------------------------------------- Chunked
ChunkedFilter::~ChunkedFilter() {
  if (chain_) chain_->give_all(in_);
}

int ChunkedFilter::pull(ScatterArray& out) noexcept {
  static const char kCrlf[] = "\r\n";
  static const char kLast[] = "0\r\n\r\n";
  int added = 0;
  while (true) {
    if (done_) {
      out.set_end();
      return added;
    }
    if (in_.empty()) {
      if (in_.end()) {
        if (out.room() == 0) return added;
        out.add_noret(kLast, 5);
        ++added;
        done_ = true;
        continue;
      }
      int r = prev_->pull(in_);
      if (r < 0) return added ? added : r;
      continue;
    }
    // Zero-length extents carry no chunk (a zero chunk would end the body).
    std::size_t n = 0;
    std::size_t fit = out.room() / 3;
    std::size_t i = 0;
    for (; i < in_.used() && n < fit; ++i)
      if (in_.at(i).iov_len) ++n;
    if (n == 0) {
      for (i = 0; i < in_.used() && in_.at(i).iov_len == 0; ++i) chain_->give(in_.lease(i));
      if (i) {
        in_.drop_front(i);
        continue;
      }
      return added;  // no room for a chunk
    }
    Lease hl;
    auto buf = chain_->alloc(n * 20, std::uint32_t(n), &hl);
    if (buf.empty()) return kLeaseError;
    char* h = reinterpret_cast<char*>(buf.data());
    std::size_t j = 0, used = 0;
    for (i = 0; j < n; ++i) {
      const iovec& v = in_.at(i);
      if (v.iov_len == 0) {
        chain_->give(in_.lease(i));
        continue;
      }
      int len = std::snprintf(h, 20, "%zx\r\n", v.iov_len);
      out.add(hl, h, std::size_t(len));
      out.add(in_.lease(i), v.iov_base, v.iov_len);
      out.add_noret(kCrlf, 2);
      payload_ += v.iov_len;
      h += 20;
      ++j;
      used = i + 1;
      added += 3;
    }
    in_.drop_front(used);
  }
}

// ---------------------------------------------------------------- gzip / gunzip
struct ZlibFilter::Z {
  z_stream s{};
  bool init = false;
};

ZlibFilter::ZlibFilter(Mode m, int level, std::size_t out_buf, std::size_t in_cap)
    : mode_(m), z_(new Z), in_(in_cap), out_size_(out_buf) {
  int r = m == Mode::gzip ? deflateInit2(&z_->s, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY)
                          : inflateInit2(&z_->s, 15 + 32);  // gzip or zlib header
  z_->init = r == Z_OK;
  failed_ = !z_->init;
}

ZlibFilter::~ZlibFilter() {
  if (z_->init) (mode_ == Mode::gzip ? deflateEnd(&z_->s) : inflateEnd(&z_->s));
  if (chain_) {
    chain_->give_all(in_);
    if (buf_) chain_->give(buf_lease_);
  }
}

bool ZlibFilter::emit(ScatterArray& out) noexcept {
  if (!buf_ || buf_used_ == 0 || out.room() == 0) return false;
  out.add(buf_lease_, buf_, buf_used_);
  buf_ = nullptr;
  buf_used_ = 0;
  return true;
}

int ZlibFilter::pull(ScatterArray& out) noexcept {
  if (failed_) return kLeaseError;
  int added = 0;
  z_stream& s = z_->s;
  while (true) {
    if (done_) {
      if (buf_used_) {
        if (!emit(out)) return added;
        ++added;
      } else if (buf_) {  // an output buffer nothing was written to
        chain_->give(buf_lease_);
        buf_ = nullptr;
      }
      out.set_end();
      return added;
    }
    if (out.room() == 0) return added;
    bool finishing = false, sync = false;
    if (in_.empty() && !stream_end_) {
      if (in_.end()) {
        if (mode_ == Mode::gunzip) {  // the compressed stream was cut short
          failed_ = true;
          return kLeaseError;
        }
        finishing = true;
      } else {
        int r = prev_->pull(in_);
        if (r == kLeaseAgain && mode_ == Mode::gzip && dirty_) {
          sync = true;  // streaming: push out what the compressor holds
        } else if (r < 0) {
          if (r == kLeaseError) failed_ = true;
          if (buf_used_ && emit(out)) ++added;
          return added ? added : r;
        } else {
          continue;
        }
      }
    }
    if (stream_end_) {  // gunzip: trailing bytes after the stream are dropped
      chain_->give_all(in_);
      in_.set_end();
      done_ = true;
      continue;
    }
    if (!buf_) {
      auto b = chain_->alloc(out_size_, 1, &buf_lease_);
      if (b.empty()) {
        failed_ = true;
        return kLeaseError;
      }
      buf_ = b.data();
      buf_used_ = 0;
    }
    const iovec* f = in_.empty() ? nullptr : &in_.at(0);
    s.next_in = f ? static_cast<Bytef*>(f->iov_base) + in_off_ : nullptr;
    s.avail_in = f ? uInt(f->iov_len - in_off_) : 0;
    s.next_out = buf_ + buf_used_;
    s.avail_out = uInt(out_size_ - buf_used_);
    uInt in0 = s.avail_in;
    int zr;
    if (mode_ == Mode::gzip) {
      zr = deflate(&s, finishing ? Z_FINISH : sync ? Z_SYNC_FLUSH : Z_NO_FLUSH);
      if (zr == Z_STREAM_ERROR) {
        failed_ = true;
        return kLeaseError;
      }
      if (in0 > s.avail_in) dirty_ = true;
      if (sync && s.avail_out != 0) dirty_ = false;  // flush complete
      if (finishing && zr == Z_STREAM_END) done_ = true;
    } else {
      zr = inflate(&s, Z_NO_FLUSH);
      if (zr == Z_STREAM_END) {
        stream_end_ = true;
      } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
        failed_ = true;
        return kLeaseError;
      }
    }
    if (f) {
      in_off_ = f->iov_len - s.avail_in;
      if (s.avail_in == 0) {
        chain_->give(in_.lease(0));
        in_.drop_front(1);
        in_off_ = 0;
      }
    }
    buf_used_ = out_size_ - s.avail_out;
    if (s.avail_out == 0 || (sync && !dirty_ && buf_used_)) {
      if (emit(out)) ++added;
      if (sync && !dirty_) return added;
    } else if (sync && !dirty_) {
      return added ? added : kLeaseAgain;
    }
  }
}

// ---------------------------------------------------------------- CRC32
namespace {
#if defined(__x86_64__)
// The reflected CRC-32 register (0xEDB88320, not inverted) over n bytes, n >= 64 and a
// multiple of 16, by folding with carry-less multiplication (Gopal et al., "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ Instruction", Intel 2009): four
// 128-bit lanes folded 64 bytes at a time, then into one lane, then 16 bytes at a time;
// 128 -> 64 -> 32 bits, and a Barrett reduction. Constants: x^k mod P for the fold
// distances (bit-reflected, as in the paper's reflected variant), P and its quotient.
#define RP_CLMUL __attribute__((target("pclmul,sse4.1")))
RP_CLMUL inline __m128i load(const std::uint8_t* q) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
}
// x * x^k mod P, for both halves of x (k's two constants), added to data.
RP_CLMUL inline __m128i fold(__m128i x, __m128i k, __m128i data) noexcept {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), data);
}
RP_CLMUL std::uint32_t crc32_clmul(std::uint32_t reg, const std::uint8_t* p, std::size_t n) noexcept {
  const __m128i fold4 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);  // x^(4*128+32), x^(4*128-32)
  const __m128i fold1 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);  // x^(128+32), x^(128-32)
  const __m128i fold64 = _mm_set_epi64x(0, 0x0163cd6124);            // x^64
  const __m128i barrett = _mm_set_epi64x(0x01f7011641, 0x01db710641);  // u = x^64 / P, P
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
  __m128i a = _mm_xor_si128(load(p), _mm_cvtsi32_si128(int(reg)));
  __m128i b = load(p + 16), c = load(p + 32), d = load(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    a = fold(a, fold4, load(p));
    b = fold(b, fold4, load(p + 16));
    c = fold(c, fold4, load(p + 32));
    d = fold(d, fold4, load(p + 48));
  }
  a = fold(a, fold1, b);
  a = fold(a, fold1, c);
  a = fold(a, fold1, d);
  for (; n >= 16; p += 16, n -= 16) a = fold(a, fold1, load(p));
  // 128 -> 64 bits, then 64 -> 32 (+32 zero bits), then Barrett.
  a = _mm_xor_si128(_mm_srli_si128(a, 8), _mm_clmulepi64_si128(a, fold1, 0x10));
  a = _mm_xor_si128(_mm_srli_si128(a, 4), _mm_clmulepi64_si128(_mm_and_si128(a, low32), fold64, 0x00));
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), barrett, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
  return std::uint32_t(_mm_extract_epi32(_mm_xor_si128(a, t), 1));
}
#undef RP_CLMUL
bool have_clmul() noexcept {
  static const bool yes = [] {
    __builtin_cpu_init();  // safe whatever the order of static initialisation
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return yes;
}
#endif
}  // namespace

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(data);
#if defined(__x86_64__)
  if (n >= 64 && have_clmul()) {
    std::size_t k = n & ~std::size_t(15);
    crc = ~crc32_clmul(~crc, p, k);
    p += k;
    n -= k;
  }
#endif
  return n ? std::uint32_t(crc32_z(crc, p, n)) : crc;
}

int Crc32Filter::pull(ScatterArray& out) noexcept {
  std::size_t first = out.used();
  int r = prev_->pull(out);
  for (std::size_t i = first; i < out.used(); ++i) {
    const iovec& v = out.at(i);
    crc_ = crc32_update(crc_, v.iov_base, v.iov_len);
    bytes_ += v.iov_len;
  }
  if (out.end() && check_ && crc_ != expect_) {
    mismatch_ = true;
    return kLeaseError;
  }
  return r;
}

}  // namespace ringproxy::delivery
