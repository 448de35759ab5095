// fuzz-link: ringproxy_http
// libFuzzer target for the ringproxy HTTP/1.1 codec: request parser, response parser
// and chunked decoder. Besides "no crash, no out-of-bounds", it checks the properties
// the proxy relies on: views stay inside the buffer, consumed <= size, feeding the
// same bytes in pieces gives the same outcome as all at once, a forwarded head parses
// again, and the field-id filters agree with name compares. First input byte: bits 0-1 pick the part, bit 2 small limits, bit 3
// lax line endings; the rest of the byte seeds the split points.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ringproxy/http/http.hpp"

using namespace ringproxy::http;

namespace {

#define FUZZ_CHECK(c)   \
  do {                  \
    if (!(c)) abort();  \
  } while (0)

bool inside(std::string_view v, std::string_view buf) {
  return v.empty() || (v.data() >= buf.data() && v.data() + v.size() <= buf.data() + buf.size());
}

// The id filters answer what name compares answer: each field's id is the listed name
// it equals (case-insensitive) or Other, the list's id set is its fields', Connection
// listing by id agrees with the scan, and copying verbatim runs writes the same bytes
// as writing field by field.
void check_field_ids(const HeaderList& hs, const ConnectionInfo& conn) {
  FieldSet ids = 0;
  std::string runs, each;
  for (const Header& h : hs) {
    FieldId ref = FieldId::Other;
    for (std::size_t i = 1; i < kFieldIds; ++i)
      if (iequals(h.name, field_name(static_cast<FieldId>(i)))) ref = static_cast<FieldId>(i);
    FUZZ_CHECK(h.id == ref);
    ids |= field_bit(h.id);
    FUZZ_CHECK(conn.lists(h) == conn.lists(h.name));
    FUZZ_CHECK(is_hop_by_hop(h, conn) == is_hop_by_hop(h.name, conn));
    if (h.verbatim) FUZZ_CHECK(std::string_view(h.name.data(), h.name.size() + 2) == std::string(h.name) + ": ");
    write_header(each, h.name, h.value);
  }
  FUZZ_CHECK(ids == hs.ids());
  std::size_t k = 0;
  write_fields_if(runs, hs, [&](const Header&) { return (k++ % 3) != 1; });
  k = 0;
  std::string some;
  for (const Header& h : hs)
    if ((k++ % 3) != 1) write_header(some, h.name, h.value);
  FUZZ_CHECK(runs == some);
  runs.clear();
  write_fields_if(runs, hs, [](const Header&) { return true; });
  FUZZ_CHECK(runs == each);
}

Limits pick_limits(std::uint8_t sel, bool response) {
  Limits l = response ? ResponseParser::response_defaults() : Limits{};
  if (sel & 4) {
    l.max_head_bytes = 600;
    l.max_headers = 8;
    l.max_url = 64;
  }
  if (sel & 8) l.allow_bare_lf = !l.allow_bare_lf;
  return l;
}

// Feeds growing prefixes (step bytes more each time) until the parser is done.
template <class Parse>
ParseResult incremental(std::string_view buf, std::size_t step, Parse&& parse) {
  ParseResult r;
  for (std::size_t n = step < buf.size() ? step : buf.size();; n = n + step < buf.size() ? n + step : buf.size()) {
    r = parse(buf.substr(0, n));
    if (!r.need_more() || n == buf.size()) return r;
  }
}

void fuzz_request(std::string_view buf, std::uint8_t sel) {
  Limits l = pick_limits(sel, false);
  RequestParser parser(l);
  RequestHead whole;
  ParseResult r = parser.parse(buf, whole);
  FUZZ_CHECK(r.consumed <= buf.size());
  if (r.failed()) FUZZ_CHECK(r.error != Error::None && r.http_status >= 400);
  if (r.done()) {
    FUZZ_CHECK(r.consumed == whole.head_bytes);
    FUZZ_CHECK(inside(whole.method_name, buf) && inside(whole.target, buf) && inside(whole.host, buf));
    FUZZ_CHECK(whole.target.size() <= l.max_url && whole.headers.size() <= l.max_headers);
    for (const Header& h : whole.headers) FUZZ_CHECK(inside(h.name, buf) && inside(h.value, buf) && is_token(h.name));
    check_field_ids(whole.headers, whole.connection);
    FUZZ_CHECK(whole.body != BodyKind::UntilClose && whole.body != BodyKind::Tunnel);
  }
  // Same outcome when the bytes trickle in.
  std::size_t step = 1 + (sel >> 4);
  RequestParser p2(l);
  RequestHead inc;
  ParseResult r2 = incremental(buf, step, [&](std::string_view b) { return p2.parse(b, inc); });
  FUZZ_CHECK(r2.status == r.status);
  if (r.done()) {
    FUZZ_CHECK(r2.consumed == r.consumed);
    FUZZ_CHECK(inc.method_name == whole.method_name && inc.target == whole.target);
    FUZZ_CHECK(inc.headers.size() == whole.headers.size() && inc.body == whole.body);
    FUZZ_CHECK(inc.content_length == whole.content_length && inc.keep_alive == whole.keep_alive);

    // A forwarded head is a valid request again (unless Host was hop-by-hop'd away).
    std::string out;
    ForwardOptions opt;
    opt.client_addr = "192.0.2.1";
    write_forward_request(out, whole, opt);
    end_head(out);
    Limits big;
    big.max_head_bytes = out.size() + 1;
    big.max_headers = whole.headers.size() + 2;
    big.max_url = l.max_url;
    RequestParser p3(big);
    RequestHead again;
    ParseResult r3 = p3.parse(out, again);
    FUZZ_CHECK(r3.done() || (r3.failed() && r3.error == Error::MissingHost));
    if (r3.done()) {
      FUZZ_CHECK(r3.consumed == out.size());
      FUZZ_CHECK(again.target == whole.target && again.method_name == whole.method_name);
      FUZZ_CHECK(again.body == BodyKind::None);
    }
  }
}

void fuzz_response(std::string_view buf, std::uint8_t sel) {
  Limits l = pick_limits(sel, true);
  static constexpr Method kMethods[] = {Method::Get, Method::Head, Method::Connect, Method::Post};
  Method m = kMethods[(sel >> 4) & 3];
  ResponseParser parser(l);
  ResponseHead whole;
  ParseResult r = parser.parse(buf, whole, m);
  FUZZ_CHECK(r.consumed <= buf.size());
  if (r.failed()) FUZZ_CHECK(r.http_status == 502);
  if (r.done()) {
    FUZZ_CHECK(whole.status >= 100 && whole.status <= 599 && inside(whole.reason, buf));
    for (const Header& h : whole.headers) FUZZ_CHECK(inside(h.name, buf) && inside(h.value, buf));
    check_field_ids(whole.headers, whole.connection);
    if (whole.body == BodyKind::UntilClose || whole.body == BodyKind::Tunnel) FUZZ_CHECK(!whole.keep_alive);
    if (m == Method::Head) FUZZ_CHECK(whole.body == BodyKind::None || whole.body == BodyKind::Tunnel);
  }
  ResponseParser p2(l);
  ResponseHead inc;
  ParseResult r2 = incremental(buf, 1 + (sel >> 6), [&](std::string_view b) { return p2.parse(b, inc, m); });
  FUZZ_CHECK(r2.status == r.status);
  if (r.done()) {
    FUZZ_CHECK(r2.consumed == r.consumed && inc.status == whole.status && inc.body == whole.body);
    std::string out;
    write_forward_response(out, whole, ForwardOptions{});
    end_head(out);
    Limits big = ResponseParser::response_defaults();
    big.max_head_bytes = out.size() + 1;
    big.max_headers = whole.headers.size() + 1;
    ResponseParser p3(big);
    ResponseHead again;
    ParseResult r3 = p3.parse(out, again, m);
    FUZZ_CHECK(r3.done() && r3.consumed == out.size() && again.status == whole.status);
  }
}

struct ChunkOutcome {
  std::string body;
  ChunkedDecoder::Step::Kind end = ChunkedDecoder::Step::NeedMore;
  Error error = Error::None;
  std::size_t consumed = 0;
};

ChunkOutcome decode(std::string_view buf, std::size_t piece, std::size_t max_trailer) {
  ChunkOutcome o;
  ChunkedDecoder dec(max_trailer, 64);
  std::size_t off = 0;
  while (off < buf.size()) {
    std::string_view in = buf.substr(off, piece < buf.size() - off ? piece : buf.size() - off);
    while (true) {
      auto s = dec.step(in);
      FUZZ_CHECK(s.consumed <= in.size());
      if (s.kind == ChunkedDecoder::Step::Data) {
        FUZZ_CHECK(!s.data.empty() && inside(s.data, in));
        o.body.append(s.data);
      }
      in.remove_prefix(s.consumed);
      off += s.consumed;
      if (s.kind == ChunkedDecoder::Step::Data) continue;
      if (s.kind != ChunkedDecoder::Step::NeedMore) {
        o.end = s.kind;
        o.error = s.error;
        o.consumed = off;
        return o;
      }
      FUZZ_CHECK(in.empty());
      break;
    }
  }
  o.consumed = off;
  FUZZ_CHECK(dec.body_bytes() == o.body.size());
  return o;
}

void fuzz_chunked(std::string_view buf, std::uint8_t sel) {
  std::size_t max_trailer = (sel & 4) ? 32 : 4096;
  ChunkOutcome whole = decode(buf, buf.size() ? buf.size() : 1, max_trailer);
  ChunkOutcome split = decode(buf, 1 + (sel >> 4), max_trailer);
  FUZZ_CHECK(whole.end == split.end && whole.error == split.error);
  FUZZ_CHECK(whole.body == split.body && whole.consumed == split.consumed);
  if (whole.end == ChunkedDecoder::Step::Done) {
    // Re-encode and decode again: same body.
    std::string enc;
    append_chunk(enc, whole.body);
    enc += kLastChunk;
    ChunkOutcome again = decode(enc, enc.size(), max_trailer);
    FUZZ_CHECK(again.end == ChunkedDecoder::Step::Done && again.body == whole.body);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::uint8_t sel = data[0];
  std::string_view buf(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (sel & 3) {
    case 0:
    case 3: fuzz_request(buf, sel); break;
    case 1: fuzz_response(buf, sel); break;
    case 2: fuzz_chunked(buf, sel); break;
  }
  return 0;
}
