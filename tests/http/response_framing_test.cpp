// Response heads and the body framing decision of RFC 9112 §6.3 (HEAD, 1xx, 204,
// 304, CONNECT, Transfer-Encoding, Content-Length, close-delimited), plus the
// connection reuse decision for the origin connection.
#include "http_test_util.hpp"

using namespace ringproxy::http;
using namespace ringproxy::http::test;

TEST(ResponseParser, ParsesStatusLineAndFields) {
  std::string buf = "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nServer: x\r\n\r\nabc";
  auto p = parse_resp(buf);
  ASSERT_TRUE(p.r.done());
  EXPECT_EQ(p.r.consumed, buf.size() - 3);
  EXPECT_EQ(p.h.status, 404);
  EXPECT_EQ(p.h.reason, "Not Found");
  EXPECT_EQ(p.h.version_minor, 1);
  EXPECT_EQ(p.h.body, BodyKind::Length);
  EXPECT_EQ(p.h.content_length, 3u);
  EXPECT_TRUE(p.h.keep_alive);
  EXPECT_EQ(p.h.headers.size(), 2u);
  // Missing reason (common in the wild) and an empty one are accepted.
  auto q = parse_resp("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(q.r.done());
  EXPECT_EQ(q.h.reason, "");
  EXPECT_TRUE(parse_resp("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n").r.done());
}

TEST(ResponseParser, MalformedStatusLinesAre502) {
  for (const char* bad : {"HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/1.1 099 X\r\n\r\n",
                          "HTTP/1.1 600 X\r\n\r\n", "HTTP/2 200 OK\r\n\r\n", "HTTP/1.1  200 OK\r\n\r\n",
                          "ICY 200 OK\r\n\r\n", "HTTP/1.1 200 O\x01K\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n"}) {
    auto p = parse_resp(bad);
    ASSERT_TRUE(p.r.failed()) << bad;
    EXPECT_EQ(p.r.error, Error::BadStatusLine) << bad;
    EXPECT_EQ(p.r.http_status, 502) << bad;
  }
  // Field errors in a response are 502 too (never 400 to the client).
  auto p = parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
  ASSERT_TRUE(p.r.failed());
  EXPECT_EQ(p.r.error, Error::ConflictingContentLength);
  EXPECT_EQ(p.r.http_status, 502);
  EXPECT_EQ(parse_resp("HTTP/1.1 200 OK\r\nX: 1\r\n y\r\n\r\n").r.error, Error::ObsFold);
}

TEST(ResponseParser, BareLfIsAcceptedFromOriginsByDefault) {
  auto p = parse_resp("HTTP/1.0 200 OK\nContent-Length: 2\n\nok");
  ASSERT_TRUE(p.r.done());
  EXPECT_EQ(p.h.content_length, 2u);
  Limits strict = ResponseParser::response_defaults();
  strict.allow_bare_lf = false;
  ResponseParser parser(strict);
  ResponseHead h;
  EXPECT_EQ(parser.parse("HTTP/1.0 200 OK\nContent-Length: 2\n\nok", h, Method::Get).error, Error::BareLF);
}

struct FramingCase {
  const char* wire;
  Method method;
  BodyKind body;
  std::uint64_t length;
  bool keep_alive;
};

TEST(ResponseFraming, Rfc9112Section6_3) {
  const FramingCase cases[] = {
      // 1. HEAD, 1xx, 204, 304: no body whatever the fields say.
      {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", Method::Head, BodyKind::None, 0, true},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", Method::Head, BodyKind::None, 0, true},
      {"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", Method::Get, BodyKind::None, 0, true},
      {"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", Method::Get, BodyKind::None, 0, true},
      {"HTTP/1.1 100 Continue\r\n\r\n", Method::Post, BodyKind::None, 0, true},
      {"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", Method::Get,
       BodyKind::Tunnel, 0, false},
      // 2. 2xx to CONNECT: tunnel.
      {"HTTP/1.1 200 Connection established\r\n\r\n", Method::Connect, BodyKind::Tunnel, 0, false},
      {"HTTP/1.1 407 Auth\r\nContent-Length: 4\r\n\r\n", Method::Connect, BodyKind::Length, 4, true},
      // 3./4. Transfer-Encoding: chunked last -> chunked, otherwise until close.
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", Method::Get, BodyKind::Chunked, 0, true},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Method::Get, BodyKind::Chunked, 0, true},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", Method::Get, BodyKind::UntilClose, 0, false},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", Method::Get,
       BodyKind::Chunked, 0, true},
      // 5./6. Content-Length.
      {"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", Method::Get, BodyKind::Length, 1234, true},
      {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", Method::Post, BodyKind::Length, 0, true},
      // 8. Otherwise: read until close.
      {"HTTP/1.1 200 OK\r\n\r\n", Method::Get, BodyKind::UntilClose, 0, false},
      {"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n", Method::Get, BodyKind::Length, 3, false},
      {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\n", Method::Get, BodyKind::Length, 3,
       true},
      {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\n", Method::Get, BodyKind::Length, 3,
       false},
  };
  for (const auto& c : cases) {
    auto p = parse_resp(c.wire, c.method);
    ASSERT_TRUE(p.r.done()) << c.wire;
    EXPECT_EQ(p.h.body, c.body) << c.wire;
    EXPECT_EQ(p.h.content_length, c.length) << c.wire;
    EXPECT_EQ(p.h.keep_alive, c.keep_alive) << c.wire;
  }
}

TEST(ResponseFraming, InterimResponsesThenTheFinalOne) {
  std::string wire = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                     "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
  ResponseParser parser;
  ResponseHead h;
  std::string_view in = wire;
  auto r1 = parser.parse(in, h, Method::Post);
  ASSERT_TRUE(r1.done());
  EXPECT_TRUE(h.interim);
  EXPECT_EQ(h.status, 100);
  in.remove_prefix(r1.consumed);
  auto r2 = parser.parse(in, h, Method::Post);
  ASSERT_TRUE(r2.done());
  EXPECT_TRUE(h.interim);
  EXPECT_EQ(h.status, 103);
  in.remove_prefix(r2.consumed);
  auto r3 = parser.parse(in, h, Method::Post);
  ASSERT_TRUE(r3.done());
  EXPECT_FALSE(h.interim);
  EXPECT_EQ(h.status, 201);
  EXPECT_EQ(r3.consumed, in.size());
}

TEST(ResponseFraming, ClAndTeTogetherIsFlaggedSoTheClIsDropped) {
  auto p = parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n");
  ASSERT_TRUE(p.r.done());
  EXPECT_TRUE(p.h.cl_and_te);
  EXPECT_EQ(p.h.body, BodyKind::Chunked);
  EXPECT_FALSE(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n").h.cl_and_te);
}

TEST(ResponseFraming, FaultyFramingIs502) {
  EXPECT_EQ(parse_resp("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").r.error,
            Error::TransferEncodingHttp10);
  EXPECT_EQ(parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n").r.error,
            Error::ChunkedTwice);
  EXPECT_EQ(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").r.error, Error::BadContentLength);
}

TEST(ResponseParser, HeadLimit) {
  ResponseParser parser;
  ResponseHead h;
  std::string big = "HTTP/1.1 200 OK\r\nX: " + std::string(70 * 1024, 'a');
  auto r = parser.parse(big, h, Method::Get);
  ASSERT_TRUE(r.failed());
  EXPECT_EQ(r.error, Error::HeadTooLarge);
  EXPECT_EQ(r.http_status, 502);
}
