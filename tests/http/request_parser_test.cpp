// Request heads: what is parsed (views into the buffer), what is derived (framing,
// keep-alive, Expect), the limits and their statuses (431 / 414 / 400).
#include "http_test_util.hpp"

using namespace ringproxy::http;
using namespace ringproxy::http::test;

TEST(RequestParser, ParsesStartLineAndFieldsAsViewsIntoTheBuffer) {
  std::string buf =
      "GET /index.html?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent:  curl/8  \r\n"
      "Accept:*/*\r\nX-Empty:\r\n\r\n";
  auto p = parse_req(buf);
  ASSERT_TRUE(p.r.done());
  EXPECT_EQ(p.r.consumed, buf.size());
  EXPECT_EQ(p.h.head_bytes, buf.size());
  EXPECT_EQ(p.h.method, Method::Get);
  EXPECT_EQ(p.h.method_name, "GET");
  EXPECT_EQ(p.h.target, "/index.html?x=1");
  EXPECT_EQ(p.h.version_minor, 1);
  EXPECT_EQ(p.h.host, "example.com");
  ASSERT_EQ(p.h.headers.size(), 4u);
  EXPECT_EQ(p.h.headers[1].name, "User-Agent");
  EXPECT_EQ(p.h.headers[1].value, "curl/8");  // OWS trimmed both sides
  EXPECT_EQ(p.h.headers[2].value, "*/*");
  EXPECT_EQ(p.h.headers[3].value, "");
  // Zero copy: the views point into buf.
  EXPECT_EQ(p.h.target.data(), buf.data() + 4);
  EXPECT_GE(p.h.headers[0].value.data(), buf.data());
  EXPECT_LT(p.h.headers[0].value.data(), buf.data() + buf.size());
  EXPECT_EQ(p.h.body, BodyKind::None);
  EXPECT_TRUE(p.h.keep_alive);
  EXPECT_FALSE(p.h.expect_continue);
  EXPECT_NE(p.h.headers.find("user-agent"), nullptr);
  EXPECT_EQ(p.h.headers.find("cookie"), nullptr);
  EXPECT_EQ(p.h.headers.count("HOST"), 1u);
}

