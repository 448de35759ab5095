// NCSA lines (varnishncsa's formatters) from transactions. The format is compiled once
// into Ops; rendering scans a transaction's records once into fragments (views into
// the transaction's payloads) and then walks the Ops. Values read from records are
// always escaped; literal text of the format is copied as given.
#include "ringlog/ncsa.hpp"

#include <time.h>

#include <array>
#include <cstdio>
#include <optional>
#include <vector>

#include "ringlog/json.hpp"
#include "ringlog/tags.hpp"
#include "ringlog/text.hpp"

namespace ringlog {

namespace {

// Values a transaction's records provide (varnishncsa's fragments).
enum Field : std::uint8_t {
  F_H,       // protocol
  F_U,       // URL path
  F_q,       // query string, '?' included
  F_b,       // body bytes sent (client) / received (backend)
  F_h,       // client address / backend address
  F_m,       // method
  F_s,       // status
  F_I,       // total bytes received (client) / sent (backend)
  F_O,       // total bytes sent (client) / received (backend)
  F_tstart,  // Timestamp Start: absolute
  F_tend,    // Timestamp Resp: / PipeSess: / BerespBody: absolute
  F_ttfb,    // Timestamp Process: / Pipe: / Beresp: since start
  F_host,    // Host header (first)
  F_auth,    // Authorization: basic credentials (first)
  F_count
};

enum class OpKind : std::uint8_t {
  literal, field, requestline, auth, time, vxid, side, hitmiss, handling, req_header, resp_header, vsl
};

enum class TimeKind : std::uint8_t { strftime, sec, msec, usec, msec_frac, usec_frac, dur_s, dur_ms, dur_us };

// What a missing value prints: a string ('-', or "" with -j) or a number ('-', or
// null with -j).
enum class Missing : std::uint8_t { string, number };

struct Op {
  // A %t / %{X}t result for one second, reused while the second does not change
  // (localtime and strftime cost more than the rest of a line).
  struct TimeCache {
    std::int64_t secs = -1;
    std::string text;
  };
  OpKind kind = OpKind::literal;
  Field field = F_count;
  TimeKind time = TimeKind::strftime;
  Missing missing = Missing::string;
  bool has_default = false;  // field: print text when missing
  std::size_t watch = 0;       // header or VSL watch index
  std::string text;            // literal text, default value, or strftime format
  mutable TimeCache cache;     // strftime ops only
};

struct VslWatch {
  Tag tag = Tag::invalid;
  std::string prefix;  // "" or the record prefix before ':'
  unsigned field = 0;  // 0: the whole record
};

using Frag = std::optional<std::string_view>;

bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// varnishncsa's isprefix(): a case-insensitive prefix; rest is what follows it with
// leading spaces skipped.
bool has_prefix(std::string_view s, std::string_view prefix, std::string_view& rest) noexcept {
  if (!istarts_with(s, prefix)) return false;
  s.remove_prefix(prefix.size());
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  rest = s;
  return true;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Whitespace-separated field n (1-based), if the record has it.
Frag field_of(std::string_view s, unsigned n) noexcept {
  std::size_t i = 0;
  for (unsigned k = 1;; ++k) {
    while (i < s.size() && is_space(s[i])) ++i;
    if (i >= s.size()) return std::nullopt;
    std::size_t b = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (k == n) return s.substr(b, i - b);
  }
}

void set_first(Frag& f, Frag v) noexcept {
  if (!f && v) f = v;
}

// "1795990488.752601" -> microseconds; the whole text must be a time.
std::optional<std::int64_t> parse_time_us(std::string_view s) noexcept {
  std::int64_t sec = 0, frac = 0;
  std::size_t i = 0;
  if (s.empty()) return std::nullopt;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (sec > 100'000'000'000LL) return std::nullopt;
    sec = sec * 10 + (s[i] - '0');
  }
  if (i == 0) return std::nullopt;
  if (i < s.size()) {
    if (s[i] != '.') return std::nullopt;
    ++i;
    int digits = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i)
      if (digits < 6) {
        frac = frac * 10 + (s[i] - '0');
        ++digits;
      }
    if (i < s.size()) return std::nullopt;
    for (; digits < 6; ++digits) frac *= 10;
  }
  return sec * 1'000'000 + frac;
}

// Standard base64 (padding optional); false on any other byte.
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t i = 0;
  for (; i < in.size() && in[i] != '='; ++i) {
    char c = in[i];
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else return false;
    acc = (acc << 6) | std::uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  for (; i < in.size(); ++i)
    if (in[i] != '=') return false;
  return true;
}

void append_int(std::string& out, std::int64_t v, int width = 0) {
  char b[32];
  int n = std::snprintf(b, sizeof b, "%0*lld", width, static_cast<long long>(v));
  out.append(b, std::size_t(n));
}

}  // namespace

NcsaFormatError::NcsaFormatError(std::size_t pos, const std::string& message)
    : std::runtime_error(message + " (at byte " + std::to_string(pos) + ")"), pos_(pos) {}

void ncsa_escape(std::string& out, std::string_view s, bool json) {
  if (json) {
    append_json_escaped(out, s);
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n; ++i) {
    // Runs of plain bytes are copied at once: most values need no escape at all.
    std::size_t run = i;
    while (run < n && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '"' && p[run] != '\\') ++run;
    if (run > i) {
      out.append(reinterpret_cast<const char*>(p + i), run - i);
      i = run;
      if (i == n) break;
    }
    unsigned char c = p[i];
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
}

struct NcsaFormatter::Impl {
  std::string source;
  bool json = false;
  std::vector<Op> ops;
  std::vector<std::string> req_watch;   // lower-case header names
  std::vector<std::string> resp_watch;
  std::vector<VslWatch> vsl_watch;

  // Scratch state of one rendering.
  std::array<Frag, F_count> frag{};
  std::vector<Frag> req_val, resp_val, vsl_val;
  const char* hitmiss = "-";
  const char* handling = "-";
  std::string scratch;

  std::string_view missing(Missing m) const noexcept {
    if (!json) return "-";
    return m == Missing::number ? "null" : "";
  }

  void compile(std::string_view fmt, std::size_t base, int depth);
  void compile_brace(std::string_view arg, char conv, std::size_t pos, int depth);
  void compile_x(std::string_view arg, std::size_t pos, int depth);
  std::size_t watch_header(std::vector<std::string>& list, std::string_view name);

  void scan(const Transaction& t);
  void headers(const std::vector<std::string>& names, std::vector<Frag>& vals, std::string_view rec, bool unset);
  void render_time(const Op& op, std::string& out) const;
  void render(const Transaction& t, std::string& out);
};

std::size_t NcsaFormatter::Impl::watch_header(std::vector<std::string>& list, std::string_view name) {
  std::string key;
  for (char c : name) key += ascii_lower(c);
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i] == key) return i;
  list.push_back(std::move(key));
  return list.size() - 1;
}

