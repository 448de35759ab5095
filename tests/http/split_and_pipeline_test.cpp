// Pipelined requests in one buffer, and the same bytes delivered split at every
// byte boundary or one byte at a time: the server must see exactly the same
// requests, bodies and errors whatever the segmentation.
#include "http_test_util.hpp"

using namespace ringproxy::http;
using namespace ringproxy::http::test;

namespace {

const std::string kPipeline =
    "GET /one HTTP/1.1\r\nHost: h\r\n\r\n"
    "POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world"
    "\r\n"  // stray CRLF after a body (RFC 9112 §2.2: ignored)
    "PUT /three HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    "3;x=y\r\nabc\r\n4\r\ndefg\r\n0\r\nT: 1\r\n\r\n"
    "HEAD /four HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";

ConnectionLog expected_pipeline() {
  ConnectionLog log;
  log.requests = {{"GET", "/one", "", true},
                  {"POST", "/two", "hello world", true},
                  {"PUT", "/three", "abcdefg", true},
                  {"HEAD", "/four", "", false}};
  return log;
}

}  // namespace

TEST(Pipelining, AllRequestsInOneBufferAnsweredInOrder) {
  EXPECT_EQ(run_connection(kPipeline, {}), expected_pipeline());
}

TEST(Pipelining, ConsumedBytesLeaveTheNextRequestIntact) {
  RequestParser parser;
  RequestHead h;
  std::string_view in = kPipeline;
  auto r = parser.parse(in, h);
  ASSERT_TRUE(r.done());
  EXPECT_EQ(h.target, "/one");
  in.remove_prefix(r.consumed);
  EXPECT_EQ(in.substr(0, 9), "POST /two");
}

TEST(SplitDelivery, SplitAtEveryByteBoundary) {
  ConnectionLog want = expected_pipeline();
  for (std::size_t k = 1; k < kPipeline.size(); ++k) {
    ConnectionLog got = run_connection(kPipeline, {k, kPipeline.size()});
    ASSERT_EQ(got, want) << "split at " << k;
  }
}

TEST(SplitDelivery, OneByteAtATimeAndOtherPieceSizes) {
  ConnectionLog want = expected_pipeline();
  for (std::size_t piece : {1u, 2u, 3u, 7u, 13u, 64u}) EXPECT_EQ(run_connection(kPipeline, {piece}), want) << piece;
}

TEST(SplitDelivery, ErrorsAreTheSameWhateverTheSplit) {
  const std::pair<std::string, Error> cases[] = {
      {"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
       Error::ConflictingContentLength},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: 1\r\n folded\r\n\r\n", Error::ObsFold},
      {"GET / HTTP/1.1\r\nHost: h\nX: 1\r\n\r\n", Error::BareLF},
      {"GET / HTTP/1.1\r\nHost: h\r\nX: 1\r2\r\n\r\n", Error::BareCR},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcdefg\r\n", Error::MissingChunkCRLF},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", Error::BadChunkSize},
      {"GET /ok HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n", Error::BadHeaderName},
  };
  for (const auto& [wire, err] : cases) {
    for (std::size_t k = 1; k <= wire.size(); ++k) {
      ConnectionLog got = run_connection(wire, {k, wire.size()});
      ASSERT_EQ(got.error, err) << "split at " << k << " of " << wire;
    }
    EXPECT_EQ(run_connection(wire, {1}).error, err) << wire;
  }
}

TEST(SplitDelivery, LimitsHoldWhenTheHeadTricklesIn) {
  // A slowloris head one byte at a time still fails at the limit, not later.
  Limits l;
  l.max_head_bytes = 512;
  RequestParser parser(l);
  RequestHead h;
  std::string wire = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(1000, 'a');
  ParseResult r;
  std::size_t i = 1;
  for (; i <= wire.size(); ++i) {
    r = parser.parse(std::string_view(wire).substr(0, i), h);
    if (!r.need_more()) break;
  }
  ASSERT_TRUE(r.failed());
  EXPECT_EQ(r.error, Error::HeadTooLarge);
  EXPECT_EQ(i, 513u);
}