TEST(RequestParser, KnowsTheMethodsAndKeepsOthersAsTokens) {
  const std::pair<const char*, Method> cases[] = {
      {"GET", Method::Get},         {"HEAD", Method::Head},       {"POST", Method::Post},
      {"PUT", Method::Put},         {"DELETE", Method::Delete},   {"OPTIONS", Method::Options},
      {"TRACE", Method::Trace},     {"PATCH", Method::Patch},     {"PURGE", Method::Other},
      {"get", Method::Other},  // methods are case-sensitive
  };
  for (auto [m, want] : cases) {
    std::string wire = std::string(m) + " / HTTP/1.1\r\nHost: h\r\n\r\n";
    auto p = parse_req(wire);
    ASSERT_TRUE(p.r.done()) << m;
    EXPECT_EQ(p.h.method, want) << m;
    EXPECT_EQ(p.h.method_name, m);
  }
  auto c = parse_req("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
  ASSERT_TRUE(c.r.done());
  EXPECT_EQ(c.h.method, Method::Connect);
  EXPECT_EQ(c.h.target, "example.com:443");
  auto o = parse_req("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_TRUE(o.r.done());
  EXPECT_EQ(o.h.target, "*");
  auto a = parse_req("GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n");
  ASSERT_TRUE(a.r.done());
  EXPECT_EQ(a.h.target, "http://example.com/x");
}

TEST(RequestParser, RejectsInvalidMethodsTargetsAndVersions) {
  EXPECT_EQ(req_error("G(ET / HTTP/1.1\r\nHost: h\r\n\r\n"), Error::BadMethod);
  EXPECT_EQ(req_error("G\x01T / HTTP/1.1\r\nHost: h\r\n\r\n"), Error::BadMethod);
  EXPECT_EQ(req_error(" GET / HTTP/1.1\r\nHost: h\r\n\r\n"), Error::BadRequestLine);
  EXPECT_EQ(req_error("GET  / HTTP/1.1\r\nHost: h\r\n\r\n"), Error::BadTarget);  // two SP
  EXPECT_EQ(req_error("GET / HTTP/1.1 \r\nHost: h\r\n\r\n"), Error::BadVersion);
  EXPECT_EQ(req_error("GET /\r\n\r\n"), Error::BadRequestLine);  // HTTP/0.9
  EXPECT_EQ(req_error("GET\r\n\r\n"), Error::BadRequestLine);
  EXPECT_EQ(req_error("GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n"), Error::BadTarget);
  EXPECT_EQ(req_error("GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n"), Error::BadTarget);
  EXPECT_EQ(req_error("GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n"), Error::BadTarget);
  EXPECT_EQ(req_error("GET / HTTP/1.1x\r\nHost: h\r\n\r\n"), Error::BadVersion);
  EXPECT_EQ(req_error("GET / http/1.1\r\nHost: h\r\n\r\n"), Error::BadVersion);
  EXPECT_EQ(req_error("GET / HTTP/11\r\nHost: h\r\n\r\n"), Error::BadVersion);
  EXPECT_EQ(req_error("GET / HTTP/1.a\r\nHost: h\r\n\r\n"), Error::BadVersion);
  auto v2 = parse_req("GET / HTTP/2.0\r\nHost: h\r\n\r\n");
  ASSERT_TRUE(v2.r.failed());
  EXPECT_EQ(v2.r.error, Error::VersionNotSupported);
  EXPECT_EQ(v2.r.http_status, 505);
  EXPECT_EQ(parse_req("GET / HTTP/1.1\r\nHost: h\r\n\r\n").r.http_status, 0);
  EXPECT_EQ(parse_req("G(ET / HTTP/1.1\r\nHost: h\r\n\r\n").r.http_status, 400);
}

TEST(RequestParser, Http10AndLaterMinorVersions) {
  auto p = parse_req("GET / HTTP/1.0\r\n\r\n");  // no Host needed in 1.0
  ASSERT_TRUE(p.r.done());
  EXPECT_EQ(p.h.version_minor, 0);
  EXPECT_FALSE(p.h.keep_alive);
  EXPECT_EQ(p.h.host, "");
  auto q = parse_req("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  ASSERT_TRUE(q.r.done());
  EXPECT_TRUE(q.h.keep_alive);
  auto r = parse_req("GET / HTTP/1.9\r\nHost: h\r\n\r\n");  // 1.x, x >= 1: 1.1 semantics
  ASSERT_TRUE(r.r.done());
  EXPECT_EQ(r.h.version_minor, 9);
  EXPECT_TRUE(r.h.keep_alive);
}

TEST(RequestParser, KeepAliveDecision) {
  EXPECT_TRUE(parse_req("GET / HTTP/1.1\r\nHost: h\r\n\r\n").h.keep_alive);
  EXPECT_FALSE(parse_req("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").h.keep_alive);
  EXPECT_FALSE(parse_req("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, CLOSE\r\n\r\n").h.keep_alive);
  EXPECT_FALSE(parse_req("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo\r\nConnection: close\r\n\r\n").h.keep_alive);
  EXPECT_FALSE(parse_req("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").h.keep_alive);
  EXPECT_FALSE(parse_req("GET / HTTP/1.0\r\nConnection: keep-alivex\r\n\r\n").h.keep_alive);
  auto p = parse_req("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, X-A\r\nUpgrade: websocket\r\n\r\n");
  ASSERT_TRUE(p.r.done());
  EXPECT_TRUE(p.h.connection.upgrade);
  EXPECT_TRUE(p.h.connection.lists("x-a"));
  EXPECT_FALSE(p.h.connection.lists("x-b"));
}

TEST(RequestParser, ExpectContinue) {
  auto p = parse_req("PUT /u HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-Continue\r\n\r\n");
  ASSERT_TRUE(p.r.done());
  EXPECT_TRUE(p.h.expect_continue);
  EXPECT_FALSE(p.h.expect_unknown);
  EXPECT_EQ(p.h.body, BodyKind::Length);
  EXPECT_EQ(p.h.content_length, 5u);
  // RFC 9110 §10.1.1: ignored in HTTP/1.0.
  auto q = parse_req("PUT /u HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_TRUE(q.r.done());
  EXPECT_FALSE(q.h.expect_continue);
  auto r = parse_req("PUT /u HTTP/1.1\r\nHost: h\r\nExpect: something-else\r\n\r\n");
  ASSERT_TRUE(r.r.done());
  EXPECT_FALSE(r.h.expect_continue);
  EXPECT_TRUE(r.h.expect_unknown);
}

TEST(RequestParser, BodyFraming) {
  auto none = parse_req("POST / HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(none.h.body, BodyKind::None);  // RFC 9112 §6.3 item 7: length 0
  auto cl = parse_req("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0012\r\n\r\n");
  EXPECT_EQ(cl.h.body, BodyKind::Length);
  EXPECT_EQ(cl.h.content_length, 12u);
  auto zero = parse_req("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(zero.h.body, BodyKind::Length);
  EXPECT_EQ(zero.h.content_length, 0u);
  auto same = parse_req("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 7, 7\r\nContent-Length: 7\r\n\r\n");
  ASSERT_TRUE(same.r.done());
  EXPECT_EQ(same.h.content_length, 7u);
  auto ch = parse_req("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n");
  ASSERT_TRUE(ch.r.done());
  EXPECT_EQ(ch.h.body, BodyKind::Chunked);
  auto ch2 = parse_req("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_TRUE(ch2.r.done());
  EXPECT_EQ(ch2.h.body, BodyKind::Chunked);
}

TEST(RequestParser, HostRules) {
  EXPECT_EQ(req_error("GET / HTTP/1.1\r\n\r\n"), Error::MissingHost);
  EXPECT_EQ(req_error("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"), Error::MultipleHost);
  EXPECT_EQ(req_error("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"), Error::MultipleHost);
}

TEST(RequestParser, LeadingEmptyLinesAreSkippedAndCounted) {
  std::string buf = "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
  auto p = parse_req(buf);
  ASSERT_TRUE(p.r.done());
  EXPECT_EQ(p.r.consumed, buf.size());
  EXPECT_EQ(p.h.target, "/");
  EXPECT_TRUE(parse_req("\r\n").r.need_more());
  EXPECT_TRUE(parse_req("\r").r.need_more());
  EXPECT_TRUE(parse_req("").r.need_more());
}

TEST(RequestParser, BareLfOnlyWhenAllowed) {
  EXPECT_EQ(req_error("GET / HTTP/1.1\nHost: h\r\n\r\n"), Error::BareLF);
  EXPECT_EQ(req_error("GET / HTTP/1.1\r\nHost: h\n\r\n"), Error::BareLF);
  EXPECT_EQ(req_error("GET / HTTP/1.1\r\nHost: h\r\n\n"), Error::BareLF);
  EXPECT_EQ(req_error("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), Error::BareLF);
  Limits lax;
  lax.allow_bare_lf = true;
  std::string buf = "GET / HTTP/1.1\nHost: h\nX: y\r\n\nrest";
  auto p = parse_req(buf, lax);
  ASSERT_TRUE(p.r.done());
  EXPECT_EQ(p.r.consumed, buf.size() - 4);
  EXPECT_EQ(p.h.headers.size(), 2u);
  EXPECT_EQ(p.h.headers[1].value, "y");
}

TEST(RequestParser, NeedMoreUntilTheEmptyLine) {
  std::string full = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  RequestParser parser;
  RequestHead h;
  for (std::size_t i = 0; i < full.size(); ++i) {
    auto r = parser.parse(std::string_view(full).substr(0, i), h);
    ASSERT_TRUE(r.need_more()) << i;
  }
  auto r = parser.parse(full, h);
  ASSERT_TRUE(r.done());
  EXPECT_EQ(r.consumed, full.size());
}

// ---- limits -----------------------------------------------------------------------

static std::string head_with_fields(std::size_t n, std::size_t value_len = 1) {
  std::string s = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (std::size_t i = 0; i < n; ++i) s += "X-F" + std::to_string(i) + ": " + std::string(value_len, 'v') + "\r\n";
  return s + "\r\n";
}

TEST(RequestLimits, HeaderCount) {
  // 100 fields (Host + 99) pass, 101 fail with 431.
  EXPECT_TRUE(parse_req(head_with_fields(99)).r.done());
  auto p = parse_req(head_with_fields(100));
  ASSERT_TRUE(p.r.failed());
  EXPECT_EQ(p.r.error, Error::TooManyHeaders);
  EXPECT_EQ(p.r.http_status, 431);
  Limits l;
  l.max_headers = 5;
  EXPECT_TRUE(parse_req(head_with_fields(4), l).r.done());
  EXPECT_EQ(req_error(head_with_fields(5), l), Error::TooManyHeaders);
}

TEST(RequestLimits, HeadBytesCompleteAndIncomplete) {
  Limits l;
  l.max_head_bytes = 1000;
  std::string ok = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(1000 - 32, 'a') + "\r\n\r\n";
  ASSERT_EQ(ok.size(), 1000u);
  EXPECT_TRUE(parse_req(ok, l).r.done());
  std::string big = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(1000 - 31, 'a') + "\r\n\r\n";
  auto p = parse_req(big, l);
  ASSERT_TRUE(p.r.failed());
  EXPECT_EQ(p.r.error, Error::HeadTooLarge);
  EXPECT_EQ(p.r.http_status, 431);
  // Incomplete but already over the limit: fail without waiting for the end.
  std::string partial = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(2000, 'a');
  EXPECT_EQ(req_error(partial, l), Error::HeadTooLarge);
  // Default limit is 64 KiB.
  std::string def = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(64 * 1024, 'a');
  EXPECT_EQ(req_error(def), Error::HeadTooLarge);
  std::string def_ok = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(60 * 1024, 'a') + "\r\n\r\n";
  EXPECT_TRUE(parse_req(def_ok).r.done());
}

TEST(RequestLimits, UrlLength) {
  std::string url8k = "/" + std::string(8 * 1024 - 1, 'u');
  EXPECT_TRUE(parse_req("GET " + url8k + " HTTP/1.1\r\nHost: h\r\n\r\n").r.done());
  auto p = parse_req("GET " + url8k + "u HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_TRUE(p.r.failed());
  EXPECT_EQ(p.r.error, Error::UrlTooLong);
  EXPECT_EQ(p.r.http_status, 414);
  // Start line not finished yet but the target is already too long.
  EXPECT_EQ(req_error("GET " + url8k + std::string(100, 'u')), Error::UrlTooLong);
  // Request line complete, head over the limit: the long URL is the reason given.
  Limits l;
  l.max_url = 100;
  l.max_head_bytes = 300;
  EXPECT_EQ(req_error("GET /" + std::string(150, 'u') + " HTTP/1.1\r\nHost: h\r\nX: " + std::string(400, 'v'), l),
            Error::UrlTooLong);
  EXPECT_EQ(req_error("GET /" + std::string(150, 'u') + " HTTP/1.1\r\nHost: h\r\n\r\n", l), Error::UrlTooLong);
  EXPECT_EQ(req_error("GET /" + std::string(90, 'u') + " HTTP/1.1\r\nHost: h\r\nX: " + std::string(400, 'v'), l),
            Error::HeadTooLarge);
}

TEST(RequestLimits, ChangingLimitsBetweenMessages) {
  RequestParser parser;
  RequestHead h;
  std::string req = head_with_fields(10);
  ASSERT_TRUE(parser.parse(req, h).done());
  Limits l;
  l.max_headers = 3;
  parser.set_limits(l);
  EXPECT_EQ(parser.limits().max_headers, 3u);
  EXPECT_TRUE(parser.parse(req, h).failed());
}

TEST(RequestParser, HeaderStorageIsReusedAcrossMessages) {
  RequestParser parser;
  RequestHead h;
  std::string req = head_with_fields(20);
  ASSERT_TRUE(parser.parse(req, h).done());
  const Header* first = &h.headers[0];
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(parser.parse(req, h).done());
  EXPECT_EQ(&h.headers[0], first);  // no reallocation
  EXPECT_EQ(h.headers.size(), 21u);
}

TEST(RequestParser, BadRequestLineIsRefusedBeforeTheHeadEnds) {
  // No need to wait for the empty line (or the head limit) to refuse these.
  EXPECT_EQ(req_error("GET /" + std::string(9000, 'u') + " HTTP/1.1\r\nHost: h\r\n"), Error::UrlTooLong);
  EXPECT_EQ(req_error("GET / HTTP/3.0\r\nHost: h\r\n"), Error::VersionNotSupported);
  EXPECT_EQ(req_error("G(T / HTTP/1.1\r\n"), Error::BadMethod);
  // A good request line keeps waiting.
  EXPECT_TRUE(parse_req("GET / HTTP/1.1\r\nHost: h\r\n").r.need_more());
}