void NcsaFormatter::Impl::compile(std::string_view fmt, std::size_t base, int depth) {
  std::string lit;
  auto flush = [&] {
    if (lit.empty()) return;
    if (!ops.empty() && ops.back().kind == OpKind::literal) {
      ops.back().text += lit;
    } else {
      Op op;
      op.kind = OpKind::literal;
      op.text = std::move(lit);
      ops.push_back(std::move(op));
    }
    lit.clear();
  };
  auto add_field = [&](Field f, Missing m) {
    Op op;
    op.kind = OpKind::field;
    op.field = f;
    op.missing = m;
    ops.push_back(std::move(op));
  };
  auto add_default = [&](Field f, std::string_view dflt) {
    Op op;
    op.kind = OpKind::field;
    op.field = f;
    op.has_default = true;
    op.text = std::string(dflt);
    ops.push_back(std::move(op));
  };
  auto add_time = [&](TimeKind k, std::string_view f, Missing m) {
    Op op;
    op.kind = OpKind::time;
    op.time = k;
    op.missing = m;
    op.text = std::string(f);
    ops.push_back(std::move(op));
  };
  auto add_kind = [&](OpKind k, Missing m = Missing::string) {
    Op op;
    op.kind = k;
    op.missing = m;
    ops.push_back(std::move(op));
  };

  for (std::size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '\\' && i + 1 < fmt.size()) {
      char e = fmt[++i];
      lit += e == 't' ? '\t' : e == 'n' ? '\n' : e;
      continue;
    }
    if (c != '%') {
      lit += c;
      continue;
    }
    const std::size_t at = base + i;
    if (++i >= fmt.size()) throw NcsaFormatError(at, "a lone '%' ends the format");
    char s = fmt[i];
    if (s == '%') {
      lit += '%';
      continue;
    }
    flush();
    switch (s) {
      // varnishncsa 7.1 prints ReqAcct's body bytes as they are, 0 included (a HEAD,
      // a 204), whatever its man page says of CLF's '-'; '-' only with no ReqAcct.
      case 'b': add_field(F_b, Missing::number); break;
      case 'D': add_time(TimeKind::dur_us, "", Missing::number); break;
      case 'h': add_field(F_h, Missing::string); break;
      case 'H': add_default(F_H, "HTTP/1.0"); break;
      case 'I': add_field(F_I, Missing::number); break;
      case 'l': lit += '-'; break;
      case 'm': add_field(F_m, Missing::string); break;
      case 'O': add_field(F_O, Missing::number); break;
      case 'q': add_default(F_q, ""); break;
      case 'r': add_kind(OpKind::requestline); break;
      case 's': add_field(F_s, Missing::number); break;
      case 't': add_time(TimeKind::strftime, "[%d/%b/%Y:%T %z]", Missing::string); break;
      case 'T': add_time(TimeKind::dur_s, "", Missing::number); break;
      case 'u': add_kind(OpKind::auth); break;
      case 'U': add_field(F_U, Missing::string); break;
      case '{': {
        std::size_t j = i + 1;
        int level = 1;
        for (; j < fmt.size(); ++j) {
          if (fmt[j] == '{') ++level;
          else if (fmt[j] == '}' && --level == 0) break;
        }
        if (level != 0) throw NcsaFormatError(at, "unmatched '{'");
        std::string_view arg = fmt.substr(i + 1, j - i - 1);
        if (j + 1 >= fmt.size()) throw NcsaFormatError(at, "'%{" + std::string(arg) + "}' needs a conversion letter (i, o, t, T or x)");
        compile_brace(arg, fmt[j + 1], at, depth);
        i = j + 1;
        break;
      }
      default:
        throw NcsaFormatError(at, std::string("unknown format specifier '%") + s + "'");
    }
  }
  flush();
}

