// Direct delivery (Varnish's cache_deliver_proc.c, without an object): responses
// written into the session's client buffer. The backend's (a pass with the cache off or
// for a method the cache does not take): its head re-framed for the client, then its
// body moved from the fetch's input with back-pressure (the fetch stops reading while
// the client buffer is over its high-water mark); and the synthetic ones made here
// (errors, 417, PURGE replies). May call the session's Fetch, the header logging and
// the worker's counters; never the cache.
#include <algorithm>
#include <cstdio>

#include "header_log.hpp"
#include "ringlog/fmt.hpp"
#include "server.hpp"
#include "session.hpp"
#include "trace.hpp"
#include "worker.hpp"

namespace ringproxy {

namespace M = ringproxy::counters::main;
using ringlog::Tag;

// deliver: the client response head, from the backend's.
void Session::deliver_head() {
  Fetch& f = *fetch_;
  req_txn_.timestamp("Process");
  RP_TRACE(req_txn_, "deliver");
  std::string& o = session_scratch().head;
  o.clear();
  int status = f.beresp.status;
  std::string_view reason = f.beresp.reason;
  if (f.beresp.status == 101) {
    // Upgrade accepted by the backend: the tunnel hook takes it from here.
    if (srv_.tunnel_hook) {
      resp_status_ = 101;
      // The 101 head (with its Upgrade and Connection) goes to the client first (in o,
      // the scratch head: become_tunnel() passes it on).
      http::write_status_line(o, 101, f.beresp.reason, 1);
      for (const http::Header& h : f.beresp.headers) http::write_header(o, h.name, h.value);
      http::end_head(o);
      header_log::response_status(req_txn_, 101, f.beresp.reason);
      if (req_txn_.enabled(Tag::RespHeader))
        for (const http::Header& h : f.beresp.headers) header_log::response_field(req_txn_, h);
      become_tunnel();
      return;
    }
  }
  resp_status_ = status;
  http::write_status_line(o, status, reason, 1);
  header_log::response_status(req_txn_, status, reason);
  bool no_body = req_method_ == http::Method::Head || status == 204 || status == 304 || (status >= 100 && status < 200);
  std::uint64_t length = 0;
  bool have_length = false;
  bool kept_cl = false;
  // Not forwarded: hop-by-hop and Connection-listed fields, Via (merged below).
  const http::FieldSet drop = http::hop_by_hop_fields(f.beresp.connection) | http::field_bit(http::FieldId::Via);
  http::write_fields_if(o, f.beresp.headers, [&](const http::Header& h) {
    if ((drop & http::field_bit(h.id)) || f.beresp.connection.lists(h)) return false;
    if (h.id == http::FieldId::ContentLength) {
      // HEAD and 304 keep the origin's length; other bodies get our framing below.
      if (f.beresp.body != http::BodyKind::None || f.beresp.cl_and_te || kept_cl) return false;
      kept_cl = true;
    }
    header_log::response_field(req_txn_, h);  // the line as written ("Name: value")
    return true;
  });
  if (f.beresp.body == http::BodyKind::Length) have_length = true, length = f.beresp.content_length;
  else if (f.beresp.body == http::BodyKind::None && !kept_cl && !no_body) have_length = true, length = 0;
  std::size_t via_at = o.size();
  http::write_via(o, f.beresp.headers, f.beresp.version_minor, srv_.config().via);
  header_log::response_line(req_txn_, o, via_at);
  resp_chunked_ = false;
  if (have_length) {
    std::size_t at = o.size();
    http::write_header(o, "Content-Length", length);
    header_log::response_line(req_txn_, o, at);
  } else if (!no_body) {
    if (req_minor_ >= 1) {
      resp_chunked_ = true;
      header_log::put_response_field(o, req_txn_, "Transfer-Encoding", "chunked");
    } else {
      keep_alive_ = false;  // an HTTP/1.0 client and no length: the close ends the body
    }
  }
  if (!req_body_done_) keep_alive_ = false;  // unread request body left: close after
  if (srv_.stopping()) keep_alive_ = false;
  if (!keep_alive_) header_log::put_response_field(o, req_txn_, "Connection", "close");
  else if (req_minor_ == 0) header_log::put_response_field(o, req_txn_, "Connection", "keep-alive");
  http::end_head(o);
  client_out_.append(o);
  resp_hdr_tx_ = o.size();
  w_.counters().add(M::s_resp_hdrbytes, o.size());
  count_status(status);
  resp_stage_ = Resp::Body;
}

// Moves response body bytes from the fetch's input into the client output (a cache
// fetch's go into its object instead: store_body()).
void Session::fill_response() {
  if (fetch_ && fetch_->into) {
    store_body();
    return;
  }
  if (resp_stage_ != Resp::Body || !fetch_) return;
  Fetch& f = *fetch_;
  bool no_body = req_method_ == http::Method::Head || resp_status_ == 204 || resp_status_ == 304;
  auto emit = [&](std::string_view d) -> std::size_t {
    if (d.empty() || no_body) return d.size();
    if (resp_chunked_) {
      char h[http::kChunkHeaderMax];
      std::size_t hl = http::chunk_header(h, d.size());
      client_out_.append({h, hl});
      client_out_.append(d);
      client_out_.append(http::kChunkDataEnd);
    } else {
      client_out_.append(d);
    }
    resp_body_tx_ += d.size();
    return d.size();
  };
  if (!f.take_body(emit)) {
    fetch_cut();
    return;
  }
  if (f.body_end) {
    if (resp_chunked_ && !no_body) client_out_.append(http::kLastChunk);
    w_.counters().add(M::s_resp_bodybytes, resp_body_tx_);
    resp_stage_ = Resp::Queued;
    end_fetch(f.reusable());
  }
}

// A response made here (errors, 417...). close: the connection closes after it.
void Session::synth(int status, std::string_view why, bool close) {
  req_txn_.timestamp("Process");
  RP_TRACE(req_txn_, "synth status=%d close=%d", status, int(close));
  std::string& o = session_scratch().head;
  o.clear();
  std::string_view reason = http::reason_phrase(status);
  http::write_status_line(o, status, reason, 1);
  header_log::response_status(req_txn_, status, reason);
  char body[512];
  int bl = std::snprintf(body, sizeof body,
                         "<!DOCTYPE html>\n<html><head><title>%d %.*s</title></head>\n<body><h1>%d %.*s</h1>\n"
                         "<p>%.*s</p>\n<p>ringproxy</p></body></html>\n",
                         status, int(reason.size()), reason.data(), status, int(reason.size()), reason.data(),
                         int(std::min<std::size_t>(why.size(), 200)), why.data());
  bl = std::min(bl, int(sizeof body) - 1);
  header_log::put_response_field(o, req_txn_, "Content-Type", "text/html; charset=utf-8");
  std::size_t at = o.size();
  http::write_header(o, "Content-Length", std::uint64_t(req_method_ == http::Method::Head ? 0 : bl));
  header_log::response_line(req_txn_, o, at);
  if (close || srv_.stopping()) keep_alive_ = false;
  if (!req_body_done_) keep_alive_ = false;
  if (!keep_alive_) header_log::put_response_field(o, req_txn_, "Connection", "close");
  http::end_head(o);
  client_out_.append(o);
  resp_hdr_tx_ = o.size();
  if (req_method_ != http::Method::Head) {
    client_out_.append({body, std::size_t(bl)});
    resp_body_tx_ = std::size_t(bl);
  }
  w_.counters().add(M::s_resp_hdrbytes, resp_hdr_tx_);
  w_.counters().add(M::s_resp_bodybytes, resp_body_tx_);
  resp_status_ = status;
  count_status(status);
  resp_stage_ = Resp::Queued;
  if (!req_body_done_) {
    // The rest of the request body will not be read: the connection closes.
    req_body_done_ = true;
    client_in_.clear();
  }
}

void Session::count_status(int status) {
  if (status < 200) w_.counters().add(M::client_resp_1xx);
  else if (status < 300) w_.counters().add(M::client_resp_2xx);
  else if (status < 400) w_.counters().add(M::client_resp_3xx);
  else if (status < 500) w_.counters().add(M::client_resp_4xx);
  else w_.counters().add(M::client_resp_5xx);
}

}  // namespace ringproxy
