// ringlog-dump's image: which layout a file has (ringlog's, HAProxy's pre-3.0 and 3.0+),
// its header read into an Image, and the positions checked (a damaged tail rebuilt
// from the writers' byte counter). Reads only; a damaged header is reported, never
// fixed here (repair.cpp does that).
#include <atomic>
#include <cinttypes>
#include <cstring>

#include "dump.hpp"
#include "framing.hpp"
#include "ringlog/repair.hpp"

namespace ringlog::dump {

using namespace format;
using namespace detail;

namespace {

constexpr std::uint64_t kHapTailLock = 1ULL << 63;   // HAProxy 3.0 RING_TAIL_LOCK (64-bit size_t)
constexpr std::uint64_t kHapV1HeaderMin = 32;         // sizeof(struct buffer)
constexpr std::uint64_t kHapV2Header = 32;            // size, rsvd, tail, head
constexpr std::uint64_t kHapV2aHeader = 192;          // tail @64, head @128, area @192

std::uint64_t rd64(std::span<const std::uint8_t> f, std::size_t off) noexcept {
  std::uint64_t v = 0;
  if (off + 8 <= f.size()) {
    const std::uint8_t* p = f.data() + off;
    if (reinterpret_cast<std::uintptr_t>(p) % 8 == 0)
      v = std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(reinterpret_cast<const std::uint64_t*>(p)))
              .load(std::memory_order_acquire);
    else
      std::memcpy(&v, p, 8);
  }
  return v;
}

}  // namespace

repair::LockOwner lock_owner(const Image& img) {
  if (img.layout != Layout::ringlog) return {};
  const Header& h = img.hdr();
  return repair::lock_owner(h, h.owner.load(std::memory_order_acquire), img.alive);
}

std::string_view layout_name(Layout l) noexcept {
  switch (l) {
    case Layout::ringlog: return "ringlog";
    case Layout::haproxy_v1: return "haproxy-v1";
    case Layout::haproxy_v2: return "haproxy-v2";
    case Layout::haproxy_v2a: return "haproxy-v2a";
  }
  return "?";
}

std::optional<Layout> layout_by_name(std::string_view s) noexcept {
  for (Layout l : {Layout::ringlog, Layout::haproxy_v1, Layout::haproxy_v2, Layout::haproxy_v2a})
    if (s == layout_name(l)) return l;
  return std::nullopt;
}

void Image::reload_positions() noexcept {
  if (layout != Layout::ringlog) return;
  head = hdr().head.load(std::memory_order_acquire);
  std::uint64_t t = hdr().tail.load(std::memory_order_acquire);
  locked = (t & kTailLock) != 0;
  tail = t & kPosMask;
  tail_stored = tail;
}

