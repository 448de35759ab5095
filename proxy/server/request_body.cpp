// A request's body (see session.hpp): the client's input, unframed (Content-Length, or
// chunked and framed again as chunked), goes to the fetch's backend output as far as
// its high water allows; without a fetch (a response already made here) it is read and
// dropped. A broken chunked body ends the request with 400, or the session if the
// response has begun. Reads no socket: drive() calls it with what the client sent.
#include <algorithm>

#include "session.hpp"
#include "trace.hpp"
#include "worker.hpp"

namespace ringproxy {

namespace M = ringproxy::counters::main;
using ringlog::Tag;

void Session::pump_request_body() {
  if (client_in_.empty()) return;
  Fetch* f = fetch_.get();
  if (f && f->to_backend.size() >= kHighWater) return;
  Buf* dst = (f && f->state != Fetch::Done && f->state != Fetch::Failed) ? &f->to_backend : nullptr;
  if (req_body_ == http::BodyKind::Length) {
    std::size_t n = std::size_t(std::min<std::uint64_t>(req_body_left_, client_in_.size()));
    if (dst) dst->append(client_in_.view().substr(0, n));
    client_in_.consume(n);
    req_body_left_ -= n;
    req_body_rx_ += n;
    if (req_body_left_ == 0) req_body_done_ = true;
  } else if (req_body_ == http::BodyKind::Chunked) {
    while (!client_in_.empty() && !req_body_done_) {
      auto s = req_body_decoder_.step(client_in_.view());
      if (s.kind == http::ChunkedDecoder::Step::Data) {
        if (dst) {
          char h[http::kChunkHeaderMax];
          std::size_t hl = http::chunk_header(h, s.data.size());
          dst->append({h, hl});
          dst->append(s.data);
          dst->append(http::kChunkDataEnd);
        }
        req_body_rx_ += s.data.size();
      } else if (s.kind == http::ChunkedDecoder::Step::Done) {
        if (dst) dst->append(http::kLastChunk);
        req_body_done_ = true;
      } else if (s.kind == http::ChunkedDecoder::Step::Failed) {
        client_in_.consume(s.consumed);
        std::string_view why = http::error_reason(s.error);
        req_txn_.recordf(Tag::Error, "request body: %.*s", int(why.size()), why.data());
        w_.counters().add(M::client_req_400);
        RP_TRACE(req_txn_, "recv body failed");
        if (fetch_) end_fetch(false);
        req_body_done_ = true;
        close_reason_ = "RX_BAD";
        if (resp_stage_ == Resp::None) {
          synth(400, why, true);
        } else {
          close_session("RX_BAD");
        }
        return;
      }
      client_in_.consume(s.consumed);
    }
  }
  if (req_body_done_) {
    req_txn_.timestamp("ReqBody");
    w_.counters().add(M::s_req_bodybytes, req_body_rx_);
    RP_TRACE(req_txn_, "recv body done bytes=%llu", (unsigned long long)req_body_rx_);
    if (f) f->req_body_sent = true;
  }
}

}  // namespace ringproxy
