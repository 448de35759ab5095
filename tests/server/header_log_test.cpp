// The head records (header_log.hpp), written into a scratch ring and read back: each
// field of a parsed request head as one ReqHeader in its received shape, a built
// backend request's field lines as BereqHeader, a serialized response head as Resp*,
// the accounting in Varnish's order, and nothing for a masked tag.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "header_log.hpp"
#include "records_test_util.hpp"
#include "ringlog/log.hpp"
#include "test_util.hpp"

namespace ringproxy {
namespace {

using ringlog::Tag;

struct Ring {
  ringlog::test::ScratchPath path{"headerlog"};
  ringlog::Log log = ringlog::Log::create(path.str());
  // The records of the one transaction written so far (Begin and End left out).
  std::vector<std::pair<Tag, std::string>> records() {
    std::vector<std::pair<Tag, std::string>> v;
    for (const auto& b : ringlog::test::read_batches(path.str()))
      for (const auto& r : b.records)
        if (r.tag != Tag::Begin && r.tag != Tag::End && r.tag != Tag::Timestamp) v.emplace_back(r.tag, r.payload);
    return v;
  }
};

using Recs = std::vector<std::pair<Tag, std::string>>;

TEST(HeaderLog, RequestHeadAsReceived) {
  std::string raw = "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nX-Odd:   spaced\r\nAccept: */*\r\n\r\n";
  http::RequestParser p;
  http::RequestHead h;
  ASSERT_FALSE(p.parse(raw, h).failed());
  Ring r;
  {
    ringlog::Txn t = r.log.begin(ringlog::TxnType::req, "rxreq");
    header_log::request(t, h);
  }
  Recs want = {{Tag::ReqMethod, "GET"},
               {Tag::ReqURL, "/a?b=1"},
               {Tag::ReqProtocol, "HTTP/1.1"},
               {Tag::ReqHeader, "Host: example.com"},
               {Tag::ReqHeader, "X-Odd: spaced"},
               {Tag::ReqHeader, "Accept: */*"}};
  EXPECT_EQ(r.records(), want);
}

TEST(HeaderLog, MaskedTagIsNotLogged) {
  std::string raw = "GET / HTTP/1.0\r\nA: 1\r\n\r\n";
  http::RequestParser p;
  http::RequestHead h;
  ASSERT_FALSE(p.parse(raw, h).failed());
  Ring r;
  r.log.set_tag_enabled(Tag::ReqHeader, false);
  {
    ringlog::Txn t = r.log.begin(ringlog::TxnType::req, "rxreq");
    header_log::request(t, h);
  }
  Recs want = {{Tag::ReqMethod, "GET"}, {Tag::ReqURL, "/"}, {Tag::ReqProtocol, "HTTP/1.0"}};
  EXPECT_EQ(r.records(), want);
}

TEST(HeaderLog, BackendRequestFieldLines) {
  std::string head = "GET /x HTTP/1.1\r\nHost: h\r\nVia: 1.1 ringproxy\r\n\r\n";
  Ring r;
  {
    ringlog::Txn t = r.log.begin(ringlog::TxnType::bereq, "fetch");
    header_log::backend_request(t, "GET", "/x", head);
  }
  Recs want = {{Tag::BereqMethod, "GET"},
               {Tag::BereqURL, "/x"},
               {Tag::BereqProtocol, "HTTP/1.1"},
               {Tag::BereqHeader, "Host: h"},
               {Tag::BereqHeader, "Via: 1.1 ringproxy"}};
  EXPECT_EQ(r.records(), want);
}

TEST(HeaderLog, BackendResponseAndClientResponse) {
  std::string raw = "HTTP/1.0 404 Gone Away\r\nContent-Length: 0\r\n\r\n";
  http::ResponseParser p;
  http::ResponseHead h;
  ASSERT_FALSE(p.parse(raw, h, http::Method::Get).failed());
  Ring r;
  {
    ringlog::Txn t = r.log.begin(ringlog::TxnType::req, "rxreq");
    header_log::backend_response(t, h);
    header_log::response_status(t, 503, "");
    std::string out = "HTTP/1.1 503 x\r\n";
    header_log::put_response_field(out, t, "Retry-After", "5");
    header_log::response_head(t, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-1/2\r\n\r\n");
    EXPECT_EQ(out, "HTTP/1.1 503 x\r\nRetry-After: 5\r\n");
  }
  Recs want = {{Tag::BerespProtocol, "HTTP/1.0"},
               {Tag::BerespStatus, "404"},
               {Tag::BerespReason, "Gone Away"},
               {Tag::BerespHeader, "Content-Length: 0"},
               {Tag::RespProtocol, "HTTP/1.1"},
               {Tag::RespStatus, "503"},
               {Tag::RespReason, "Service Unavailable"},
               {Tag::RespHeader, "Retry-After: 5"},
               {Tag::RespProtocol, "HTTP/1.1"},
               {Tag::RespStatus, "206"},
               {Tag::RespReason, "Partial Content"},
               {Tag::RespHeader, "Content-Range: bytes 0-1/2"}};
  EXPECT_EQ(r.records(), want);
}

TEST(HeaderLog, AccountingInVarnishOrder) {
  Ring r;
  {
    ringlog::Txn t = r.log.begin(ringlog::TxnType::req, "rxreq");
    header_log::request_acct(t, {.hdr_rx = 1, .body_rx = 2, .hdr_tx = 30, .body_tx = 40});
    header_log::backend_acct(t, {.hdr_rx = 5, .body_rx = 6, .hdr_tx = 70, .body_tx = 80});
  }
  Recs want = {{Tag::ReqAcct, "1 2 3 30 40 70"}, {Tag::BereqAcct, "70 80 150 5 6 11"}};
  EXPECT_EQ(r.records(), want);
}

}  // namespace
}  // namespace ringproxy