void NcsaFormatter::Impl::compile_brace(std::string_view arg, char conv, std::size_t pos, int depth) {
  switch (conv) {
    case 'i':
    case 'o': {
      if (arg.empty() || arg.find(':') != std::string_view::npos)
        throw NcsaFormatError(pos, "'%{...}" + std::string(1, conv) + "' needs a header name");
      Op op;
      op.kind = conv == 'i' ? OpKind::req_header : OpKind::resp_header;
      op.watch = watch_header(conv == 'i' ? req_watch : resp_watch, arg);
      ops.push_back(std::move(op));
      return;
    }
    case 't': {
      Op op;
      op.kind = OpKind::time;
      op.missing = Missing::number;
      if (arg == "sec") op.time = TimeKind::sec;
      else if (arg == "msec") op.time = TimeKind::msec;
      else if (arg == "usec") op.time = TimeKind::usec;
      else if (arg == "msec_frac") op.time = TimeKind::msec_frac;
      else if (arg == "usec_frac") op.time = TimeKind::usec_frac;
      else {
        op.time = TimeKind::strftime;
        op.missing = Missing::string;
        op.text = std::string(arg);
      }
      ops.push_back(std::move(op));
      return;
    }
    case 'T': {
      Op op;
      op.kind = OpKind::time;
      op.missing = Missing::number;
      if (arg == "s") op.time = TimeKind::dur_s;
      else if (arg == "ms") op.time = TimeKind::dur_ms;
      else if (arg == "us") op.time = TimeKind::dur_us;
      else throw NcsaFormatError(pos, "unknown '%{" + std::string(arg) + "}T' unit (s, ms or us)");
      ops.push_back(std::move(op));
      return;
    }
    case 'x': compile_x(arg, pos, depth); return;
    default:
      throw NcsaFormatError(pos, "unknown conversion '%{" + std::string(arg) + "}" + std::string(1, conv) +
                                     "' (i, o, t, T or x)");
  }
}

