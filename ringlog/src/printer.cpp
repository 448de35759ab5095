// The shared text printer (varnishlog's layout). Pure string building, no I/O: tools
// decide where the text goes.
#include "ringlog/printer.hpp"

#include <array>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <cstdio>

namespace ringlog {

namespace {

void pad_right(std::string& out, std::string_view s, std::size_t width) {
  out += s;
  if (s.size() < width) out.append(width - s.size(), ' ');
}

constexpr std::array<bool, 256> make_escape_table() {
  std::array<bool, 256> t{};
  for (unsigned c = 0; c < 256; ++c) t[c] = c < 0x20 || c >= 0x7f || c == '"' || c == '\\';
  return t;
}
constexpr std::array<bool, 256> kNeedsEscape = make_escape_table();
bool needs_escape(unsigned char c) { return kNeedsEscape[c]; }

// The index of the first byte a payload cannot be printed with as is (unsafe tags:
// anything needs_escape(); safe tags: control bytes), or p.size(). Eight bytes at a
// time (SWAR): the per-byte scan was the printer's hottest loop.
std::size_t first_special(std::string_view p, bool unsafe) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  auto has_zero = [](std::uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  auto has_byte = [&](std::uint64_t v, unsigned char b) { return has_zero(v ^ (kOnes * b)); };
  std::size_t i = 0;
  for (; i + 8 <= p.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p.data() + i, 8);
    std::uint64_t hit = ((w - kOnes * 0x20) & ~w & kHighs) | has_byte(w, 0x7f);  // < 0x20, DEL
    if (unsafe) hit |= (w & kHighs) | has_byte(w, '"') | has_byte(w, '\\');
    if (hit) break;
  }
  for (; i < p.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(p[i]);
    if (unsafe ? needs_escape(c) : (c < 0x20 || c == 0x7f)) return i;
  }
  return p.size();
}

void level_marker(std::string& out, unsigned level, char c) {
  if (level > 3) {
    char b[16];
    std::snprintf(b, sizeof b, "%c%u%c ", c, level, c);
    out += b;
    return;
  }
  out.append(level, c);
  out.append(4 - level, ' ');
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

void append_payload(std::string& out, Tag tag, std::string_view p) {
  std::uint8_t flags = tag_flags(tag);
  if (flags & kTagBinary) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += '[';
    out += std::to_string(p.size());
    out += "] ";
    for (unsigned char c : p) {
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    return;
  }
  const bool unsafe = (flags & kTagUnsafe) != 0;
  const std::size_t special = first_special(p, unsafe);
  if (special == p.size()) {
    out += p;
    return;
  }
  if (!unsafe) {
    // Safe tags come from our own code; still never let a control byte reach a terminal.
    std::size_t at = out.size();
    out += p;
    for (std::size_t i = at + special; i < out.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(out[i]);
      if (c < 0x20 || c == 0x7f) out[i] = '?';
    }
    return;
  }
  out += '"';
  for (unsigned char c : p) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          char b[8];
          std::snprintf(b, sizeof b, "\\%03o", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

static void append_record_text(std::string& out, const Record& r) {
  append_payload(out, r.tag, r.payload);
  if (r.truncated) out += " [truncated]";
  out += '\n';
}

void print_raw(std::string& out, const Record& r) {
  // "%10" PRIu64 " " without snprintf (a third of -g raw's time went to it).
  char b[32];
  char* e = b + sizeof b;
  char* q = e;
  *--q = ' ';
  std::uint64_t v = r.vxid;
  do {
    *--q = char('0' + v % 10);
    v /= 10;
  } while (v);
  while (e - q < 11) *--q = ' ';
  out.append(q, std::size_t(e - q));
  pad_right(out, tag_name(r.tag), 14);
  out += ' ';
  out += kind_char(r.kind);
  out += ' ';
  append_record_text(out, r);
}

void print_terse(std::string& out, unsigned level, const Record& r) {
  std::string_view name = tag_name(r.tag);
  if (level <= 3 && name.size() <= 14) [[likely]] {
    // Marker, tag padded to 14 and the space in one append (the common case).
    char b[19];
    std::memset(b, ' ', sizeof b);
    std::memset(b, '-', level);
    std::memcpy(b + 4, name.data(), name.size());
    out.append(b, sizeof b);
  } else {
    level_marker(out, level, '-');
    pad_right(out, name, 14);
    out += ' ';
  }
  append_record_text(out, r);
}

void print_group(std::string& out, const Group& g) {
  if (g.mode == Grouping::raw) {
    for (const Transaction* t : g.txns)
      for (std::size_t i = 0; i < t->records.size(); ++i) print_raw(out, t->record(i));
    return;
  }
  for (const Transaction* t : g.txns) {
    level_marker(out, t->level, '*');
    out += txn_label(*t);
    out += ' ';
    pad_right(out, std::to_string(t->vxid), 10);
    out += '\n';
    for (std::size_t i = 0; i < t->records.size(); ++i) print_terse(out, t->level, t->record(i));
  }
  out += '\n';
}

}  // namespace ringlog
