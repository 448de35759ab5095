// The fetch against the demo origin as a backend: through a Session driven by the test
// (stage_harness.hpp), a request goes out as a backend request, the demo origin reads
// it (and its body) and answers like an origin, and the fetch logs both heads and the
// accounting. Fails if the fetch, the demo origin's connection or direct delivery break.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "demo_origin.hpp"
#include "stage_harness.hpp"

namespace ringproxy::test {
namespace {

using ringlog::Tag;

Config no_cache() {
  Config c;
  c.cache = false;
  return c;
}

std::string demo_body(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += demo_body_byte(i);
  return s;
}

// The response's head (up to the blank line) and body.
std::pair<std::string, std::string> split(const std::string& r) {
  auto e = r.find("\r\n\r\n");
  if (e == std::string::npos) return {r, ""};
  return {r.substr(0, e + 4), r.substr(e + 4)};
}

TEST(FetchFromDemoOrigin, GetReturnsTheBodyTheUrlAsksFor) {
  StageHarness h(no_cache());
  Session* s = nullptr;
  int c = h.connect(&s);
  StageHarness::send_all(c, "GET /size/100k HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  bool eof = false;
  std::string r = StageHarness::exchange(s, c, SIZE_MAX, &eof);
  auto [head, body] = split(r);
  EXPECT_TRUE(eof) << "Connection: close";
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("\r\nContent-Length: 102400\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nCache-Control: public, max-age=60\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nContent-Type: application/octet-stream\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nVia: 1.1 ringproxy\r\n"), std::string::npos) << head;
  ASSERT_EQ(body.size(), 102400u);
  EXPECT_EQ(body, demo_body(102400));

  auto be = h.txns_of("bereq");
  ASSERT_EQ(be.size(), 1u);
  const LoggedTxn& t = be[0];
  EXPECT_EQ(t.first(Tag::BereqMethod), "GET");
  EXPECT_EQ(t.first(Tag::BereqURL), "/size/100k");
  EXPECT_EQ(t.first(Tag::BackendOpen), "-1 demo - - - -");
  EXPECT_EQ(t.first(Tag::BerespStatus), "200");
  EXPECT_EQ(t.first(Tag::BerespReason), "OK");
  auto bh = t.all(Tag::BerespHeader);
  ASSERT_GE(bh.size(), 2u);
  EXPECT_EQ(bh[0], "Content-Length: 102400");
  EXPECT_EQ(bh[1], "Cache-Control: public, max-age=60");
  EXPECT_EQ(t.first(Tag::Length), "102400");
  // BereqAcct: header bytes sent, no body sent, the response's head and 100 KiB back.
  std::string acct = t.first(Tag::BereqAcct);
  std::uint64_t htx = 0, btx = 1, tx = 0, hrx = 0, brx = 0, rx = 0;
  ASSERT_EQ(std::sscanf(acct.c_str(), "%lu %lu %lu %lu %lu %lu", &htx, &btx, &tx, &hrx, &brx, &rx), 6) << acct;
  EXPECT_GT(htx, 0u);
  EXPECT_EQ(btx, 0u);
  EXPECT_GT(hrx, 0u);
  EXPECT_EQ(brx, 102400u);
}

TEST(FetchFromDemoOrigin, HeadGetsTheLengthAndNoBody) {
  StageHarness h(no_cache());
  Session* s = nullptr;
  int c = h.connect(&s);
  StageHarness::send_all(c, "HEAD /5000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  bool eof = false;
  std::string r = StageHarness::exchange(s, c, SIZE_MAX, &eof);
  auto [head, body] = split(r);
  EXPECT_TRUE(eof);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("\r\nContent-Length: 5000\r\n"), std::string::npos) << head;
  EXPECT_EQ(body, "");
}

// Like a real origin, the demo origin answers once it has read the whole request body;
// the fetch sends it on, and a 100 Continue goes to the client first.
TEST(FetchFromDemoOrigin, AnswersAfterTheWholeRequestBody) {
  StageHarness h(no_cache());
  Session* s = nullptr;
  int c = h.connect(&s);
  StageHarness::send_all(c, "POST /size/10 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 6\r\n\r\nabc");
  std::string first = StageHarness::exchange(s, c, 1);
  EXPECT_EQ(first, "HTTP/1.1 100 Continue\r\n\r\n");
  for (int i = 0; i < 3; ++i) s->on_event(EPOLLIN | EPOLLOUT);
  EXPECT_EQ(StageHarness::read_now(c), "") << "no answer before the body's end";
  StageHarness::send_all(c, "def");
  std::string r = StageHarness::exchange(s, c, 1);
  r += StageHarness::exchange(s, c, SIZE_MAX);
  auto [head, body] = split(r);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_EQ(body, demo_body(10));
  EXPECT_FALSE(s->closed()) << "keep-alive: the connection stays";
  s->close_session("TEST_END");
  auto be = h.txns_of("bereq");
  ASSERT_EQ(be.size(), 1u);
  std::string acct = be[0].first(Tag::BereqAcct);
  std::uint64_t htx = 0, btx = 0;
  ASSERT_EQ(std::sscanf(acct.c_str(), "%lu %lu", &htx, &btx), 2) << acct;
  EXPECT_EQ(btx, 6u) << "the request body went to the origin";
}

TEST(DemoOrigin, ObjectFromTheUrl) {
  EXPECT_EQ(demo_object("/").size, 1024u);
  EXPECT_EQ(demo_object("/size/3k").size, 3072u);
  EXPECT_EQ(demo_object("/2m").size, 2u << 20);
  EXPECT_EQ(demo_object("/99999999999999").size, 1u << 30);
  EXPECT_EQ(demo_object("/private/1").cache_control, "private, no-store");
  EXPECT_EQ(demo_object("/a?ttl=5").cache_control, "public, max-age=5");
}

}  // namespace
}  // namespace ringproxy::test
