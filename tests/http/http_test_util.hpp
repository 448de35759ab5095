// Helpers for the HTTP codec tests: one-shot parses, and a miniature connection
// loop (heads, bodies, pipelining) used to compare whole and split deliveries.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "ringproxy/http/http.hpp"

namespace ringproxy::http::test {

struct ReqParse {
  ParseResult r;
  RequestHead h;
};

inline ReqParse parse_req(std::string_view s, const Limits& l = {}) {
  ReqParse p;
  RequestParser parser(l);
  p.r = parser.parse(s, p.h);
  return p;
}

inline Error req_error(std::string_view s, const Limits& l = {}) {
  ReqParse p = parse_req(s, l);
  EXPECT_TRUE(p.r.failed()) << "accepted: " << s;
  return p.r.error;
}

struct RespParse {
  ParseResult r;
  ResponseHead h;
};

inline RespParse parse_resp(std::string_view s, Method m = Method::Get) {
  RespParse p;
  ResponseParser parser;
  p.r = parser.parse(s, p.h, m);
  return p;
}

// What a server saw on a connection: one entry per request, or the error that
// ended it.
struct SeenRequest {
  std::string method, target, body;
  bool keep_alive = false;
  bool operator==(const SeenRequest&) const = default;
};
struct ConnectionLog {
  std::vector<SeenRequest> requests;
  Error error = Error::None;
  bool operator==(const ConnectionLog&) const = default;
};

// Feeds `wire` to a request parser + body decoder in pieces of the given sizes
// (the last piece repeats), the way an event loop would: a receive buffer that
// keeps unconsumed bytes.
inline ConnectionLog run_connection(std::string_view wire, std::vector<std::size_t> pieces) {
  ConnectionLog log;
  RequestParser parser;
  RequestHead head;
  ChunkedDecoder dec;
  std::string inbuf;
  enum { Head, LengthBody, ChunkBody } state = Head;
  std::uint64_t left = 0;
  SeenRequest cur;
  std::size_t fed = 0, pi = 0;
  while (true) {
    // Make progress on what we have.
    bool progress = true;
    while (progress) {
      progress = false;
      if (state == Head) {
        if (inbuf.empty()) break;
        ParseResult r = parser.parse(inbuf, head);
        if (r.failed()) {
          log.error = r.error;
          return log;
        }
        if (r.need_more()) break;
        cur = {std::string(head.method_name), std::string(head.target), {}, head.keep_alive};
        inbuf.erase(0, r.consumed);
        if (head.body == BodyKind::Chunked) {
          state = ChunkBody;
          dec.reset();
        } else if (head.body == BodyKind::Length && head.content_length) {
          state = LengthBody;
          left = head.content_length;
        } else {
          log.requests.push_back(cur);
        }
        progress = true;
      } else if (state == LengthBody) {
        if (inbuf.empty()) break;
        std::size_t k = inbuf.size() < left ? inbuf.size() : static_cast<std::size_t>(left);
        cur.body.append(inbuf, 0, k);
        inbuf.erase(0, k);
        left -= k;
        if (!left) {
          log.requests.push_back(cur);
          state = Head;
        }
        progress = true;
      } else {
        if (inbuf.empty()) break;
        auto s = dec.step(inbuf);
        if (s.kind == ChunkedDecoder::Step::Failed) {
          log.error = s.error;
          return log;
        }
        if (s.kind == ChunkedDecoder::Step::Data) cur.body.append(s.data);
        inbuf.erase(0, s.consumed);
        if (s.kind == ChunkedDecoder::Step::Done) {
          log.requests.push_back(cur);
          state = Head;
        }
        progress = s.consumed > 0;
      }
    }
    if (fed == wire.size()) break;
    std::size_t n = pieces.empty() ? wire.size() : pieces[pi < pieces.size() ? pi : pieces.size() - 1];
    ++pi;
    if (n == 0) n = 1;
    n = std::min(n, wire.size() - fed);
    inbuf.append(wire.substr(fed, n));
    fed += n;
  }
  return log;
}

}  // namespace ringproxy::http::test
