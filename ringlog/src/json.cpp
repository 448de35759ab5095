// JSON lines for transaction groups (`ringlog -j`, ringlog-forward). Pure string
// building; the output must stay valid JSON (and valid UTF-8) whatever bytes the
// records carry.
#include "ringlog/json.hpp"

namespace ringlog {

namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_u64(std::string& out, std::uint64_t v) {
  char b[24];
  char* e = b + sizeof b;
  char* p = e;
  do {
    *--p = char('0' + v % 10);
    v /= 10;
  } while (v);
  out.append(p, std::size_t(e - p));
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one.
std::size_t utf8_len(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  std::size_t n;
  std::uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

std::string_view side_name(VxidKind k) {
  switch (k) {
    case VxidKind::client: return "c";
    case VxidKind::backend: return "b";
    case VxidKind::session: return "s";
    case VxidKind::none: break;
  }
  return "-";
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  append_json_escaped(out, s);
  out += '"';
}

void append_json_escaped(std::string& out, std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    // Copy runs of plain characters at once.
    std::size_t j = i;
    while (j < s.size()) {
      unsigned char c = static_cast<unsigned char>(s[j]);
      if (c < 0x20 || c == '"' || c == '\\' || c >= 0x7f) break;
      ++j;
    }
    out.append(s.data() + i, j - i);
    i = j;
    if (i >= s.size()) break;
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c >= 0x80) {
      if (std::size_t n = utf8_len(s, i)) {
        out.append(s.data() + i, n);
        i += n;
        continue;
      }
    }
    // Control bytes, DEL and bytes that are not UTF-8: their byte value as \u00XX.
    out += "\\u00";
    out += kHex[c >> 4];
    out += kHex[c & 15];
    ++i;
  }
}

void append_json_value(std::string& out, const Record& r) {
  if (tag_flags(r.tag) & kTagBinary) {
    out += '"';
    for (unsigned char c : r.payload) {
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    out += '"';
    return;
  }
  append_json_string(out, r.payload);
}

void append_json(std::string& out, const Group& g, const JsonFilter& f) {
  out += "{\"group\":\"";
  out += grouping_name(g.mode);
  out += "\",\"vxid\":";
  append_u64(out, g.txns.empty() ? 0 : g.txns.front()->vxid);
  out += ",\"transactions\":[";
  bool first_txn = true;
  for (const Transaction* t : g.txns) {
    if (f.txn_filter && !f.txn_filter(*t)) continue;
    if (!first_txn) out += ',';
    first_txn = false;
    out += "{\"vxid\":";
    append_u64(out, t->vxid);
    out += ",\"level\":";
    append_u64(out, t->level);
    out += ",\"type\":\"";
    out += type_name(t->type);
    out += "\",\"side\":\"";
    out += side_name(t->kind);
    out += "\",\"parent\":";
    append_u64(out, t->parent);
    out += ",\"reason\":";
    append_json_string(out, t->reason);
    out += ",\"complete\":";
    out += t->ended ? "true" : "false";
    out += ",\"records\":[";
    bool first_rec = true;
    for (std::size_t i = 0; i < t->records.size(); ++i) {
      Record r = t->record(i);
      if (f.record_filter && !f.record_filter(*t, r)) continue;
      if (!first_rec) out += ',';
      first_rec = false;
      out += "{\"tag\":";
      append_json_string(out, tag_name(r.tag));
      out += ",\"value\":";
      append_json_value(out, r);
      if (r.truncated) out += ",\"truncated\":true";
      if (r.synthetic) out += ",\"synthetic\":true";
      out += '}';
    }
    out += "]}";
  }
  out += "]}\n";
}

}  // namespace ringlog
