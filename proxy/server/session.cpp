// The session's own stages (see session.hpp): the client socket, request heads and
// their routing (tunnel, PURGE, lookup, fetch), the end of a request (keep-alive or
// close), the client-side timeouts, and the fetch's reactions.
#include "session.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "cache_request.hpp"
#include "header_log.hpp"
#include "ringlog/fmt.hpp"
#include "server.hpp"
#include "trace.hpp"
#include "worker.hpp"

namespace ringproxy {

namespace M = ringproxy::counters::main;
using ringlog::Tag;

namespace {

bool token_value(std::string_view v) {
  return v == "1" || http::iequals(v, "on") || http::iequals(v, "true") || http::iequals(v, "yes");
}

}  // namespace

SessionScratch& session_scratch() noexcept {
  thread_local SessionScratch s;
  return s;
}

AfterResponse after_response(bool keep_alive, bool client_eof, std::uint8_t minor, const char* close_reason) noexcept {
  if (keep_alive && !client_eof) return {true, nullptr};
  if (keep_alive) return {false, "REM_CLOSE"};  // the client shut its side: nothing more will come
  return {false, minor == 0 ? "REQ_HTTP10" : close_reason};
}

Session::Session(Worker& w, int fd, const SockAddr& peer, const SockAddr& local, const std::string& listener)
    : w_(w), srv_(w.server()), fd_(fd), peer_(peer), listener_(listener) {
  peer_ip_ = peer.ip();
  peer_port_ = peer.port();
  Params& p = srv_.params();
  req_parser_.set_limits({p.count(max_header_bytes), p.count(max_headers), p.count(max_url), false});
  sess_start_real_ = ringlog::realtime_ns();
  sess_start_mono_ = w.now();
  sess_txn_ = srv_.log().begin(ringlog::TxnType::sess, "HTTP/1");
  sess_txn_.timestamp("Start", sess_start_real_);
  if (sess_txn_.enabled(Tag::SessOpen))
    sess_txn_.record(Tag::SessOpen, ringlog::Line()
                                        .s(peer_ip_).sp().u(peer_port_).sp().s(listener).sp().s(local.ip()).sp()
                                        .u(local.port()).sp().f(double(sess_start_real_) / 1e9, 6).sp().i(fd)
                                        .view());
  RP_TRACE(sess_txn_, "sess open fd=%d worker=%u", fd, w.index());
  client_timer_ = Timer::Idle;
  client_deadline_ = w.now() + p.ns(timeout_idle);
}

Session::~Session() {
  if (fetch_) end_fetch(false);  // (normally ended before; frees nothing the kernel holds)
  drop_delivery();
  if (fd_ >= 0) ::close(fd_);
}

void Session::on_event(std::uint32_t ev) {
  if (fd_ < 0) return;
  if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) client_readable_ = true;
  if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) client_hup_ = true;  // read on to the EOF
  if (ev & EPOLLOUT) client_writable_ = true;
  if (ev & (EPOLLHUP | EPOLLERR)) client_writable_ = true;  // the send reports the error
  drive();
}

void Session::wake() {
  if (fd_ >= 0) drive();
  else if (detached_) drive_fetch();
}