void NcsaFormatter::Impl::compile_x(std::string_view arg, std::size_t pos, int depth) {
  std::string_view name;
  if (has_prefix(arg, "ringlog:", name) || has_prefix(arg, "Varnish:", name)) {
    Op op;
    if (name == "time_firstbyte") {
      op.kind = OpKind::field;
      op.field = F_ttfb;
      op.missing = Missing::number;
    } else if (name == "hitmiss") {
      op.kind = OpKind::hitmiss;
    } else if (name == "handling") {
      op.kind = OpKind::handling;
    } else if (name == "side") {
      op.kind = OpKind::side;
    } else if (name == "vxid") {
      op.kind = OpKind::vxid;
    } else if (name == "default_format") {
      if (depth > 0) throw NcsaFormatError(pos, "default_format inside default_format");
      compile(kNcsaDefaultFormat, pos, depth + 1);
      return;
    } else {
      throw NcsaFormatError(pos, "unknown extension '%{" + std::string(arg) +
                                     "}x' (time_firstbyte, hitmiss, handling, side, vxid, default_format)");
    }
    ops.push_back(std::move(op));
    return;
  }
  std::string_view spec;
  if (has_prefix(arg, "VSL:", spec)) {
    VslWatch w;
    if (!spec.empty() && spec.back() == ']') {
      std::size_t lb = spec.rfind('[');
      if (lb == std::string_view::npos || lb + 2 > spec.size() - 1)
        throw NcsaFormatError(pos, "bad field in '%{VSL:" + std::string(spec) + "}x'");
      std::string_view num = spec.substr(lb + 1, spec.size() - lb - 2);
      unsigned v = 0;
      for (char ch : num) {
        if (ch < '0' || ch > '9' || v > 255) throw NcsaFormatError(pos, "bad field in '%{VSL:" + std::string(spec) + "}x'");
        v = v * 10 + unsigned(ch - '0');
      }
      if (v < 1 || v > 255) throw NcsaFormatError(pos, "a VSL field index runs from 1 to 255");
      w.field = v;
      spec = spec.substr(0, lb);
    }
    std::string_view tagname = spec;
    std::size_t colon = spec.find(':');
    if (colon != std::string_view::npos) {
      tagname = spec.substr(0, colon);
      w.prefix = std::string(spec.substr(colon + 1)) + ":";
    }
    if (tagname.empty()) throw NcsaFormatError(pos, "'%{VSL:...}x' needs a tag");
    auto tag = tag_by_name(tagname);
    if (!tag) throw NcsaFormatError(pos, "unknown tag '" + std::string(tagname) + "' in '%{VSL:...}x'");
    w.tag = *tag;
    vsl_watch.push_back(std::move(w));
    Op op;
    op.kind = OpKind::vsl;
    op.watch = vsl_watch.size() - 1;
    ops.push_back(std::move(op));
    return;
  }
  throw NcsaFormatError(pos, "unknown extension '%{" + std::string(arg) + "}x'");
}

void NcsaFormatter::Impl::headers(const std::vector<std::string>& names, std::vector<Frag>& vals,
                                  std::string_view rec, bool unset) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    if (rec.size() <= n.size() || rec[n.size()] != ':' || !iequals(rec.substr(0, n.size()), n)) continue;
    // The last value wins; an unset header is gone until set again (VCL edits log an
    // unset of the old value before the new one).
    if (unset) vals[i].reset();
    else vals[i] = trim(rec.substr(n.size() + 1));
  }
}

