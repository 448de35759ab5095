// The session's keep-alive decisions: after_response() (what finish_request() acts on)
// case by case, and whole sessions over a real connection (stage_harness.hpp): an
// HTTP/1.1 client keeps its connection across requests, pipelined requests are answered
// in order, and HTTP/1.0, "Connection: close" and a client's half-close end it with
// the SessClose reason Varnish gives.
#include <string>

#include <gtest/gtest.h>

#include "stage_harness.hpp"

namespace ringproxy::test {
namespace {

using ringlog::Tag;

TEST(AfterResponse, KeepsOnlyWhatBothSidesKeep) {
  AfterResponse a = after_response(true, false, 1, "REQ_CLOSE");
  EXPECT_TRUE(a.keep);
  a = after_response(true, true, 1, "REQ_CLOSE");
  EXPECT_FALSE(a.keep);
  EXPECT_STREQ(a.close_reason, "REM_CLOSE");
  a = after_response(false, false, 0, "REQ_CLOSE");
  EXPECT_FALSE(a.keep);
  EXPECT_STREQ(a.close_reason, "REQ_HTTP10");
  a = after_response(false, false, 1, "RX_BAD");
  EXPECT_FALSE(a.keep);
  EXPECT_STREQ(a.close_reason, "RX_BAD");
}

Config no_cache() {
  Config c;
  c.cache = false;
  return c;
}

std::size_t count(const std::string& s, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

std::string sess_close(StageHarness& h) {
  auto s = h.txns_of("sess");
  if (s.size() != 1) return "<" + std::to_string(s.size()) + " sessions>";
  std::string c = s[0].first(Tag::SessClose);
  return c.substr(0, c.find(' '));
}

TEST(SessionKeepAlive, Http11KeepsTheConnectionAndAnswersPipelinedRequestsInOrder) {
  StageHarness h(no_cache());
  Session* s = nullptr;
  int c = h.connect(&s);
  StageHarness::send_all(c, "GET /10 HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string r = StageHarness::exchange(s, c, 1);
  r += StageHarness::exchange(s, c, SIZE_MAX);
  EXPECT_EQ(count(r, "HTTP/1.1 200 OK\r\n"), 1u) << r;
  EXPECT_EQ(r.find("Connection: close"), std::string::npos) << r;
  EXPECT_FALSE(s->closed());
  // Two more, pipelined in one write: both answered, in order, on the same connection.
  StageHarness::send_all(c, "GET /20 HTTP/1.1\r\nHost: x\r\n\r\nGET /30 HTTP/1.1\r\nHost: x\r\n\r\n");
  // The second answer goes out once the first one's send has completed, which on a
  // loaded machine can take longer than one bounded exchange: drive the session until
  // the client holds both answers (at most 200 exchanges).
  r.clear();
  for (int i = 0; i < 200 && count(r, "HTTP/1.1 200 OK\r\n") < 2; ++i) r += StageHarness::exchange(s, c, SIZE_MAX);
  ASSERT_EQ(count(r, "HTTP/1.1 200 OK\r\n"), 2u) << r;
  EXPECT_LT(r.find("Content-Length: 20\r\n"), r.find("Content-Length: 30\r\n"));
  EXPECT_FALSE(s->closed());
  s->close_session("TEST_END");
  EXPECT_EQ(h.txns_of("req").size(), 3u);
  EXPECT_EQ(sess_close(h), "TEST_END");
}

TEST(SessionKeepAlive, Http10ClosesAfterTheResponse) {
  StageHarness h(no_cache());
  Session* s = nullptr;
  int c = h.connect(&s);
  StageHarness::send_all(c, "GET /10 HTTP/1.0\r\n\r\n");
  bool eof = false;
  std::string r = StageHarness::exchange(s, c, SIZE_MAX, &eof);
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("\r\nConnection: close\r\n"), std::string::npos) << r;
  EXPECT_TRUE(eof);
  EXPECT_TRUE(s->closed());
  EXPECT_EQ(sess_close(h), "REQ_HTTP10");
}

TEST(SessionKeepAlive, Http10KeepAliveIsKept) {
  StageHarness h(no_cache());
  Session* s = nullptr;
  int c = h.connect(&s);
  StageHarness::send_all(c, "GET /10 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  std::string r = StageHarness::exchange(s, c, 1);
  r += StageHarness::exchange(s, c, SIZE_MAX);
  EXPECT_NE(r.find("\r\nConnection: keep-alive\r\n"), std::string::npos) << r;
  EXPECT_FALSE(s->closed());
}

TEST(SessionKeepAlive, ConnectionCloseEndsIt) {
  StageHarness h(no_cache());
  Session* s = nullptr;
  int c = h.connect(&s);
  StageHarness::send_all(c, "GET /10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  bool eof = false;
  std::string r = StageHarness::exchange(s, c, SIZE_MAX, &eof);
  EXPECT_NE(r.find("\r\nConnection: close\r\n"), std::string::npos) << r;
  EXPECT_TRUE(eof);
  EXPECT_EQ(sess_close(h), "REQ_CLOSE");
}

// The client shuts its side after its request: answered, then closed (REM_CLOSE).
TEST(SessionKeepAlive, ClientHalfCloseEndsItAfterTheResponse) {
  StageHarness h(no_cache());
  Session* s = nullptr;
  int c = h.connect(&s);
  StageHarness::send_all(c, "GET /10 HTTP/1.1\r\nHost: x\r\n\r\n");
  ::shutdown(c, SHUT_WR);
  bool eof = false;
  std::string r = StageHarness::exchange(s, c, SIZE_MAX, &eof);
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_TRUE(eof);
  EXPECT_EQ(sess_close(h), "REM_CLOSE");
}

}  // namespace
}  // namespace ringproxy::test
