// ringlog-dump core: layout detection, the message walk, output and repair.
// Nothing read from a file is trusted: every size is checked against the file before
// it is used, and every loop moves forward by at least one byte towards a fixed end.
#include "dump.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "ringlog/group.hpp"
#include "ringlog/json.hpp"
#include "ringlog/printer.hpp"
#include "ringlog/record.hpp"
#include "ringlog/repair.hpp"
#include "ringlog/ring.hpp"

namespace ringlog::dump {

using namespace format;

namespace {

constexpr std::uint64_t kHapTailLock = 1ULL << 63;   // HAProxy 3.0 RING_TAIL_LOCK (64-bit size_t)
constexpr std::uint64_t kHapV1HeaderMin = 32;         // sizeof(struct buffer)
constexpr std::uint64_t kHapV2Header = 32;            // size, rsvd, tail, head
constexpr std::uint64_t kHapV2aHeader = 192;          // tail @64, head @128, area @192
constexpr std::uint64_t kMaxScanWindow = 1ULL << 31;  // positions the boundary scan may map

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

void wr64(std::span<std::uint8_t> f, std::size_t off, std::uint64_t v) noexcept {
  if (off + 8 <= f.size()) std::memcpy(f.data() + off, &v, 8);
}

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

bool is_haproxy(Layout l) noexcept { return l != Layout::ringlog; }

// The framing of the message whose RC byte is at pos, up to the RC at limit (tail - 1).
struct Frame {
  std::uint64_t span = 0;  // 0: malformed
  std::uint64_t len = 0;
  std::size_t vl = 0;
  MsgKind kind = MsgKind::data;
  unsigned raw_kind = 0;
};
Frame frame_at(const Image& img, std::uint64_t pos, std::uint64_t limit) noexcept {
  Frame f;
  if (pos >= limit) return f;
  std::uint64_t word = 0;
  std::size_t avail = static_cast<std::size_t>(std::min<std::uint64_t>(kVarintMax, limit - pos - 1));
  f.vl = varint_decode([&](std::size_t i) { return img.at(pos + 1 + i); }, avail, word);
  if (f.vl == 0) return f;
  if (is_haproxy(img.layout)) {
    f.len = word;
  } else {
    f.len = word >> kKindBits;
    f.raw_kind = static_cast<unsigned>(word & kKindMask);
    f.kind = static_cast<MsgKind>(f.raw_kind);
  }
  if (f.len > img.area_size) return f;
  std::uint64_t span = 1 + f.vl + f.len;
  if (span > limit - pos) return f;  // the next RC must be at or before limit
  f.span = span;
  return f;
}

std::string copy_payload(const Image& img, std::uint64_t pos, std::uint64_t len) {
  std::string s(static_cast<std::size_t>(len), '\0');
  std::uint64_t o = pos % img.area_size;
  std::size_t done = 0;
  while (done < len) {
    std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(len - done, img.area_size - o));
    std::memcpy(s.data() + done, img.area() + o, chunk);
    done += chunk;
    o = 0;
  }
  return s;
}

// In-flight batches recorded in writer slots (ringlog layout): [x, end - 1) behind an
// RC of 0xFF at x.
struct Inflight {
  std::uint64_t x = 0, end = 0;
  unsigned slot = 0;
  std::uint32_t pid = 0;
  bool dead = false;
  std::uint32_t saved_rc = 0;
};
std::vector<Inflight> inflight_batches(const Image& img) {
  std::vector<Inflight> v;
  if (img.layout != Layout::ringlog) return v;
  const Header& h = img.hdr();
  for (unsigned i = 0; i < kWriterSlots; ++i) {
    // A stale or nonsense record is ignored.
    std::optional<repair::InflightBatch> r = repair::inflight_batch(h, i, img.window_lo(), img.tail);
    if (!r) continue;
    v.push_back({r->x, r->end, i, r->pid, r->pid == 0 || !img.alive(r->pid, r->start_time), r->saved_rc});
  }
  return v;
}

const Inflight* inflight_at(const std::vector<Inflight>& v, std::uint64_t x) noexcept {
  for (auto& b : v)
    if (b.x == x) return &b;
  return nullptr;
}

// Positions where a readers count may legitimately be non-zero: those recorded in
// reader slots (held, or being moved to). Elsewhere a resynchronisation point must
// have an RC of 0, as haring -r requires: payload text rarely holds a NUL, so this
// keeps the scan from finding chains in the middle of old payloads.
std::vector<std::uint64_t> reader_positions(const Image& img) {
  std::vector<std::uint64_t> v;
  if (img.layout != Layout::ringlog) return v;
  for (const ReaderSlot& rs : img.hdr().readers) {
    if (!rs.pid.load(std::memory_order_relaxed)) continue;
    v.push_back(rs.pos.load(std::memory_order_relaxed));
    if (std::uint64_t n = rs.next_pos.load(std::memory_order_relaxed)) v.push_back(n - 1);
  }
  return v;
}

// good[p - lo]: the framing from p reaches tail - 1 exactly (skipping recorded in-flight
// batches), through RC bytes that are 0 or accounted for. Computed from the end, since
// a message only points forward.
std::vector<std::uint8_t> chain_map(const Image& img, const std::vector<Inflight>& inflight) {
  std::uint64_t lo = img.window_lo(), t = img.tail;
  if (t == 0 || t - lo > kMaxScanWindow) return {};
  std::vector<std::uint64_t> held = reader_positions(img);
  std::vector<std::uint8_t> good(static_cast<std::size_t>(t - lo), 0);
  good[t - 1 - lo] = 1;
  for (std::uint64_t p = t - 1; p-- > lo;) {
    std::uint8_t rc = img.at(p);
    if (rc == kRcWriting) {
      if (const Inflight* b = inflight_at(inflight, p)) good[p - lo] = good[b->end - 1 - lo];
      continue;
    }
    if (rc != 0 && std::find(held.begin(), held.end(), p) == held.end()) continue;
    Frame f = frame_at(img, p, t - 1);
    if (f.span) good[p - lo] = good[p + f.span - lo];
  }
  // Never resynchronise inside a recorded batch: its bytes may be half written.
  for (auto& b : inflight)
    for (std::uint64_t p = b.x + 1; p + 1 < b.end; ++p) good[p - lo] = 0;
  return good;
}

// Where a rebuilt head starts: the oldest position from which the framing reaches
// the tail, then past leading "00 00" pairs. Those read as empty messages, but a run
// of them is far more likely area never written (a HAProxy ring that has not wrapped,
// zeros behind a damaged tail) than messages without payload; skipping them loses no
// content.
std::uint64_t rebuilt_head(const Image& img, const std::vector<std::uint8_t>& good) noexcept {
  const std::uint64_t lo = img.window_lo(), limit = img.tail - 1;
  std::uint64_t p = lo;
  while (p < limit && !good[p - lo]) ++p;
  while (p + 2 <= limit && img.at(p) == 0 && img.at(p + 1) == 0 && good[p + 2 - lo]) p += 2;
  return p;
}

std::string kind_name(MsgKind k) {
  switch (k) {
    case MsgKind::data: return "data";
    case MsgKind::notice: return "notice";
    case MsgKind::pad: return "pad";
  }
  return "reserved";
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

// ---------------------------------------------------------------- parse

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

// ---------------------------------------------------------------- walk

WalkResult walk(const Image& img, const WalkOptions& o) {
  WalkResult w;
  const std::uint64_t t = img.tail;
  if (!img.tail_ok || t == 0 || img.area_size == 0) {
    w.stop_reason = img.tail_ok ? std::string("no tail") : img.positions_why;
    return w;
  }
  const std::uint64_t limit = t - 1;
  const std::uint64_t lo = img.window_lo();
  std::vector<Inflight> inflight = inflight_batches(img);
  std::vector<std::uint8_t> good;
  bool have_good = false;
  auto need_good = [&] {
    if (!have_good) {
      good = chain_map(img, inflight);
      have_good = true;
    }
    return !good.empty();
  };
  auto first_good = [&](std::uint64_t from) -> std::uint64_t {
    for (std::uint64_t p = std::max(from, lo); p < t; ++p)
      if (good[p - lo]) return p;
    return limit;
  };

  std::uint64_t pos;
  if (img.positions_ok) {
    pos = img.head;
  } else {
    if (!need_good()) {
      w.stop_reason = img.positions_why + "; the area is too large to scan";
      return w;
    }
    pos = rebuilt_head(img, good);
    w.head_rebuilt = true;
  }
  w.start = pos;
  const bool live = img.layout == Layout::ringlog && o.live_recheck && img.positions_ok;  // a bad head is no guide
  auto damage = [&](std::uint64_t at, const std::string& why) -> bool {
    if (!o.scan || !need_good()) {
      // HAProxy files hold offsets, not positions: name the byte as they would.
      w.stop_reason = why + (is_haproxy(img.layout) ? fmt(" at offset %" PRIu64, at % img.area_size)
                                                    : fmt(" at position %" PRIu64, at));
      return false;
    }
    std::uint64_t q = first_good(at + 1);
    w.skipped.push_back({at, q, why});
    pos = q;
    return true;
  };

  while (pos < limit && w.messages.size() < o.max_messages) {
    if (live) {
      std::uint64_t h = img.hdr().head.load(std::memory_order_acquire);  // P1
      if (h > pos) {
        h = std::min(h, limit);
        w.lost_bytes += h - pos;
        pos = h;
        continue;
      }
    }
    std::uint8_t rc = img.at(pos);
    if (rc == kRcWriting) {
      if (const Inflight* b = inflight_at(inflight, pos)) {
        w.skipped.push_back({pos, b->end - 1,
                             b->dead ? fmt("torn batch of dead writer pid %u (slot %u)", b->pid, b->slot)
                                     : fmt("batch in flight (writer pid %u, slot %u)", b->pid, b->slot)});
        pos = b->end - 1;
        continue;
      }
      if (!damage(pos, "RC 0xFF with no writer record (a torn or in-flight batch)")) break;
      continue;
    }
    Frame f = frame_at(img, pos, limit);
    if (f.span == 0) {
      if (!damage(pos, "bad framing")) break;
      continue;
    }
    if (f.kind == MsgKind::pad || f.raw_kind == 3) {
      ++w.pads;
      w.pad_bytes += f.span;
      pos += f.span;
      continue;
    }
    Message m;
    m.pos = pos;
    m.rc = rc;
    m.kind = f.kind;
    m.payload = copy_payload(img, pos + 1 + f.vl, f.len);
    if (live) {
      std::atomic_thread_fence(std::memory_order_acquire);  // P2
      std::uint64_t h = img.hdr().head.load(std::memory_order_relaxed);
      if (h > pos) continue;  // overwritten while copied: the next round counts the loss
    }
    w.messages.push_back(std::move(m));
    pos += f.span;
  }
  w.end = pos;
  w.complete = pos == limit;
  if (!w.complete && w.stop_reason.empty() && w.messages.size() >= o.max_messages) w.stop_reason = "message limit";
  return w;
}

// ---------------------------------------------------------------- output

namespace {

void append_remapped(std::string& out, std::string_view p, bool lf_remap) {
  if (!lf_remap) {
    out += p;
    return;
  }
  for (char c : p) {
    if (c == '\n') out += "\r\v";
    else out += c;
  }
}

void json_skipped(std::string& out, const Image& img, const WalkResult& w) {
  out += "\"skipped\":[";
  for (std::size_t i = 0; i < w.skipped.size(); ++i) {
    const Skipped& s = w.skipped[i];
    out += fmt("%s{\"pos\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"why\":", i ? "," : "",
               is_haproxy(img.layout) ? s.pos % img.area_size : s.pos, s.end - s.pos);
    append_json_string(out, s.why);
    out += "}";
  }
  out += "]";
}

}  // namespace

std::string format_messages(const Image& img, const WalkResult& w, const PrintOptions& o) {
  std::string out;
  const bool records = o.mode == Mode::records;
  if (o.json) {
    out += "{\"layout\":";
    append_json_string(out, layout_name(img.layout));
    out += records ? ",\"records\":[" : ",\"messages\":[";
  }
  bool first = true;
  if (!records) {
    for (const Message& m : w.messages) {
      if (o.json) {
        out += fmt("%s\n{\"pos\":%" PRIu64 ",\"kind\":\"%s\",\"payload\":", first ? "" : ",",
                   is_haproxy(img.layout) ? m.pos % img.area_size : m.pos,
                   kind_name(m.kind).c_str());
        append_json_string(out, m.payload);
        out += "}";
        first = false;
      } else {
        append_remapped(out, m.payload, o.lf_remap);
        out += '\n';
      }
    }
  } else {
    auto sink = [&](const Group& g) {
      if (!o.json) {
        std::string text;
        print_group(text, g);
        append_remapped(out, text, false);
        return;
      }
      for (const Transaction* tx : g.txns)
        for (std::size_t i = 0; i < tx->records.size(); ++i) {
          Record r = tx->record(i);
          out += fmt("%s\n{\"vxid\":%" PRIu64 ",\"kind\":\"%c\",\"tag\":", first ? "" : ",", r.vxid, kind_char(r.kind));
          append_json_string(out, tag_name(r.tag));
          out += ",\"payload\":";
          append_json_string(out, r.payload);
          out += fmt(",\"truncated\":%s,\"synthetic\":%s}", r.truncated ? "true" : "false",
                     r.synthetic ? "true" : "false");
          first = false;
        }
    };
    Grouper g(GroupOptions{.mode = Grouping::raw}, sink);
    auto now = Grouper::Clock::now();
    if (w.lost_bytes) g.lost(w.lost_bytes, now);
    for (const Message& m : w.messages) {
      if (m.kind == MsgKind::notice) g.notice(m.payload, now);
      else g.feed(std::as_bytes(std::span(m.payload.data(), m.payload.size())), now);
    }
    g.flush();
  }
  if (o.json) {
    out += "\n],";
    json_skipped(out, img, w);
    out += fmt(",\"complete\":%s,\"lost_bytes\":%" PRIu64 "}\n", w.complete ? "true" : "false", w.lost_bytes);
  }
  return out;
}

namespace {

struct InfoWriter {
  bool json;
  std::string out;
  bool first = true;
  void key(const char* k) {
    if (json) {
      out += first ? "" : ",";
      out += "\n  \"";
      out += k;
      out += "\":";
    } else {
      out += fmt("%-20s ", k);
    }
    first = false;
  }
  void num(const char* k, std::uint64_t v) {
    key(k);
    out += fmt("%" PRIu64, v);
    if (!json) out += '\n';
  }
  void str(const char* k, std::string_view v) {
    key(k);
    if (json) append_json_string(out, v);
    else {
      out += v;
      out += '\n';
    }
  }
  void boolean(const char* k, bool v) {
    key(k);
    out += v ? "true" : "false";
    if (!json) out += '\n';
  }
};

std::string iso_time(std::uint64_t ns) {
  if (ns == 0) return "-";
  time_t s = static_cast<time_t>(ns / 1000000000u);
  struct tm tm {};
  gmtime_r(&s, &tm);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

}  // namespace

std::string format_info(const Image& img, const WalkResult& w, bool json) {
  InfoWriter iw{json, {}};
  if (json) iw.out += "{";
  iw.str("layout", layout_name(img.layout));
  iw.num("file_size", img.file.size());
  iw.num("header_len", img.header_len);
  iw.num("area_size", img.area_size);
  const bool rl = img.layout == Layout::ringlog;
  // HAProxy offsets are shown as in the file; ringlog positions are absolute.
  iw.num("head", rl ? img.head : img.positions_ok ? img.head % img.area_size : img.hap_head);
  iw.num("tail", rl ? img.tail : img.positions_ok ? img.tail % img.area_size : img.hap_tail);
  iw.num("used", img.positions_ok ? img.tail - img.head : 0);
  iw.boolean("positions_ok", img.positions_ok);
  if (!img.positions_ok) iw.str("positions_problem", img.positions_why);
  if (img.tail_rebuilt) iw.str("positions_problem", img.tail_why);
  iw.boolean("locked", img.locked);
  for (auto& wmsg : img.warnings) iw.str("warning", wmsg);
  if (rl) {
    const Header& h = img.hdr();
    if (img.locked) {
      repair::LockOwner lo = lock_owner(img);
      if (lo.pid == 0) {
        iw.str("lock_owner", "not recorded");
      } else if (json) {
        iw.key("lock_owner");
        iw.out += fmt("{\"pid\":%u,\"slot\":%d,\"alive\":%s}", lo.pid, lo.slot, lo.alive ? "true" : "false");
      } else {
        iw.str("lock_owner", fmt("pid %u, writer slot %d, %s", lo.pid, lo.slot, lo.alive ? "alive" : "dead"));
      }
    }
    iw.num("version", h.version);
    iw.str("created", iso_time(h.created_ns));
    iw.num("creator_pid", h.creator_pid);
    iw.str("instance_id", fmt("%016" PRIx64, h.instance_id));
    iw.num("max_msg_len", h.max_msg_len);
    iw.num("pinned", h.pinned.load(std::memory_order_relaxed));
    RingStats s = read_stats(h);
    if (json) {
      iw.key("counters");
      iw.out += "{";
    }
    struct C {
      const char* name;
      std::uint64_t v;
    } counters[] = {
        {"msgs_written", s.msgs_written},       {"bytes_written", s.bytes_written},
        {"batches", s.batches},                 {"msgs_dropped", s.msgs_dropped},
        {"bytes_dropped", s.bytes_dropped},     {"msgs_truncated", s.msgs_truncated},
        {"msgs_refused", s.msgs_refused},       {"lock_waits", s.lock_waits},
        {"lock_recoveries", s.lock_recoveries}, {"torn_discarded", s.torn_discarded},
        {"readers_released", s.readers_released}, {"writer_waits", s.writer_waits},
        {"pending_drop_msgs", h.pending_drop_msgs.load(std::memory_order_relaxed)},
    };
    for (std::size_t i = 0; i < std::size(counters); ++i) {
      if (json) iw.out += fmt("%s\"%s\":%" PRIu64, i ? "," : "", counters[i].name, counters[i].v);
      else iw.num(counters[i].name, counters[i].v);
    }
    if (json) iw.out += "}";
    // Writer and reader tables: the used slots only.
    std::string wt, rt;
    unsigned nw = 0, nr = 0;
    for (unsigned i = 0; i < kWriterSlots; ++i) {
      const WriterSlot& ws = h.writers[i];
      std::uint32_t pid = ws.pid.load(std::memory_order_relaxed);
      if (!pid) continue;
      bool a = img.alive(pid, ws.start_time);
      std::uint64_t ip = ws.inflight_pos.load(std::memory_order_relaxed);
      std::uint64_t ie = ws.inflight_end.load(std::memory_order_relaxed);
      std::uint64_t b = ws.batches.load(std::memory_order_relaxed);
      if (json)
        wt += fmt("%s{\"slot\":%u,\"pid\":%u,\"tid\":%u,\"alive\":%s,\"inflight_pos\":%" PRIu64
                  ",\"inflight_end\":%" PRIu64 ",\"batches\":%" PRIu64 "}",
                  nw ? "," : "", i, pid, ws.tid, a ? "true" : "false", ip, ie, b);
      else
        wt += fmt("  writer %3u  pid %u tid %u %s  batches %" PRIu64 "%s\n", i, pid, ws.tid, a ? "alive" : "dead", b,
                  ip ? fmt("  in flight [%" PRIu64 ", %" PRIu64 ")", ip - 1, ie).c_str() : "");
      ++nw;
    }
    for (unsigned i = 0; i < kReaderSlots; ++i) {
      const ReaderSlot& rs = h.readers[i];
      std::uint32_t pid = rs.pid.load(std::memory_order_relaxed);
      if (!pid) continue;
      bool a = img.alive(pid, rs.start_time);
      std::uint64_t pos = rs.pos.load(std::memory_order_relaxed);
      std::uint64_t np = rs.next_pos.load(std::memory_order_relaxed);
      std::uint64_t mr = rs.msgs_read.load(std::memory_order_relaxed);
      if (json)
        rt += fmt("%s{\"slot\":%u,\"pid\":%u,\"alive\":%s,\"pos\":%" PRIu64 ",\"next_pos\":%" PRIu64
                  ",\"msgs_read\":%" PRIu64 "}",
                  nr ? "," : "", i, pid, a ? "true" : "false", pos == kNoPos ? 0 : pos, np, mr);
      else
        rt += fmt("  reader %3u  pid %u %s  pos %s  msgs_read %" PRIu64 "%s\n", i, pid, a ? "alive" : "dead",
                  pos == kNoPos ? "-" : fmt("%" PRIu64, pos).c_str(), mr,
                  np ? fmt("  moving to %" PRIu64, np - 1).c_str() : "");
      ++nr;
    }
    if (json) {
      iw.key("writers");
      iw.out += "[" + wt + "]";
      iw.key("readers");
      iw.out += "[" + rt + "]";
    } else {
      iw.num("writers", nw);
      iw.out += wt;
      iw.num("readers", nr);
      iw.out += rt;
    }
  }
  iw.num("messages", w.messages.size());
  iw.num("pads", w.pads);
  iw.num("skipped_ranges", w.skipped.size());
  iw.boolean("complete", w.complete);
  if (!w.complete && !w.stop_reason.empty()) iw.str("stopped", w.stop_reason);
  if (json) iw.out += "\n}\n";
  return iw.out;
}

// ---------------------------------------------------------------- repair

namespace {

void put(Image& img, std::uint64_t pos, std::uint8_t v) noexcept {
  img.file[img.header_len + pos % img.area_size] = v;
}

// The ringlog-layout image as the library's repair steps see it.
repair::View view_of(Image& img) noexcept {
  return repair::View{&img.hdr_mut(), img.file.data() + img.header_len, img.area_size};
}

// Rewrites [x, q) as pad messages (ringlog layout): x and every inner RC get 0, the
// byte at q (the next good RC) is left alone. q - x >= 2.
void fill_pad(Image& img, std::uint64_t x, std::uint64_t q) noexcept {
  put(img, x, 0);
  repair::write_pad(view_of(img), x, q);
}

bool decodes(const std::string& payload) {
  BatchDecoder d(std::as_bytes(std::span(payload.data(), payload.size())));
  if (!d.valid()) return false;
  Record r;
  while (d.next(r)) {
  }
  return d.status() == DecodeStatus::ok;
}

}  // namespace

RepairStatus repair(Image& img, const RepairOptions& o, RepairReport& rep, std::string& error) {
  rep = RepairReport{};
  const bool rl = img.layout == Layout::ringlog;
  const std::uint64_t size = img.area_size;
  if (size < 2) {
    error = "area too small";
    return RepairStatus::unrecoverable;
  }
  if (!img.tail_ok || img.tail == 0) {
    error = img.tail_ok ? std::string("tail is 0: where the messages end is unknown") : img.positions_why;
    return RepairStatus::unrecoverable;
  }
  std::uint32_t me = static_cast<std::uint32_t>(::getpid());
  // -- live processes: in place, a live writer means we must not touch anything.
  if (rl && o.in_place) {
    Header& h = img.hdr_mut();
    for (unsigned i = 0; i < kWriterSlots; ++i) {
      std::uint32_t pid = h.writers[i].pid.load(std::memory_order_acquire);
      if (pid && pid != me && img.alive(pid, h.writers[i].start_time)) {
        error = fmt("writer process %u (slot %u) is alive; stop it, or repair a copy with -o", pid, i);
        return RepairStatus::refused;
      }
    }
    repair::LockOwner lo = lock_owner(img);
    if (img.locked && lo.pid != me && lo.alive) {
      error = fmt("the tail lock is held by live process %u; stop it, or repair a copy with -o", lo.pid);
      return RepairStatus::refused;
    }
  }

  // In place, hold the tail lock while repairing, so that a live pinned reader does
  // not attach or run its own checks meanwhile; storing the final tail releases it.
  if (rl && o.in_place && !img.locked) {
    Header& h = img.hdr_mut();
    std::uint64_t expect = img.tail_stored;
    if (!h.tail.compare_exchange_strong(expect, img.tail_stored | kTailLock, std::memory_order_acquire)) {
      error = "the ring changed while being repaired (a live process is using it)";
      return RepairStatus::refused;
    }
    h.owner.store(owner_word(me, 0xfffffffeu), std::memory_order_relaxed);
  }
  bool holding = rl && o.in_place && !img.locked;  // this process holds the tail lock
  auto give_up = [&](std::string why) {
    if (holding) {  // release the lock at the tail found
      img.hdr_mut().owner.store(0, std::memory_order_relaxed);
      img.hdr_mut().tail.store(img.tail_stored, std::memory_order_release);
    }
    error = std::move(why);
    return RepairStatus::unrecoverable;
  };

  // -- the tail lock.
  if (img.locked) {
    if (rl) {
      Header& h = img.hdr_mut();
      std::uint64_t owner = h.owner.load(std::memory_order_relaxed);
      const repair::LockOwner dead = repair::lock_owner(h, owner, {});  // its lock is stale
      std::uint64_t t = img.tail;
      // Unlike the ring's own recovery, no recount when the count was not saved: step 4
      // below sets every RC on the chain from the live readers anyway.
      std::uint32_t saved = h.owner_saved_rc.load(std::memory_order_relaxed);
      if (repair::undo_dead_lock(view_of(img), t, dead, saved < kRcNotRecorded ? saved : 0))
        rep.fixed.push_back(fmt("restored the readers count at the tail (position %" PRIu64 ") hidden by the lock holder", t - 1));
      if (o.in_place) {
        // Take the dead owner's lock over rather than release it: live pinned readers
        // must not attach while the rest is repaired. The final tail store releases it.
        h.owner.store(owner_word(me, 0xfffffffeu), std::memory_order_relaxed);
        holding = true;
      } else {
        h.owner.store(0, std::memory_order_relaxed);
        h.tail.store(t, std::memory_order_release);
      }
      rep.fixed.push_back(owner ? fmt("cleared the stale tail lock of pid %u (writer slot %d)", dead.pid, dead.slot)
                                : std::string("cleared a stale tail lock with no recorded owner"));
    } else {
      wr64(img.file, img.layout == Layout::haproxy_v2 ? 16 : 64, img.tail % size);
      rep.fixed.push_back("cleared the stale tail lock bit");
    }
    img.locked = false;
  }

  if (img.tail_rebuilt) rep.fixed.push_back(img.tail_why);

  // -- where the messages are.
  std::vector<Inflight> inflight = inflight_batches(img);
  std::vector<std::uint8_t> good = chain_map(img, inflight);
  if (good.empty()) return give_up("the area is too large to scan");
  const std::uint64_t t = img.tail, lo = img.window_lo(), limit = t - 1;
  auto first_good = [&](std::uint64_t from) {
    for (std::uint64_t p = std::max(from, lo); p < t; ++p)
      if (good[p - lo]) return p;
    return limit;
  };
  std::uint64_t head = img.head;
  if (!img.positions_ok || head < lo || head > limit) {
    std::uint64_t nh = rebuilt_head(img, good);
    rep.fixed.push_back(fmt("head was not trustworthy (%s); rebuilt by scanning for message boundaries: %" PRIu64,
                            img.positions_ok ? "outside the window" : img.positions_why.c_str(),
                            rl ? nh : nh % size));
    head = nh;
  }

  // -- walk from head, keeping what frames well, discarding what does not.
  std::vector<std::uint64_t> kept;  // RC positions of kept messages (and the tail RC)
  std::uint64_t pos = head, prev = head, discard_from = head;
  bool have_prev = false, have_discard = false, prev_counted = false;
  while (pos < limit) {
    std::uint8_t rc = img.at(pos);
    const Inflight* b = rc == kRcWriting ? inflight_at(inflight, pos) : nullptr;
    Frame f = rc == kRcWriting ? Frame{} : frame_at(img, pos, limit);
    if (b || f.span == 0) {
      // Discard [from, q): a torn batch, or damage up to the next good boundary.
      std::uint64_t from = pos, q = b ? b->end - 1 : first_good(pos + 1);
      if (rl && q - from < 2) {  // a pad needs 2 bytes: take the message before in too
        if (have_prev) {
          from = prev;
          kept.pop_back();
          if (prev_counted) {
            --rep.kept_msgs;
            rep.kept_bytes -= pos - prev;
          }
        } else if (have_discard) {
          from = discard_from;
        }
      }
      std::uint64_t bytes = q - from;
      if (b) {
        ++rep.torn_batches;
        rep.fixed.push_back(fmt("discarded the torn batch of %s writer pid %u at %" PRIu64 " (%" PRIu64 " bytes)",
                                b->dead ? "dead" : "live", b->pid, from, bytes));
        img.hdr_mut().torn_discarded.fetch_add(1, std::memory_order_relaxed);
      } else {
        rep.fixed.push_back(fmt("discarded %" PRIu64 " damaged bytes at %" PRIu64 " (%s)", bytes,
                                rl ? from : from % size,
                                rc == kRcWriting ? "RC 0xFF with no writer record" : "bad framing"));
      }
      ++rep.discarded_msgs;
      rep.discarded_bytes += bytes;
      if (rl && bytes >= 2) {
        fill_pad(img, from, q);
      } else {
        // HAProxy's readers know no pad (nor can one byte be padded): head moves past
        // the damage, and the messages before it go too.
        for (std::size_t i = 0; i < kept.size(); ++i) {
          std::uint64_t nx = i + 1 < kept.size() ? kept[i + 1] : from;
          rep.discarded_bytes += nx - kept[i];
        }
        rep.discarded_msgs += kept.size();
        rep.kept_msgs = 0;
        rep.kept_bytes = 0;
        kept.clear();
        head = q;
      }
      have_prev = false;
      have_discard = true;
      discard_from = from;
      have_prev = false;
      pos = q;
      continue;
    }
    if (f.kind == MsgKind::data && !is_haproxy(img.layout)) {
      std::string p = copy_payload(img, pos + 1 + f.vl, f.len);
      if (!p.empty() && static_cast<std::uint8_t>(p[0]) == kBatchMarker && !decodes(p)) ++rep.bad_records;
    }
    prev_counted = f.kind != MsgKind::pad && f.raw_kind != 3;
    if (prev_counted) {
      ++rep.kept_msgs;
      rep.kept_bytes += f.span;
    }
    kept.push_back(pos);
    prev = pos;
    have_prev = true;
    have_discard = false;
    pos += f.span;
  }
  kept.push_back(limit);

  // -- readers: RC bytes and reader slots.
  std::vector<std::pair<std::uint64_t, unsigned>> holds;  // position, live readers there
  if (rl) {
    Header& h = img.hdr_mut();
    unsigned pinned = 0;
    for (unsigned i = 0; i < kReaderSlots; ++i) {
      ReaderSlot& rs = h.readers[i];
      std::uint32_t pid = rs.pid.load(std::memory_order_relaxed);
      if (!pid) continue;
      bool a = img.alive(pid, rs.start_time);
      if (a && o.in_place) {
        ++pinned;
        std::uint64_t p = rs.pos.load(std::memory_order_relaxed);
        if (p != kNoPos) holds.emplace_back(p, 1);
        continue;
      }
      rep.fixed.push_back(a ? fmt("reader slot %u (live pid %u) not carried into the copy", i, pid)
                            : fmt("released reader slot %u of dead pid %u", i, pid));
      repair::free_reader_slot(rs);
      h.readers_released.fetch_add(1, std::memory_order_relaxed);
    }
    if (h.pinned.load(std::memory_order_relaxed) != pinned) {
      h.pinned.store(pinned, std::memory_order_relaxed);
    }
    // Writer slots of dead processes (or, in a copy, of everyone).
    for (unsigned i = 0; i < kWriterSlots; ++i) {
      WriterSlot& ws = h.writers[i];
      std::uint32_t pid = ws.pid.load(std::memory_order_relaxed);
      if (!pid && ws.inflight_pos.load(std::memory_order_relaxed) == 0) continue;
      if (pid && o.in_place && img.alive(pid, ws.start_time)) continue;
      ws.inflight_pos.store(0, std::memory_order_relaxed);
      ws.pid.store(0, std::memory_order_relaxed);
      if (pid) rep.fixed.push_back(fmt("freed writer slot %u of %s pid %u", i, o.in_place ? "dead" : "gone", pid));
    }
  }
  unsigned reset = 0;
  for (std::uint64_t k : kept) {
    unsigned want = 0;
    for (auto& [p, n] : holds)
      if (p == k) want += n;
    want = std::min(want, unsigned(kRcMaxReaders));
    if (img.at(k) != want) {
      put(img, k, static_cast<std::uint8_t>(want));
      ++reset;
    }
  }
  if (reset) rep.fixed.push_back(fmt("reset %u readers-count bytes that no live reader holds", reset));

  // -- positions.
  if (rl) {
    Header& h = img.hdr_mut();
    if (head != img.head) h.head.store(head, std::memory_order_release);
    if (holding) {
      h.owner.store(0, std::memory_order_relaxed);
      h.owner_saved_rc.store(kRcNotRecorded, std::memory_order_relaxed);
    }
    h.tail.store(t, std::memory_order_release);  // releases the lock when holding
  } else if (head != img.head || !img.positions_ok) {
    if (img.layout == Layout::haproxy_v1) {
      wr64(img.file, 24, head % size);
      wr64(img.file, 16, t - head);
    } else {
      wr64(img.file, img.layout == Layout::haproxy_v2 ? 24 : 128, head % size);
    }
    if (head != img.head && img.positions_ok)
      rep.fixed.push_back(fmt("moved head to %" PRIu64 ", past the damage", head % size));
  }
  img.head = head;
  img.positions_ok = true;
  img.positions_why.clear();

  // -- the result must read cleanly.
  WalkResult check = walk(img, WalkOptions{.scan = false, .live_recheck = false});
  if (!check.complete) return give_up("internal: the repaired ring does not read cleanly: " + check.stop_reason);
  return rep.changed() ? RepairStatus::repaired : RepairStatus::clean;
}

std::string format_report(const RepairReport& r, bool json) {
  std::string out;
  if (json) {
    out += "{\"fixed\":[";
    for (std::size_t i = 0; i < r.fixed.size(); ++i) {
      if (i) out += ",";
      append_json_string(out, r.fixed[i]);
    }
    out += fmt("],\"kept_msgs\":%" PRIu64 ",\"kept_bytes\":%" PRIu64 ",\"discarded_msgs\":%" PRIu64
               ",\"discarded_bytes\":%" PRIu64 ",\"torn_batches\":%" PRIu64 ",\"bad_records\":%" PRIu64 "}\n",
               r.kept_msgs, r.kept_bytes, r.discarded_msgs, r.discarded_bytes, r.torn_batches, r.bad_records);
    return out;
  }
  for (auto& f : r.fixed) out += "fixed: " + f + "\n";
  // Found, not fixed: such messages are kept as they are (readers report them), so
  // they alone leave the ring clean, and a second repair finds the same.
  if (r.bad_records)
    out += fmt("found: %" PRIu64 " messages start like record batches but do not decode (kept; readers report them)\n",
               r.bad_records);
  if (r.fixed.empty()) out += "clean: nothing to repair\n";
  out += fmt("kept %" PRIu64 " messages (%" PRIu64 " bytes), discarded %" PRIu64 " (%" PRIu64 " bytes)\n",
             r.kept_msgs, r.kept_bytes, r.discarded_msgs, r.discarded_bytes);
  return out;
}

}  // namespace ringlog::dump