// The state machine's pump: runs every step that can make progress now.
void Session::drive() {
  scheduled_ = false;
  for (int guard = 0; fd_ >= 0; ++guard) {
    if (guard == 64) {
      // Fairness: a long transfer yields to the other sessions and resumes on the
      // loop's next turn (its sockets may stay ready without a new edge).
      drive_later();
      return;
    }
    std::size_t in_before = client_in_.size(), out_before = client_out_.size();
    std::uint64_t moved_before = moved_;
    bool progressed = false;
    if (!req_active_ && !closing_) {
      progressed = step_head();
      if (fd_ < 0) return;
    }
    if (req_active_) {
      if (!req_body_done_) pump_request_body();
      if (fetch_) fetch_->pump();
      if (fd_ < 0) return;
      if (resp_stage_ == Resp::Body || (fetch_ && fetch_->into)) fill_response();
      if (fd_ < 0) return;
      if (resp_stage_ == Resp::Wait && object_notify_->take()) {
        // The busy object changed (its head is in, or it failed): look up again.
        RP_TRACE(req_txn_, "lookup again after waiting");
        object_->disarm(object_notify_.get());
        object_.reset();
        resp_stage_ = Resp::None;
        if (!cache_lookup(nullptr)) start_pass();
        progressed = true;
        if (fd_ < 0) return;
      }
      if (resp_stage_ == Resp::Stream && sender_) pump_sender();
      if (fd_ < 0) return;
    }
    flush_client();
    if (fd_ < 0) return;
    if (req_active_ && resp_stage_ == Resp::Queued && client_out_.empty() && req_body_done_ && !fetch_) {
      finish_request();
      progressed = true;
    } else if (req_active_ && resp_stage_ == Resp::Stream && sender_ && sender_->finished() && client_out_.empty() &&
               !fetch_) {
      finish_delivery();
      if (fd_ < 0) return;
      progressed = true;
    }
    if (closing_ && client_out_.empty()) {
      close_session(close_reason_);
      return;
    }
    // Read more from the client only when someone will consume it.
    bool want_in = !closing_ && (!req_active_ ? true : !req_body_done_) && client_in_.size() < kHighWater;
    if (want_in && client_readable_ && !client_eof_) {
      if (read_client()) progressed = true;
      if (fd_ < 0) return;
    }
    if (!progressed && client_in_.size() == in_before && client_out_.size() == out_before && moved_ == moved_before)
      break;
  }
}

// A detached session: only its cache fetch runs, until it completes or fails.
void Session::drive_fetch() {
  scheduled_ = false;
  for (int guard = 0; fetch_; ++guard) {
    if (guard == 64) {
      drive_later();
      return;
    }
    std::uint64_t before = moved_;
    fetch_->pump();
    if (fetch_) fill_response();  // into the object
    if (moved_ == before) break;
  }
  if (fetch_ && fetch_->conn && fetch_->conn->self_driven() && !scheduled_) {  // no event will come
    drive_later();
    return;
  }
  if (!fetch_) {
    detached_ = false;
    w_.retire(this);
  }
}

bool Session::read_client() {
  bool drained = false;
  ssize_t n = read_into(fd_, client_in_, kReadChunk, &drained);
  if (n > 0) {
    moved_ += std::uint64_t(n);
    if (drained && !client_hup_) client_readable_ = false;  // the next bytes raise an event
    if (!req_active_ && hdr_start_real_ == 0) {
      hdr_start_real_ = ringlog::realtime_ns();
      client_timer_ = Timer::Header;
      client_deadline_ = w_.now() + srv_.params().ns(timeout_header);
    }
    return true;
  }
  if (n == 0) {
    client_eof_ = true;
    if (!req_active_) {
      close_session(client_in_.empty() ? "REM_CLOSE" : "RX_JUNK");
    } else if (!req_body_done_) {
      // The client went away in the middle of its request body.
      close_session("RX_BODY");
    }
    return false;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    client_readable_ = false;
    if (!req_active_ && client_in_.empty()) client_in_.release();  // still idle: no buffer held
    return false;
  }
  close_session("RX_ERROR");
  return false;
}

// recv: parse the next request head from what the client sent.
bool Session::step_head() {
  if (client_in_.empty()) return false;
  http::RequestHead& head = session_scratch().req_head;
  http::ParseResult r = req_parser_.parse(client_in_.view(), head);
  if (r.need_more()) {
    if (hdr_start_real_ == 0) {
      hdr_start_real_ = ringlog::realtime_ns();
      client_timer_ = Timer::Header;
      client_deadline_ = w_.now() + srv_.params().ns(timeout_header);
    }
    return false;
  }
  if (hdr_start_real_ == 0) hdr_start_real_ = ringlog::realtime_ns();
  if (r.failed()) {
    bad_request(r.error, r.http_status);
    return true;
  }
  if (requests_ > 0 && client_timer_ != Timer::Header) w_.counters().add(M::sess_pipeline);
  start_request(head, r.consumed);
  return true;
}

