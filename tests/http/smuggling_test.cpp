// Request smuggling defences (RFC 9112 §6.1, §6.3, §11.2): every ambiguity a front
// and a back end could resolve differently is refused with 400, and the server closes.
#include "http_test_util.hpp"

#include <set>

using namespace ringproxy::http;
using namespace ringproxy::http::test;

static std::string req(std::string_view fields) {
  return "POST /x HTTP/1.1\r\nHost: h\r\n" + std::string(fields) + "\r\n";
}

static void expect_400(std::string_view wire, Error want) {
  auto p = parse_req(wire);
  ASSERT_TRUE(p.r.failed()) << wire;
  EXPECT_EQ(p.r.error, want) << wire << " -> " << error_reason(p.r.error);
  EXPECT_EQ(p.r.http_status, 400) << wire;
}

TEST(Smuggling, ConflictingContentLength) {
  expect_400(req("Content-Length: 5\r\nContent-Length: 6\r\n"), Error::ConflictingContentLength);
  expect_400(req("Content-Length: 5, 6\r\n"), Error::ConflictingContentLength);
  expect_400(req("Content-Length: 5\r\ncontent-length: 05\r\nContent-Length: 50\r\n"),
             Error::ConflictingContentLength);
}

TEST(Smuggling, MalformedContentLength) {
  expect_400(req("Content-Length: -1\r\n"), Error::BadContentLength);
  expect_400(req("Content-Length: +5\r\n"), Error::BadContentLength);
  expect_400(req("Content-Length: 5a\r\n"), Error::BadContentLength);
  expect_400(req("Content-Length: 0x10\r\n"), Error::BadContentLength);
  expect_400(req("Content-Length:\r\n"), Error::BadContentLength);
  expect_400(req("Content-Length: 5,\r\n"), Error::BadContentLength);
  expect_400(req("Content-Length: 5 5\r\n"), Error::BadContentLength);
  expect_400(req("Content-Length: 99999999999999999999999\r\n"), Error::BadContentLength);
  expect_400(req("Content-Length: 18446744073709551616\r\n"), Error::BadContentLength);  // 2^64
}

