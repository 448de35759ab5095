// Request and response head parsers. Two phases: an incremental scan that only looks
// for the end of the head (and the limits), then one strict pass over the complete
// head. The strict pass must refuse anything two implementations could frame
// differently: that is how request smuggling starts (RFC 9112 §11.2).
#include "ringproxy/http/parser.hpp"

#include <cstring>

#include "chars.hpp"
#include "field_ids.hpp"

namespace ringproxy::http {

namespace {

using detail::is_ows;
using detail::kCharClass;

constexpr std::uint64_t kMaxContentLength = (1ULL << 62);  // far above any real body

ParseResult fail(Error e, bool response) {
  ParseResult r;
  r.status = ParseResult::Failed;
  r.error = e;
  r.http_status = response ? 502 : error_status(e);
  return r;
}

ParseResult done(std::size_t consumed) {
  ParseResult r;
  r.status = ParseResult::Done;
  r.consumed = consumed;
  return r;
}

// Scan state kept by a parser between calls.
struct ScanState {
  std::size_t skip = 0;       // leading empty lines
  std::size_t scanned = 0;    // next byte to search for LF
  std::size_t line1_end = 0;  // LF of the start line + 1, 0 while unknown
};

enum class ScanStatus { More, Found, Failed };
struct ScanResult {
  ScanStatus status;
  std::size_t end = 0;  // Found: one past the final LF
  Error error = Error::None;
};

ScanResult scan_head(std::string_view buf, ScanState& st, bool allow_bare_lf) {
  const std::size_t n = buf.size();
  const char* b = buf.data();
  // Leading empty lines (RFC 9112 §2.2: a server SHOULD ignore at least one).
  if (st.scanned == 0) {
    while (st.skip < n) {
      if (b[st.skip] == '\r') {
        if (st.skip + 1 >= n) return {ScanStatus::More};
        if (b[st.skip + 1] != '\n') return {ScanStatus::Failed, 0, Error::BareCR};
        st.skip += 2;
      } else if (b[st.skip] == '\n') {
        if (!allow_bare_lf) return {ScanStatus::Failed, 0, Error::BareLF};
        st.skip += 1;
      } else {
        break;
      }
    }
    if (st.skip >= n) return {ScanStatus::More};
    st.scanned = st.skip;
  }
  std::size_t pos = st.scanned;
  while (pos < n) {
    const void* hit = std::memchr(b + pos, '\n', n - pos);
    if (!hit) break;
    std::size_t i = static_cast<std::size_t>(static_cast<const char*>(hit) - b);
    bool cr = b[i - 1] == '\r';  // i > skip: the start line is not empty
    if (!cr && !allow_bare_lf) return {ScanStatus::Failed, 0, Error::BareLF};
    if (st.line1_end == 0) st.line1_end = i + 1;
    std::size_t term = cr ? i - 1 : i;  // first byte of the terminator
    if (term > st.skip && b[term - 1] == '\n') return {ScanStatus::Found, i + 1};
    pos = i + 1;
  }
  st.scanned = n;
  return {ScanStatus::More};
}

// Strips the line terminator of [p, lf): CR required unless bare LF is allowed.
inline std::string_view line_at(const char* p, const char* lf) {
  std::size_t len = static_cast<std::size_t>(lf - p);
  if (len && p[len - 1] == '\r') --len;
  return {p, len};
}

Method classify_method(std::string_view m) {
  switch (m.size()) {
    case 3:
      if (m == "GET") return Method::Get;
      if (m == "PUT") return Method::Put;
      break;
    case 4:
      if (m == "HEAD") return Method::Head;
      if (m == "POST") return Method::Post;
      break;
    case 5:
      if (m == "PATCH") return Method::Patch;
      if (m == "TRACE") return Method::Trace;
      break;
    case 6:
      if (m == "DELETE") return Method::Delete;
      break;
    case 7:
      if (m == "CONNECT") return Method::Connect;
      if (m == "OPTIONS") return Method::Options;
      break;
    default: break;
  }
  return Method::Other;
}

// "HTTP/d.d" -> minor; major other than 1 -> VersionNotSupported.
Error parse_version(std::string_view v, std::uint8_t& minor) {
  if (v.size() != 8 || std::memcmp(v.data(), "HTTP/", 5) != 0 || v[6] != '.') return Error::BadVersion;
  char ma = v[5], mi = v[7];
  if (ma < '0' || ma > '9' || mi < '0' || mi > '9') return Error::BadVersion;
  if (ma != '1') return Error::VersionNotSupported;
  minor = static_cast<std::uint8_t>(mi - '0');
  return Error::None;
}

Error parse_request_line(std::string_view line, const Limits& lim, RequestHead& out) {
  const char* p = line.data();
  const char* end = p + line.size();
  const char* m = p;
  while (p < end && (kCharClass[static_cast<unsigned char>(*p)] & detail::kTchar)) ++p;
  if (p == end) return Error::BadRequestLine;  // no SP: HTTP/0.9 or garbage
  if (*p != ' ') return *p == '\r' ? Error::BareCR : (p == m ? Error::BadRequestLine : Error::BadMethod);
  if (p == m) return Error::BadRequestLine;
  out.method_name = {m, static_cast<std::size_t>(p - m)};
  ++p;
  const char* t = p;
  while (p < end) {
    if (end - p >= 8 && !detail::target_word_suspect(detail::load8(p))) {
      p += 8;
      continue;
    }
    if (!(kCharClass[static_cast<unsigned char>(*p)] & detail::kTarget)) break;
    ++p;
  }
  std::size_t tlen = static_cast<std::size_t>(p - t);
  if (tlen > lim.max_url) return Error::UrlTooLong;
  if (p == end) return tlen ? Error::BadRequestLine : Error::BadTarget;
  if (*p != ' ') return *p == '\r' ? Error::BareCR : Error::BadTarget;
  if (tlen == 0) return Error::BadTarget;
  out.target = {t, tlen};
  ++p;
  if (Error e = parse_version({p, static_cast<std::size_t>(end - p)}, out.version_minor); e != Error::None) {
    for (const char* q = p; q < end; ++q)
      if (*q == '\r') return Error::BareCR;
    return e;
  }
  out.method = classify_method(out.method_name);
  return Error::None;
}

Error parse_status_line(std::string_view line, ResponseHead& out) {
  if (line.size() < 12 || line[8] != ' ') return Error::BadStatusLine;
  std::uint8_t minor = 0;
  if (parse_version(line.substr(0, 8), minor) != Error::None) return Error::BadStatusLine;
  out.version_minor = minor;
  const char* s = line.data() + 9;
  if (s[0] < '1' || s[0] > '5' || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9') return Error::BadStatusLine;
  out.status = static_cast<std::uint16_t>((s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0'));
  std::string_view rest = line.substr(12);
  if (!rest.empty()) {
    if (rest[0] != ' ') return Error::BadStatusLine;
    rest.remove_prefix(1);
    for (unsigned char c : rest)
      if (!(kCharClass[c] & detail::kValue)) return c == '\r' ? Error::BareCR : Error::BadStatusLine;
  }
  out.reason = rest;
  return Error::None;
}

// What the header fields say about framing and connection handling, shared by
// requests and responses.
struct FieldFacts {
  bool has_cl = false;
  std::uint64_t cl = 0;
  bool has_te = false;
  bool te_last_chunked = false;
  unsigned chunked_count = 0;
  unsigned host_count = 0;
  std::string_view host;
  bool expect_continue = false;
  bool expect_unknown = false;
};

Error parse_content_length(std::string_view v, FieldFacts& f) {
  // A list of identical values is one value (RFC 9110 §8.6); anything else is fatal.
  if (v.empty()) return Error::BadContentLength;
  std::size_t i = 0;
  while (true) {
    std::uint64_t n = 0;
    std::size_t start = i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
      // Checked before the multiply: a wrapped 2^64 + 5 must not read as 5.
      if (n > kMaxContentLength / 10) return Error::BadContentLength;
      n = n * 10 + static_cast<std::uint64_t>(v[i] - '0');
      ++i;
    }
    if (i == start) return Error::BadContentLength;
    if (f.has_cl && f.cl != n) return Error::ConflictingContentLength;
    f.has_cl = true;
    f.cl = n;
    while (i < v.size() && is_ows(v[i])) ++i;
    if (i == v.size()) return Error::None;
    if (v[i] != ',') return Error::BadContentLength;
    ++i;
    while (i < v.size() && is_ows(v[i])) ++i;
  }
}

Error parse_transfer_encoding(std::string_view v, FieldFacts& f) {
  f.has_te = true;
  Error err = Error::None;
  detail::for_each_list_element(v, [&](std::string_view e) {
    std::size_t semi = e.find(';');
    std::string_view coding = detail::trim_ows(e.substr(0, semi));
    if (!is_token(coding)) {
      if (err == Error::None) err = Error::TransferEncodingNotChunked;
      return;
    }
    if (detail::iequals(coding, "chunked")) {
      if (++f.chunked_count > 1 && err == Error::None) err = Error::ChunkedTwice;
      f.te_last_chunked = true;
    } else {
      f.te_last_chunked = false;
    }
  });
  return err;
}

// Parses the field lines of [p, end) (end: just past the final empty line).
Error parse_fields(const char* p, const char* end, const Limits& lim, HeaderList& headers,
                   ConnectionInfo& conn, FieldFacts& f) {
  headers.clear();
  conn.clear();
  while (true) {
    const char* lf = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    // The scan guaranteed an empty line before `end`.
    std::string_view line = line_at(p, lf);
    p = lf + 1;
    if (line.empty()) return Error::None;
    if (is_ows(line[0])) return Error::ObsFold;
    if (headers.size() >= lim.max_headers) return Error::TooManyHeaders;
    std::size_t i = 0;
    const std::size_t n = line.size();
    while (i < n && (kCharClass[static_cast<unsigned char>(line[i])] & detail::kTchar)) ++i;
    if (i == 0 || i == n || line[i] != ':') {
      if (i < n && line[i] == '\r') return Error::BareCR;
      return Error::BadHeaderName;  // empty, non-token byte, or SP before ':'
    }
    const std::size_t name_len = i;
    std::string_view name = line.substr(0, i);
    ++i;
    while (i < n && is_ows(line[i])) ++i;
    std::size_t vstart = i;
    while (i < n) {
      if (n - i >= 8 && !detail::value_word_suspect(detail::load8(line.data() + i))) {
        i += 8;
        continue;
      }
      unsigned char c = static_cast<unsigned char>(line[i]);
      if (!(kCharClass[c] & detail::kValue)) return c == '\r' ? Error::BareCR : Error::BadHeaderValue;
      ++i;
    }
    std::size_t vend = n;
    while (vend > vstart && is_ows(line[vend - 1])) --vend;
    std::string_view value = line.substr(vstart, vend - vstart);
    const FieldId id = detail::lookup_field(name);
    // line.data()[n] is the terminator's first byte: CR, or LF when bare LF is allowed.
    const bool verbatim = vstart == name_len + 2 && line[name_len + 1] == ' ' && vend == n && line.data()[n] == '\r';
    headers.push_back({name, value, id, verbatim});

    Error e = Error::None;
    switch (id) {
      case FieldId::Host:
        ++f.host_count;
        f.host = value;
        break;
      case FieldId::Expect:
        if (detail::iequals(value, "100-continue")) f.expect_continue = true;
        else f.expect_unknown = true;
        break;
      case FieldId::Connection:
        if (conn.count >= ConnectionInfo::kMaxFields) return Error::TooManyConnectionHeaders;
        conn.values[conn.count++] = value;
        detail::for_each_list_element(value, [&](std::string_view t) {
          const FieldId tid = detail::lookup_field(t);
          switch (tid) {
            case FieldId::Close: conn.close = true; break;
            case FieldId::KeepAlive: conn.keep_alive = true; break;
            case FieldId::Upgrade: conn.upgrade = true; break;
            case FieldId::Other: conn.lists_other = true; break;
            default: break;
          }
          if (tid != FieldId::Other) conn.listed |= field_bit(tid);
        });
        break;
      case FieldId::ContentLength: e = parse_content_length(value, f); break;
      case FieldId::TransferEncoding: e = parse_transfer_encoding(value, f); break;
      default: break;
    }
    if (e != Error::None) return e;
  }
}

// uri-host [ ":" port ] (RFC 3986): reg-name / IPv4 / IP-literal, then digits. Empty
// is allowed (a target without authority). Anything else could make the proxy and the
// origin disagree on which site a request is for.
bool valid_host(std::string_view h) {
  std::size_t i = 0;
  if (!h.empty() && h[0] == '[') {
    std::size_t close = h.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (std::size_t k = 1; k < close; ++k) {
      char c = h[k];
      bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.' ||
                c == 'v' || c == 'V';
      if (!ok) return false;
    }
    i = close + 1;
  } else {
    for (; i < h.size() && h[i] != ':'; ++i) {
      char c = h[i];
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                c == '_' || c == '~' || c == '%' || c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' ||
                c == ')' || c == '*' || c == '+' || c == ',' || c == ';' || c == '=';
      if (!ok) return false;
    }
  }
  if (i == h.size()) return true;
  if (h[i] != ':') return false;
  for (++i; i < h.size(); ++i)
    if (h[i] < '0' || h[i] > '9') return false;
  return true;
}

bool keep_alive_for(std::uint8_t minor, const ConnectionInfo& c) {
  if (c.close) return false;
  return minor >= 1 || c.keep_alive;
}

}  // namespace

std::string_view error_reason(Error e) {
  switch (e) {
    case Error::None: return "no error";
    case Error::HeadTooLarge: return "header block too large";
    case Error::TooManyHeaders: return "too many header fields";
    case Error::UrlTooLong: return "request-target too long";
    case Error::BadRequestLine: return "malformed request line";
    case Error::BadMethod: return "invalid method";
    case Error::BadTarget: return "invalid request-target";
    case Error::BadVersion: return "invalid HTTP version";
    case Error::VersionNotSupported: return "HTTP version not supported";
    case Error::BadStatusLine: return "malformed status line";
    case Error::BadHeaderName: return "invalid header field name";
    case Error::BadHeaderValue: return "invalid header field value";
    case Error::ObsFold: return "obsolete line folding";
    case Error::BareCR: return "bare CR";
    case Error::BareLF: return "bare LF";
    case Error::MissingHost: return "missing Host header";
    case Error::MultipleHost: return "multiple Host headers";
    case Error::BadContentLength: return "invalid Content-Length";
    case Error::ConflictingContentLength: return "conflicting Content-Length";
    case Error::ContentLengthWithTransferEncoding: return "Content-Length with Transfer-Encoding";
    case Error::TransferEncodingNotChunked: return "Transfer-Encoding does not end in chunked";
    case Error::ChunkedTwice: return "chunked applied more than once";
    case Error::TransferEncodingHttp10: return "Transfer-Encoding in HTTP/1.0";
    case Error::TooManyConnectionHeaders: return "too many Connection headers";
    case Error::BadChunkSize: return "invalid chunk size";
    case Error::BadChunkExtension: return "invalid chunk extension";
    case Error::MissingChunkCRLF: return "missing CRLF after chunk data";
    case Error::BadTrailer: return "invalid trailer field";
    case Error::TrailerTooLarge: return "trailer section too large";
    case Error::BadHost: return "invalid Host header";
  }
  return "unknown error";
}

int error_status(Error e) {
  switch (e) {
    case Error::None: return 0;
    case Error::HeadTooLarge:
    case Error::TooManyHeaders: return 431;
    case Error::UrlTooLong: return 414;
    case Error::VersionNotSupported: return 505;
    case Error::BadStatusLine: return 502;
    default: return 400;
  }
}

RequestParser::RequestParser(const Limits& limits) : limits_(limits) {}

ParseResult RequestParser::parse(std::string_view buf, RequestHead& out) {
  ScanState st{skip_, scanned_, line1_end_};
  ScanResult sr = scan_head(buf, st, limits_.allow_bare_lf);
  skip_ = st.skip;
  scanned_ = st.scanned;
  line1_end_ = st.line1_end;
  if (sr.status == ScanStatus::Failed) {
    reset();
    return fail(sr.error, false);
  }
  if (sr.status == ScanStatus::More) {
    if (st.skip > limits_.max_head_bytes) {
      reset();
      return fail(Error::HeadTooLarge, false);
    }
    std::size_t have = buf.size() - st.skip;
    if (st.line1_end == 0 && have > limits_.max_url + 33) {
      // Start line still incomplete and already longer than a target of max_url
      // allows: say why (414) rather than wait for max_head_bytes. Only fail here when
      // the complete line would fail too (a long method alone is left to the head limit).
      std::string_view part = buf.substr(st.skip);
      std::size_t sp1 = part.find(' ');
      if (sp1 != std::string_view::npos) {
        std::size_t sp2 = part.find(' ', sp1 + 1);
        std::size_t tlen = (sp2 == std::string_view::npos ? part.size() : sp2) - sp1 - 1;
        if (tlen > limits_.max_url) {
          reset();
          return fail(Error::UrlTooLong, false);
        }
        if (sp2 != std::string_view::npos && part.size() - sp2 - 1 > 9) {
          reset();
          return fail(Error::BadVersion, false);  // longer than "HTTP/1.1\r"
        }
      }
    }
    if (st.line1_end && !line1_checked_) {
      // The request line is complete: refuse a bad one now (a 414 need not wait for
      // the rest of the head). Checked once; `out` is rewritten when the head is done.
      line1_checked_ = true;
      Error le = parse_request_line(line_at(buf.data() + st.skip, buf.data() + st.line1_end - 1), limits_, out);
      if (le != Error::None) {
        reset();
        return fail(le, false);
      }
    }
    if (have > limits_.max_head_bytes) {
      reset();
      return fail(Error::HeadTooLarge, false);
    }
    return {};
  }
  const std::size_t skip = st.skip;
  reset();
  if (skip > limits_.max_head_bytes) return fail(Error::HeadTooLarge, false);
  const char* b = buf.data();
  std::string_view line1 = line_at(b + skip, b + st.line1_end - 1);
  if (Error e = parse_request_line(line1, limits_, out); e != Error::None) return fail(e, false);
  if (sr.end - skip > limits_.max_head_bytes) return fail(Error::HeadTooLarge, false);
  if (out.headers.empty()) out.headers.reserve(limits_.max_headers < 32 ? limits_.max_headers : 32);
  FieldFacts f;
  if (Error e = parse_fields(b + st.line1_end, b + sr.end, limits_, out.headers, out.connection, f); e != Error::None)
    return fail(e, false);

  if (f.host_count > 1) return fail(Error::MultipleHost, false);
  if (f.host_count == 0 && out.version_minor >= 1) return fail(Error::MissingHost, false);
  out.host = f.host_count ? f.host : std::string_view{};
  if (!valid_host(out.host)) return fail(Error::BadHost, false);
  if (f.has_te) {
    if (out.version_minor == 0) return fail(Error::TransferEncodingHttp10, false);
    if (f.has_cl) return fail(Error::ContentLengthWithTransferEncoding, false);
    if (!f.te_last_chunked) return fail(Error::TransferEncodingNotChunked, false);
    out.body = BodyKind::Chunked;
    out.content_length = 0;
  } else if (f.has_cl) {
    out.body = BodyKind::Length;
    out.content_length = f.cl;
  } else {
    out.body = BodyKind::None;
    out.content_length = 0;
  }
  out.keep_alive = keep_alive_for(out.version_minor, out.connection);
  // RFC 9110 §10.1.1: 100-continue in an HTTP/1.0 request is ignored.
  out.expect_continue = f.expect_continue && out.version_minor >= 1;
  out.expect_unknown = f.expect_unknown;
  out.head_bytes = sr.end;
  return done(sr.end);
}

ResponseParser::ResponseParser(const Limits& limits) : limits_(limits) {}

ParseResult ResponseParser::parse(std::string_view buf, ResponseHead& out, Method request_method) {
  ScanState st{skip_, scanned_, line1_end_};
  ScanResult sr = scan_head(buf, st, limits_.allow_bare_lf);
  skip_ = st.skip;
  scanned_ = st.scanned;
  line1_end_ = st.line1_end;
  if (sr.status == ScanStatus::Failed) {
    reset();
    return fail(sr.error, true);
  }
  if (sr.status == ScanStatus::More) {
    if (buf.size() - st.skip > limits_.max_head_bytes || st.skip > limits_.max_head_bytes) {
      reset();
      return fail(Error::HeadTooLarge, true);
    }
    return {};
  }
  const std::size_t skip = st.skip;
  reset();
  const char* b = buf.data();
  if (sr.end - skip > limits_.max_head_bytes || skip > limits_.max_head_bytes) return fail(Error::HeadTooLarge, true);
  std::string_view line1 = line_at(b + skip, b + st.line1_end - 1);
  if (Error e = parse_status_line(line1, out); e != Error::None) return fail(e, true);
  if (out.headers.empty()) out.headers.reserve(limits_.max_headers < 32 ? limits_.max_headers : 32);
  FieldFacts f;
  if (Error e = parse_fields(b + st.line1_end, b + sr.end, limits_, out.headers, out.connection, f); e != Error::None)
    return fail(e, true);

  out.interim = false;
  out.cl_and_te = false;
  out.content_length = 0;
  out.head_bytes = sr.end;
  out.keep_alive = keep_alive_for(out.version_minor, out.connection);
  const int s = out.status;
  if (f.has_te && out.version_minor == 0) return fail(Error::TransferEncodingHttp10, true);
  if (f.chunked_count > 1) return fail(Error::ChunkedTwice, true);
  if (s < 200) {
    out.body = s == 101 ? BodyKind::Tunnel : BodyKind::None;
    out.interim = s != 101;
    if (s == 101) out.keep_alive = false;
    return done(sr.end);
  }
  if (request_method == Method::Connect && s < 300) {
    out.body = BodyKind::Tunnel;
    out.keep_alive = false;
    return done(sr.end);
  }
  if (request_method == Method::Head || s == 204 || s == 304) {
    out.body = BodyKind::None;
    return done(sr.end);
  }
  if (f.has_te) {
    // RFC 9112 §6.3 item 3: Transfer-Encoding overrides Content-Length; the CL must
    // not be forwarded. Item 4: a response whose last coding is not chunked is
    // delimited by close.
    out.cl_and_te = f.has_cl;
    if (f.te_last_chunked) {
      out.body = BodyKind::Chunked;
    } else {
      out.body = BodyKind::UntilClose;
      out.keep_alive = false;
    }
  } else if (f.has_cl) {
    out.body = BodyKind::Length;
    out.content_length = f.cl;
  } else {
    out.body = BodyKind::UntilClose;
    out.keep_alive = false;
  }
  return done(sr.end);
}

}  // namespace ringproxy::http