void Session::begin_req_txn() {
  req_txn_ = sess_txn_.child(ringlog::TxnType::req, "rxreq");
  req_active_ = true;
  ++requests_;
  req_hdr_rx_ = req_body_rx_ = resp_hdr_tx_ = resp_body_tx_ = 0;
  resp_status_ = 0;
  resp_stage_ = Resp::None;
  req_txn_.timestamp("Start", hdr_start_real_);
  req_txn_.timestamp("Req");
  if (req_txn_.enabled(Tag::ReqStart))
    req_txn_.record(Tag::ReqStart, ringlog::Line().s(peer_ip_).sp().u(peer_port_).sp().s(listener_).view());
  client_timer_ = Timer::None;
}

void Session::bad_request(http::Error e, int status) {
  begin_req_txn();
  RP_TRACE(req_txn_, "recv failed: %.*s", int(http::error_reason(e).size()), http::error_reason(e).data());
  std::string_view why = http::error_reason(e);
  req_txn_.recordf(Tag::Error, "%.*s", int(why.size()), why.data());
  if (status == 414) w_.counters().add(M::client_req_414);
  else if (status == 431) w_.counters().add(M::client_req_431);
  else w_.counters().add(M::client_req_400);
  req_hdr_rx_ = client_in_.size();
  client_in_.clear();
  keep_alive_ = false;
  req_minor_ = 1;
  req_method_ = http::Method::Get;
  req_body_done_ = true;
  close_reason_ = status == 431 || status == 414 ? "RX_OVERFLOW" : "RX_BAD";
  synth(status, why, true);
}

// A head is complete: log it, decide what to do with it, start the fetch.
void Session::start_request(const http::RequestHead& h, std::size_t head_len) {
  begin_req_txn();
  w_.counters().add(M::client_req);
  w_.counters().add(M::s_req_hdrbytes, head_len);
  req_hdr_rx_ = head_len;
  req_method_ = h.method;
  req_minor_ = h.version_minor;
  keep_alive_ = h.keep_alive && !srv_.stopping();
  req_body_ = h.body;
  req_body_left_ = h.content_length;
  req_body_done_ = h.body == http::BodyKind::None;
  req_body_decoder_.reset();
  expect_continue_ = h.expect_continue && !req_body_done_;

  // Per-request tracing: the trace header, from a trusted address only.
  if (!srv_.config().trace_header.empty()) {
    if (const http::Header* t = h.headers.find(srv_.config().trace_header); t && srv_.trusted(peer_))
      req_txn_.set_trace(token_value(t->value));
  }
  RP_TRACE(req_txn_, "recv method=%.*s url_len=%zu headers=%zu body=%d keep_alive=%d", int(h.method_name.size()),
           h.method_name.data(), h.target.size(), h.headers.size(), int(h.body), int(keep_alive_));

  header_log::request(req_txn_, h);

  if (h.expect_unknown) {
    req_txn_.record(Tag::Error, "unsupported expectation");
    RP_TRACE(req_txn_, "recv -> synth 417");
    close_reason_ = "RX_BAD";
    client_in_.consume(head_len);
    synth(417, "Expectation Failed", !req_body_done_);
    return;
  }

  // Tunnel hook: this is where a request becomes a tunnel. CONNECT (and, once the
  // backend answered 101, an Upgrade: see deliver_head()) hands both fds and the bytes
  // already read to srv_.tunnel_hook via become_tunnel(); the session then ends here.
  if (h.method == http::Method::Connect) {
    client_in_.consume(head_len);
    if (srv_.tunnel_hook) {
      RP_TRACE(req_txn_, "recv -> tunnel CONNECT %.*s", int(h.target.size()), h.target.data());
      session_scratch().head.assign(h.target);
      become_tunnel();
      return;
    }
    req_txn_.record(Tag::Error, "CONNECT is not enabled");
    synth(501, "Not Implemented", true);
    return;
  }
  if (srv_.tunnel_hook && srv_.pipe_match && srv_.pipe_match(h.target)) {
    RP_TRACE(req_txn_, "recv -> pipe");
    session_scratch().head.clear();  // no CONNECT target: the hook pipes to a backend; client_in_ keeps the raw head
    become_tunnel();
    return;
  }

  if (srv_.cache() && h.method == http::Method::Other && h.method_name == "PURGE") {
    purge(h);
    client_in_.consume(head_len);
    return;
  }
  if (!lookup(h)) {
    client_in_.consume(head_len);  // the cache path copied what it needs
    return;
  }
  std::string head = fetch_pool::take_head();
  build_backend_request(head, h, false, srv_, peer_ip_);
  start_fetch(std::move(head), h.method_name, h.target, h.method, nullptr);
  // The head's views into client_in_ are dead from here on: the backend request is built.
  client_in_.consume(head_len);
}