namespace {

void set_positions(Image& img, std::uint64_t head_off, std::uint64_t data) {
  img.head = img.area_size + head_off;
  img.tail = img.head + data;
  img.positions_ok = data >= 1 && data <= img.area_size && head_off < img.area_size;
  if (!img.positions_ok) {
    // v1 keeps no tail: with head or data wrong, where the messages end is unknown.
    img.tail_ok = false;
    img.positions_why = fmt("head offset %" PRIu64 " with %" PRIu64 " bytes of data in a %" PRIu64
                            "-byte area: where the messages end is unknown",
                            head_off, data, img.area_size);
  }
}

// Both HAProxy layouts start with the area size and a word that gives the header
// length: v1's area pointer (its low 12 bits: the mapping was page aligned) or v2's
// rsvd. Those are checked against the file the same way; then v1 has data and head,
// v2 tail and head (at 16/24, or 64/128 when cache-aligned).
std::string parse_haproxy(std::span<std::uint8_t> f, Layout l, bool force, Image& img) {
  const std::uint64_t n = f.size();
  const bool v1 = l == Layout::haproxy_v1, aligned = l == Layout::haproxy_v2a;
  const std::string name(layout_name(l));
  img.layout = l;
  const std::uint64_t hl_min = v1 ? kHapV1HeaderMin : aligned ? kHapV2aHeader : kHapV2Header;
  if (n < hl_min) return fmt("file is %" PRIu64 " bytes, too small for a %s ring", n, name.c_str());
  const std::uint64_t size = rd64(f, 0), word1 = rd64(f, 8);
  const std::uint64_t hl = v1 ? word1 & 4095 : word1;
  const std::string hl_from = v1 ? fmt("from the area pointer 0x%" PRIx64, word1) : std::string("rsvd");
  if (hl < hl_min || hl >= n)
    return fmt("HAProxy ring header length %" PRIu64 " (%s) is impossible for %s", hl, hl_from.c_str(), name.c_str());
  if (size < 2 || size > n - hl)
    return fmt("HAProxy ring size %" PRIu64 " does not fit a %" PRIu64 "-byte file after a %" PRIu64 "-byte header",
               size, n, hl);
  if (hl + size != n) {
    std::string w = fmt("header %" PRIu64 " (%s) + size %" PRIu64 " != file size %" PRIu64, hl, hl_from.c_str(), size, n);
    if (!force) return w + " (use -f to read it anyway)";
    img.warnings.push_back(w);
  }
  img.header_len = hl;
  img.area_size = size;
  if (v1) {
    img.hap_head = rd64(f, 24);
    img.hap_tail = img.hap_head + rd64(f, 16);
    set_positions(img, rd64(f, 24), rd64(f, 16));
    return "";
  }
  std::uint64_t tail = rd64(f, aligned ? 64 : 16), head = rd64(f, aligned ? 128 : 24);
  img.locked = (tail & kHapTailLock) != 0;
  tail &= ~kHapTailLock;
  img.hap_head = head;
  img.hap_tail = tail;
  if (tail >= size) {
    img.head = size;
    img.tail = size + 1;
    img.positions_ok = false;
    img.tail_ok = false;
    img.positions_why =
        fmt("tail offset %" PRIu64 " outside the %" PRIu64 "-byte area: where the messages end is unknown", tail, size);
    return "";
  }
  if (head >= size || head == tail) {
    // The tail is good: head is rebuilt by scanning the area that ends there. Any
    // position with the tail's offset will do; this one keeps the window at >= 0.
    // (head == tail: HAProxy keeps an RC byte between them, even when empty.)
    img.tail = size + tail;
    img.head = img.tail - 1;
    img.positions_ok = false;
    img.positions_why = head == tail ? fmt("head offset %" PRIu64 " equals the tail offset", head)
                                     : fmt("head offset %" PRIu64 " outside the %" PRIu64 "-byte area", head, size);
    return "";
  }
  std::uint64_t data = (head <= tail ? 0 : size) + tail - head;
  set_positions(img, head, data);
  return "";
}

// With head and tail at odds, which one is damaged? Every byte a writer publishes is
// counted in bytes_written, so tail is 1 + bytes_written (a new ring has tail 1). If
// that candidate differs from the stored tail, agrees with head, and the framing from
// head lands exactly on it, the stored tail is the damaged one: head is kept (else
// head would be rebuilt below a wrong tail, from whatever the area holds there).
bool tail_from_counter(Image& img) {
  const std::uint64_t tc = 1 + img.hdr().bytes_written.load(std::memory_order_relaxed), head = img.head;
  if (tc == img.tail || tc <= head || tc - head > img.area_size || tc > kPosMask) return false;
  for (std::uint64_t p = head; p < tc - 1;) {
    if (img.at(p) == kRcWriting) return false;
    Frame f = frame_at(img, p, tc - 1);
    if (!f.span) return false;
    p += f.span;
  }
  img.tail_why = fmt("tail %" PRIu64 " is damaged (head %" PRIu64 "); rebuilt as 1 + bytes_written = %" PRIu64
                     ", where the messages from head end",
                     img.tail, head, tc);
  img.tail = tc;
  img.tail_rebuilt = true;
  img.positions_ok = true;
  img.positions_why.clear();
  return true;
}

}  // namespace

std::string parse(std::span<std::uint8_t> f, std::optional<Layout> forced, bool force, Image& img) {
  img = Image{};
  img.file = f;
  const std::uint64_t n = f.size();
  bool magic = n >= 8 && rd64(f, 0) == kMagic;
  Layout l;
  if (forced) {
    l = *forced;
    if (magic && l != Layout::ringlog) {
      if (!force) return "the file has ringlog's magic, not the layout " + std::string(layout_name(l)) + " (use -f)";
      img.warnings.push_back("ringlog magic read as " + std::string(layout_name(l)));
    }
  } else if (magic) {
    l = Layout::ringlog;
  } else {
    // haring's rule: rsvd small (not a pointer) and rsvd + size == file size: v2.
    std::uint64_t size = rd64(f, 0), rsvd = rd64(f, 8);
    if (n >= 32 && rsvd < 4096 && size <= n && rsvd == n - size)
      l = rsvd < kHapV2aHeader ? Layout::haproxy_v2 : Layout::haproxy_v2a;
    else
      l = Layout::haproxy_v1;
  }
  if (l != Layout::ringlog) {
    std::string e = parse_haproxy(f, l, force, img);
    if (!e.empty() && !forced && !magic)
      return e + " (not a ringlog ring: no RINGLOG1 magic; read as " + std::string(layout_name(l)) + ")";
    return e;
  }
  if (reinterpret_cast<std::uintptr_t>(f.data()) % alignof(Header) != 0) return "internal: unaligned image";
  std::string why = repair::check_header(f);
  if (n < sizeof(Header)) return why;
  img.layout = Layout::ringlog;
  const Header& h = img.hdr();
  if (!why.empty() && why.rfind("damaged positions", 0) != 0) return why;
  img.header_len = h.header_len;
  img.area_size = h.area_size;
  img.reload_positions();
  img.positions_ok = why.empty();
  if (!img.positions_ok) img.positions_why = why;
  if (!img.positions_ok) tail_from_counter(img);
  if (img.tail == 0) {
    img.positions_ok = false;
    img.tail_ok = false;
    img.positions_why = "tail is 0: where the messages end is unknown";
  }
  return "";
}

}  // namespace ringlog::dump