TEST(Smuggling, ContentLengthWithTransferEncoding) {
  expect_400(req("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), Error::ContentLengthWithTransferEncoding);
  expect_400(req("Transfer-Encoding: chunked\r\nContent-Length: 0\r\n"), Error::ContentLengthWithTransferEncoding);
}

TEST(Smuggling, TransferEncodingMustEndInChunked) {
  expect_400(req("Transfer-Encoding: gzip\r\n"), Error::TransferEncodingNotChunked);
  expect_400(req("Transfer-Encoding: chunked, gzip\r\n"), Error::TransferEncodingNotChunked);
  expect_400(req("Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n"), Error::TransferEncodingNotChunked);
  expect_400(req("Transfer-Encoding: chunkedx\r\n"), Error::TransferEncodingNotChunked);
  expect_400(req("Transfer-Encoding: \"chunked\"\r\n"), Error::TransferEncodingNotChunked);
  expect_400(req("Transfer-Encoding:\r\n"), Error::TransferEncodingNotChunked);
  expect_400(req("Transfer-Encoding: chunked, chunked\r\n"), Error::ChunkedTwice);
  expect_400(req("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"), Error::ChunkedTwice);
  // The case-insensitive coding name is fine.
  EXPECT_TRUE(parse_req(req("Transfer-Encoding: CHUNKED\r\n")).r.done());
}

TEST(Smuggling, TransferEncodingInHttp10) {
  expect_400("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", Error::TransferEncodingHttp10);
}

TEST(Smuggling, ObsFold) {
  expect_400(req("X-A: 1\r\n  continued\r\n"), Error::ObsFold);
  expect_400(req("X-A: 1\r\n\tcontinued\r\n"), Error::ObsFold);
  expect_400("GET / HTTP/1.1\r\n Host: h\r\n\r\n", Error::ObsFold);
  // The classic: a folded Transfer-Encoding some peers would join.
  expect_400(req("Transfer-Encoding:\r\n chunked\r\n"), Error::ObsFold);
}

TEST(Smuggling, BareCR) {
  expect_400(req("X-A: 1\r2\r\n"), Error::BareCR);
  expect_400(req("X-A\r: 1\r\n"), Error::BareCR);
  expect_400("GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", Error::BareCR);
  expect_400("GET / HTTP/1.1\r\r\nHost: h\r\n\r\n", Error::BareCR);
  expect_400("GET\r / HTTP/1.1\r\nHost: h\r\n\r\n", Error::BareCR);
  expect_400("\rGET / HTTP/1.1\r\nHost: h\r\n\r\n", Error::BareCR);
  expect_400(req("Content-Length: 1\r\r\n"), Error::BareCR);
}

TEST(Smuggling, BareLF) {
  expect_400("GET / HTTP/1.1\r\nHost: h\nContent-Length: 5\r\n\r\n", Error::BareLF);
  expect_400("GET / HTTP/1.1\r\nHost: h\r\n\n", Error::BareLF);
}

TEST(Smuggling, InvalidHeaderNames) {
  expect_400(req("Content-Length : 5\r\n"), Error::BadHeaderName);  // SP before colon
  expect_400(req("Transfer-Encoding\t: chunked\r\n"), Error::BadHeaderName);
  expect_400(req(": empty\r\n"), Error::BadHeaderName);
  expect_400(req("X A: 1\r\n"), Error::BadHeaderName);
  expect_400(req("X(A): 1\r\n"), Error::BadHeaderName);
  expect_400(req("X\"A: 1\r\n"), Error::BadHeaderName);
  expect_400(req("X\x80: 1\r\n"), Error::BadHeaderName);
  expect_400(req("X\x01: 1\r\n"), Error::BadHeaderName);
  expect_400(req("NoColon\r\n"), Error::BadHeaderName);
  // Every tchar is accepted.
  EXPECT_TRUE(parse_req(req("!#$%&'*+-.^_`|~09azAZ: 1\r\n")).r.done());
}

TEST(Smuggling, InvalidHeaderValues) {
  expect_400(req(std::string("X-A: a\0b\r\n", 10)), Error::BadHeaderValue);
  expect_400(req("X-A: a\x01" "b\r\n"), Error::BadHeaderValue);
  expect_400(req("X-A: a\x7f" "b\r\n"), Error::BadHeaderValue);
  expect_400(req("X-A: a\x1b[31m\r\n"), Error::BadHeaderValue);
  // obs-text and HTAB inside a value are allowed.
  std::string wire = req("X-A: caf\xc3\xa9\tb\r\n");  // outlives the views
  auto p = parse_req(wire);
  ASSERT_TRUE(p.r.done());
  EXPECT_EQ(p.h.headers[1].value, "caf\xc3\xa9\tb");
}

TEST(Smuggling, HostMustBeAHost) {
  for (const char* bad : {"a b", "a/b", "a?b", "a#b", "u@h", "h:8x", "h:80:90", "[::1", "[]", "[::1]x", "\"h\""}) {
    std::string wire = std::string("GET / HTTP/1.1\r\nHost: ") + bad + "\r\n\r\n";
    expect_400(wire, Error::BadHost);
  }
  for (const char* good : {"example.com", "example.com:8080", "127.0.0.1:80", "[::1]:443", "[2001:db8::1]:8080",
                           "xn--bcher-kva.example", "h:", ""}) {
    std::string wire = std::string("GET / HTTP/1.1\r\nHost: ") + good + "\r\n\r\n";
    EXPECT_TRUE(parse_req(wire).r.done()) << good;
  }
}

TEST(Smuggling, TooManyConnectionFields) {
  std::string f;
  for (int i = 0; i < 9; ++i) f += "Connection: x" + std::to_string(i) + "\r\n";
  expect_400(req(f), Error::TooManyConnectionHeaders);
}

TEST(Smuggling, ErrorReasonsAreDistinctAndStatusMapped) {
  // Each error has its own text for the Error record.
  std::set<std::string_view> seen;
  for (int e = 0; e <= static_cast<int>(Error::BadHost); ++e) {
    auto r = error_reason(static_cast<Error>(e));
    EXPECT_FALSE(r.empty());
    EXPECT_TRUE(seen.insert(r).second) << r;
  }
  EXPECT_EQ(error_status(Error::HeadTooLarge), 431);
  EXPECT_EQ(error_status(Error::TooManyHeaders), 431);
  EXPECT_EQ(error_status(Error::UrlTooLong), 414);
  EXPECT_EQ(error_status(Error::ObsFold), 400);
  EXPECT_EQ(error_status(Error::BadChunkSize), 400);
}