// fetch: starts the request's backend side with a built request head. into: a cache
// fetch whose body goes into that object instead of to this client.
void Session::start_fetch(std::string head, std::string_view method_name, std::string_view url, http::Method m,
                          delivery::ObjRef into) {
  // Varnish's Link reasons: a fetch into nothing is a pass; into another object than
  // the one delivered, a grace refresh.
  ringlog::Txn bereq =
      req_txn_.child(ringlog::TxnType::bereq, !into ? "pass" : into != object_ ? "bgfetch" : "fetch");
  fetch_ = std::make_unique<Fetch>(*this, std::move(bereq), std::move(into), std::move(spare_to_backend_),
                                   std::move(spare_from_backend_));
  fetch_->req_body_sent = req_body_done_;
  fetch_->start(std::move(head), method_name, url, m);
}

void Session::drive_later() {
  scheduled_ = true;
  w_.schedule(this);
}

// The fetch's reactions (see fetch.hpp).
void Session::fetch_connected() {
  if (expect_continue_ && resp_stage_ == Resp::None) {
    client_out_.append("HTTP/1.1 100 Continue\r\n\r\n");
    RP_TRACE(req_txn_, "recv -> 100 Continue");
    expect_continue_ = false;
  }
}

void Session::fetch_head() {
  if (fetch_->into || fetch_->pass_object) {
    cache_fetch_head();
    if (fetch_ && fetch_->body_end) store_body();  // no body: the object is complete now
    return;
  }
  deliver_head();
}

void Session::fetch_body() { fill_response(); }

// The request body (if any is left) cannot be read past: close after the response.
void Session::fetch_failed(int status, const char* why) {
  bool background = fetch_->into && fetch_->into != object_;  // a grace refresh: the client has its (stale) object
  end_fetch(false);
  if (!background) synth(status, why, !req_body_done_);
}

void Session::fetch_cut() {
  bool into = fetch_->into != nullptr;  // a cache fetch: its readers see the object fail
  end_fetch(false);
  if (!into) close_session("TX_ERROR");
}

void Session::end_fetch(bool reusable) {
  if (!fetch_) return;
  fetch_->finish(reusable);
  // Keep the buffers for the next fetch of this session (no allocation per request).
  Fetch& f = *fetch_;
  f.from_backend.clear();
  f.to_backend.clear();
  f.from_backend.release_if_idle();
  f.to_backend.release_if_idle();
  spare_from_backend_ = std::move(f.from_backend);
  spare_to_backend_ = std::move(f.to_backend);
  ended_fetch_ = std::move(fetch_);
}