void NcsaFormatter::Impl::scan(const Transaction& t) {
  frag.fill(std::nullopt);
  req_val.assign(req_watch.size(), std::nullopt);
  resp_val.assign(resp_watch.size(), std::nullopt);
  vsl_val.assign(vsl_watch.size(), std::nullopt);
  hitmiss = "-";
  handling = "-";
  const bool client = NcsaFormatter::side_of(t) == VxidKind::client;
  std::string_view rest;

  for (const HeldRecord& r : t.records) {
    std::string_view p = t.payload(r);
    switch (r.tag) {
      case Tag::PipeAcct:
        set_first(frag[F_I], field_of(p, 3));
        set_first(frag[F_O], field_of(p, 4));
        break;
      case Tag::BackendOpen:
        if (auto f = field_of(p, 3)) frag[F_h] = f;
        break;
      case Tag::ReqStart: set_first(frag[F_h], field_of(p, 1)); break;
      case Tag::ReqMethod:
      case Tag::BereqMethod: set_first(frag[F_m], trim(p)); break;
      case Tag::ReqURL:
      case Tag::BereqURL:
        if (!frag[F_U]) {
          std::size_t qm = p.find('?');
          if (qm == std::string_view::npos) qm = p.size();
          frag[F_U] = trim(p.substr(0, qm));
          frag[F_q] = trim(p.substr(qm));
        }
        break;
      case Tag::ReqProtocol:
      case Tag::BereqProtocol: set_first(frag[F_H], trim(p)); break;
      case Tag::RespStatus:
      case Tag::BerespStatus: frag[F_s] = trim(p); break;
      case Tag::ReqAcct:
      case Tag::BereqAcct:
        set_first(frag[F_I], field_of(p, 3));
        set_first(frag[F_b], field_of(p, 5));
        set_first(frag[F_O], field_of(p, 6));
        break;
      case Tag::Timestamp:
        if (has_prefix(p, "Start:", rest)) {
          set_first(frag[F_tstart], field_of(rest, 1));
        } else if (has_prefix(p, "Resp:", rest) || has_prefix(p, "PipeSess:", rest) ||
                   has_prefix(p, "ConnectSess:", rest) || has_prefix(p, "BerespBody:", rest)) {
          set_first(frag[F_tend], field_of(rest, 1));
        } else if (has_prefix(p, "Process:", rest) || has_prefix(p, "Pipe:", rest) ||
                   has_prefix(p, "Connect:", rest) || has_prefix(p, "Beresp:", rest)) {
          set_first(frag[F_ttfb], field_of(rest, 2));
        }
        break;
      case Tag::ReqHeader:
      case Tag::BereqHeader:
        headers(req_watch, req_val, p, false);
        if (has_prefix(p, "Authorization:", rest) && has_prefix(rest, "basic ", rest))
          set_first(frag[F_auth], trim(rest));
        else if (has_prefix(p, "Host:", rest))
          set_first(frag[F_host], trim(rest));
        break;
      case Tag::ReqUnset:
      case Tag::BereqUnset: headers(req_watch, req_val, p, true); break;
      case Tag::RespHeader:
      case Tag::BerespHeader: headers(resp_watch, resp_val, p, false); break;
      case Tag::RespUnset:
      case Tag::BerespUnset: headers(resp_watch, resp_val, p, true); break;
      case Tag::Hit:
        if (client) hitmiss = handling = "hit";
        break;
      case Tag::HitMiss:
        if (client) hitmiss = handling = "miss";
        break;
      case Tag::HitPass:
        if (client) {
          hitmiss = "miss";
          handling = "pass";
        }
        break;
      case Tag::Link:
        if (client) {
          // "<child type> <child vxid> <reason>": how the request went to a backend.
          Frag reason = field_of(p, 3);
          if (reason == "fetch") hitmiss = handling = "miss";
          else if (reason == "pass") hitmiss = "miss", handling = "pass";
          else if (reason == "pipe") hitmiss = "miss", handling = "pipe";
        }
        break;
      default: break;
    }
    if (r.tag == Tag::PipeAcct && client) hitmiss = "miss", handling = "pipe";
    for (std::size_t i = 0; i < vsl_watch.size(); ++i) {
      const VslWatch& w = vsl_watch[i];
      if (w.tag != r.tag || vsl_val[i]) continue;
      std::string_view body = p;
      if (!w.prefix.empty() && !has_prefix(p, w.prefix, body)) continue;
      vsl_val[i] = w.field == 0 ? Frag(trim(body)) : field_of(body, w.field);
    }
  }
  // A response made without a cache lookup or a fetch: Varnish's synth.
  if (client && std::string_view(handling) == "-" && frag[F_s]) {
    hitmiss = "miss";
    handling = "synth";
  }
}