// done: everything was sent. Log the accounting, then the next request (pipelined
// bytes may already be in client_in_) or close.
void Session::finish_request() {
  req_txn_.timestamp("Resp");
  log_req_acct();
  RP_TRACE(req_txn_, "done status=%d keep_alive=%d", resp_status_, int(keep_alive_));
  req_txn_.end();
  w_.counters().add(M::log_txn);
  req_active_ = false;
  resp_stage_ = Resp::None;
  hdr_start_real_ = 0;
  req_parser_.set_limits({srv_.params().count(max_header_bytes), srv_.params().count(max_headers),
                          srv_.params().count(max_url), false});
  AfterResponse next = after_response(keep_alive_, client_eof_, req_minor_, close_reason_);
  if (!next.keep) {
    close_session(next.close_reason);
    return;
  }
  client_timer_ = Timer::Idle;
  client_deadline_ = w_.now() + srv_.params().ns(timeout_idle);
  if (!client_in_.empty()) {
    // Bytes of the next request are here already.
    hdr_start_real_ = ringlog::realtime_ns();
    client_out_.release_if_idle();
    client_in_.release_if_idle();
  } else {
    release_idle();
  }
}

// Idle between requests, nothing pipelined: the connection lets go of every buffer (as
// HAProxy's idle connections hold none) and of the session transaction's, which sends
// what it holds. The next request takes them again, from this thread's spares
// (io_buf.hpp, the transaction buffers' own cache).
void Session::release_idle() {
  client_in_.release();
  if (client_out_.empty()) client_out_.release();
  spare_to_backend_.release();
  spare_from_backend_.release();
  ended_fetch_.reset();  // finish_request() runs from drive(): none of its methods is running
  if (object_notify_ && !object_) object_notify_.reset();
  cache_req_.reset();
  sess_txn_.park();
}

void Session::log_req_acct() {
  header_log::request_acct(req_txn_, {.hdr_rx = req_hdr_rx_, .body_rx = req_body_rx_, .hdr_tx = resp_hdr_tx_,
                                      .body_tx = resp_body_tx_});
}

void Session::flush_client() {
  if (client_out_.empty() || !client_writable_) {
    if (!client_out_.empty() && client_timer_ != Timer::Send) {
      client_timer_ = Timer::Send;
      client_deadline_ = w_.now() + srv_.params().ns(timeout_send);
    }
    return;
  }
  bool blocked = false;
  std::size_t before = client_out_.size();
  if (!write_from(fd_, client_out_, blocked, &moved_)) {
    if (req_active_) req_txn_.recordf(Tag::Error, "client write: %s", std::strerror(errno));
    close_session("TX_ERROR");
    return;
  }
  if (blocked) {
    client_writable_ = false;
    watch_writes();
    if (client_timer_ != Timer::Send || client_out_.size() < before) {
      client_timer_ = Timer::Send;
      client_deadline_ = w_.now() + srv_.params().ns(timeout_send);
    }
  } else if (client_timer_ == Timer::Send) {
    client_timer_ = Timer::None;
  }
}

// A write would block: epoll must tell when the socket drains (undoes sends_quiet_).
void Session::watch_writes() {
  if (!sends_quiet_) return;
  sends_quiet_ = false;
  w_.mod_fd(fd_, this, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
}

void Session::become_tunnel() {
  watch_writes();
  TunnelHandoff t;
  t.worker = &w_;
  t.client_fd = fd_;
  // A 101: the scratch head holds its response head, not a CONNECT target.
  const std::string& scratch = session_scratch().head;
  bool upgrade = fetch_ && fetch_->conn;
  if (!upgrade) t.target = scratch;
  t.client_pending.assign(client_in_.view());
  client_in_.clear();
  t.req = &req_txn_;
  w_.del_fd(fd_);
  if (fetch_ && fetch_->conn) {
    t.backend_pending = scratch;
    t.backend_pending.append(fetch_->from_backend.view());
    w_.del_fd(fetch_->conn->fd());
    t.backend_fd = fetch_->conn->release_fd();  // owned by the tunnel now
    fetch_->conn->session = nullptr;
    w_.backends().release(fetch_->conn, false);
    fetch_->conn = nullptr;
  }
  if (fetch_) end_fetch(false);
  RP_TRACE(req_txn_, "tunnel handoff client_fd=%d backend_fd=%d", t.client_fd, t.backend_fd);
  bool taken = srv_.tunnel_hook(t);
  if (!taken) {
    if (t.backend_fd >= 0) ::close(t.backend_fd);
    ::close(t.client_fd);
  }
  // The session ends here; the tunnel logs its own accounting into req_txn_.
  fd_ = -1;
  req_txn_.end();
  req_active_ = false;
  sess_txn_.recordf(Tag::SessClose, "TX_PIPE %.3f", double(w_.now() - sess_start_mono_) / 1e9);
  sess_txn_.end();
  w_.counters().add(M::sess_closed);
  w_.counters().sub(M::sess_active);
  w_.retire(this);
}

std::uint64_t Session::next_deadline() const noexcept {
  std::uint64_t d = UINT64_MAX;
  if (fd_ < 0 && !detached_) return d;
  if (fetch_ && fetch_->timer()) d = fetch_->timer();
  if (fd_ >= 0 && client_timer_ != Timer::None) d = std::min(d, client_deadline_);
  return d;
}

void Session::check_timeouts(std::uint64_t now) {
  if (fd_ < 0 && !detached_) return;
  if (fetch_ && fetch_->check_timer(now)) {
    resume();  // the fetch failed or was cut: what it left to do (a synthetic response)
    return;
  }
  if (fd_ < 0) return;
  if (client_timer_ == Timer::None || now < client_deadline_) return;
  switch (client_timer_) {
    case Timer::Idle:
      if (!req_active_ && client_in_.empty() && client_out_.empty()) {
        w_.counters().add(M::sess_timeout_idle);
        close_session("RX_CLOSE_IDLE");
      }
      break;
    case Timer::Header:
      if (!req_active_) {
        w_.counters().add(M::sess_timeout_hdr);
        close_session("RX_TIMEOUT");
      }
      break;
    case Timer::Send:
      if (!client_out_.empty() || (sender_ && sender_->status() == delivery::Sender::Status::wait_write)) {
        w_.counters().add(M::sess_timeout_send);
        if (req_active_) req_txn_.record(Tag::Error, "send timeout");
        close_session("TX_ERROR");
      } else {
        client_timer_ = Timer::None;
      }
      break;
    case Timer::None:
      break;
  }
}

void Session::shutdown_begin() {
  if (detached_) {
    end_fetch(false);
    detached_ = false;
    w_.retire(this);
    return;
  }
  if (fd_ < 0) return;
  if (!req_active_ && client_out_.empty()) {
    // Idle (or partial head): nothing in flight to finish.
    close_session(client_in_.empty() ? "RX_CLOSE_IDLE" : "RX_TIMEOUT");
    return;
  }
  keep_alive_ = false;
}

void Session::close_session(const char* reason) {
  if (fd_ < 0) return;
  // A cache fetch outlives its client (other requests stream or wait for the object,
  // a grace refresh is for everyone): the session detaches and the fetch goes on.
  bool detach = fetch_ && fetch_->into && !fetch_->into->transient() && fetch_->state != Fetch::Done &&
                fetch_->state != Fetch::Failed && !srv_.stopping();
  if (fetch_ && !detach) end_fetch(false);
  if (sender_) resp_body_tx_ = body_sent();
  drop_delivery();
  if (req_active_) {
    // A request cut short (client gone, timeout, shutdown): still logged in full.
    req_txn_.timestamp("Resp");
    log_req_acct();
    req_txn_.end();
    req_active_ = false;
  }
  w_.del_fd(fd_);
  ::close(fd_);
  fd_ = -1;
  RP_TRACE(sess_txn_, "sess close reason=%s requests=%llu", reason, (unsigned long long)requests_);
  if (sess_txn_.enabled(Tag::SessClose))
    sess_txn_.record(Tag::SessClose,
                     ringlog::Line().s(reason).sp().f(double(w_.now() - sess_start_mono_) / 1e9, 3).view());
  sess_txn_.end();
  w_.counters().add(M::sess_closed);
  w_.counters().sub(M::sess_active);
  if (detach) {
    detached_ = true;  // retired by drive_fetch() when the fetch is over
    drive_fetch();
    return;
  }
  w_.retire(this);
}

}  // namespace ringproxy