void NcsaFormatter::Impl::render_time(const Op& op, std::string& out) const {
  std::optional<std::int64_t> start;
  if (frag[F_tstart]) start = parse_time_us(*frag[F_tstart]);
  if (!start) {
    out += missing(op.missing);
    return;
  }
  std::int64_t end = *start;
  if (frag[F_tend])
    if (auto e = parse_time_us(*frag[F_tend])) end = *e;
  switch (op.time) {
    case TimeKind::strftime: {
      const std::int64_t secs = *start / 1'000'000;
      if (op.cache.secs != secs) {
        op.cache.secs = secs;
        op.cache.text.clear();
        time_t t = static_cast<time_t>(secs);
        struct tm tm {};
        if (localtime_r(&t, &tm) != nullptr && !op.text.empty()) {
          // strftime() returns 0 both for "too small" and for an empty result: grow a
          // few times, then accept empty.
          for (std::size_t cap = 128; cap <= 8192; cap *= 4) {
            std::string buf(cap, '\0');
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"  // the user's %{...}t format, by design
            std::size_t n = std::strftime(buf.data(), cap, op.text.c_str(), &tm);
#pragma GCC diagnostic pop
            if (n > 0) {
              op.cache.text.assign(buf.data(), n);
              break;
            }
          }
        }
      }
      out += op.cache.text;
      return;
    }
    case TimeKind::sec: append_int(out, *start / 1'000'000); return;
    case TimeKind::msec: append_int(out, *start / 1'000); return;
    case TimeKind::usec: append_int(out, *start); return;
    case TimeKind::msec_frac: append_int(out, (*start % 1'000'000) / 1'000, 3); return;
    case TimeKind::usec_frac: append_int(out, *start % 1'000'000, 6); return;
    case TimeKind::dur_s: append_int(out, (end - *start) / 1'000'000); return;
    case TimeKind::dur_ms: append_int(out, (end - *start) / 1'000); return;
    case TimeKind::dur_us: append_int(out, end - *start); return;
  }
}

void NcsaFormatter::Impl::render(const Transaction& t, std::string& out) {
  scan(t);
  auto value = [&](const Frag& f, std::string_view dflt) {
    ncsa_escape(out, f ? *f : dflt, json);
  };
  for (const Op& op : ops) {
    switch (op.kind) {
      case OpKind::literal: out += op.text; break;
      case OpKind::field: {
        const Frag& f = frag[op.field];
        if (f) {
          ncsa_escape(out, *f, json);
        } else if (op.has_default) {
          ncsa_escape(out, op.text, json);
        } else {
          out += missing(op.missing);
        }
        break;
      }
      case OpKind::requestline:
        value(frag[F_m], "-");
        out += ' ';
        if (frag[F_host]) {
          if (frag[F_host]->substr(0, 7) != "http://") out += "http://";
          ncsa_escape(out, *frag[F_host], json);
        } else {
          out += "http://localhost";
        }
        value(frag[F_U], "");
        value(frag[F_q], "");
        out += ' ';
        value(frag[F_H], "HTTP/1.0");
        break;
      case OpKind::auth:
        if (frag[F_auth] && base64_decode(*frag[F_auth], scratch)) {
          std::size_t colon = scratch.find(':');
          ncsa_escape(out, std::string_view(scratch).substr(0, colon), json);
        } else {
          out += '-';
        }
        break;
      case OpKind::time: render_time(op, out); break;
      case OpKind::vxid: append_int(out, static_cast<std::int64_t>(t.vxid)); break;
      case OpKind::side: {
        VxidKind k = NcsaFormatter::side_of(t);
        out += k == VxidKind::client ? "c" : k == VxidKind::backend ? "b" : "-";
        break;
      }
      case OpKind::hitmiss: out += hitmiss; break;
      case OpKind::handling: out += handling; break;
      case OpKind::req_header:
        if (req_val[op.watch]) ncsa_escape(out, *req_val[op.watch], json);
        else out += missing(Missing::string);
        break;
      case OpKind::resp_header:
        if (resp_val[op.watch]) ncsa_escape(out, *resp_val[op.watch], json);
        else out += missing(Missing::string);
        break;
      case OpKind::vsl:
        if (vsl_val[op.watch]) ncsa_escape(out, *vsl_val[op.watch], json);
        else out += missing(Missing::string);
        break;
    }
  }
  out += '\n';
}

NcsaFormatter::NcsaFormatter(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
NcsaFormatter::NcsaFormatter(NcsaFormatter&&) noexcept = default;
NcsaFormatter& NcsaFormatter::operator=(NcsaFormatter&&) noexcept = default;
NcsaFormatter::~NcsaFormatter() = default;

NcsaFormatter NcsaFormatter::compile(std::string_view format, const NcsaOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::string(format);
  impl->json = opts.json;
  impl->compile(format, 0, 0);
  return NcsaFormatter(std::move(impl));
}

VxidKind NcsaFormatter::side_of(const Transaction& t) noexcept {
  switch (t.type) {
    case TxnType::req: return VxidKind::client;
    case TxnType::bereq: return VxidKind::backend;
    case TxnType::sess: return VxidKind::none;
    case TxnType::unknown: break;
  }
  return (t.kind == VxidKind::client || t.kind == VxidKind::backend) ? t.kind : VxidKind::none;
}

void NcsaFormatter::format(const Transaction& t, std::string& out) { impl_->render(t, out); }

std::size_t NcsaFormatter::format_group(const Group& g, const NcsaSides& sides, std::string& out) {
  std::size_t n = 0;
  for (const Transaction* t : g.txns) {
    VxidKind k = side_of(*t);
    if ((k == VxidKind::client && sides.client) || (k == VxidKind::backend && sides.backend)) {
      impl_->render(*t, out);
      ++n;
    }
  }
  return n;
}

const std::string& NcsaFormatter::source() const noexcept { return impl_->source; }
bool NcsaFormatter::json() const noexcept { return impl_->json; }

}  // namespace ringlog
