// A request's backend side (see fetch.hpp): build the backend request, pick a backend,
// connect, send, read the response head, retry, time out, account.
#include "fetch.hpp"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "header_log.hpp"
#include "ringlog/fmt.hpp"
#include "server.hpp"
#include "session.hpp"
#include "trace.hpp"
#include "worker.hpp"

namespace ringproxy {

namespace M = ringproxy::counters::main;
namespace V = ringproxy::counters::vbe;
using ringlog::Tag;

namespace {
// io_uring receives of fetch bodies complete when their span is full or after this long
// (what came in by then goes on to the client): larger pieces from a fast backend.
constexpr unsigned kRecvBatchUs = 5000;
constexpr int kPumpReads = 64;
}  // namespace

std::string build_backend_request(const http::RequestHead& h, bool cache_fetch, const Server& srv,
                                  std::string_view client_ip) {
  std::string hd;
  build_backend_request(hd, h, cache_fetch, srv, client_ip);
  return hd;
}

void build_backend_request(std::string& hd, const http::RequestHead& h, bool cache_fetch, const Server& srv,
                           std::string_view client_ip) {
  hd.clear();
  std::size_t want = h.target.size() + 256;  // request line, Via, X-Forwarded-For, framing
  for (const http::Header& x : h.headers) want += x.name.size() + x.value.size() + 4;
  hd.reserve(want);  // one allocation instead of the doublings (callgrind: 5 M of 114 M)
  http::write_request_line(hd, cache_fetch ? std::string_view("GET") : h.method_name, h.target, 1);
  const std::string& trace_hdr = srv.config().trace_header;
  using http::FieldId;
  // Not forwarded: hop-by-hop and Connection-listed fields, the client's framing and
  // Expect (ours are written below), Via and X-Forwarded-For (merged below); for a cache
  // fetch the conditionals and Range too (the object is fetched whole).
  http::FieldSet drop = http::hop_by_hop_fields(h.connection) |
                        http::field_set(FieldId::ContentLength, FieldId::Expect, FieldId::Via, FieldId::XForwardedFor);
  if (cache_fetch)
    drop |= http::field_set(FieldId::Range, FieldId::IfRange, FieldId::IfNoneMatch, FieldId::IfModifiedSince,
                            FieldId::IfMatch, FieldId::IfUnmodifiedSince);
  http::write_fields_if(hd, h.headers, [&](const http::Header& x) {
    return !(drop & http::field_bit(x.id)) && !h.connection.lists(x) &&
           (x.name.size() != trace_hdr.size() || trace_hdr.empty() || !http::iequals(x.name, trace_hdr));
  });
  // Upgrade and Connection are hop-by-hop: they go on only when a tunnel can take a 101.
  if (!cache_fetch && srv.tunnel_hook && h.connection.upgrade) {
    if (const http::Header* u = h.headers.find(FieldId::Upgrade)) {
      http::write_header(hd, "Upgrade", u->value);
      http::write_header(hd, "Connection", "upgrade");
    }
  }
  http::write_via(hd, h.headers, h.version_minor, srv.config().via);
  http::write_x_forwarded_for(hd, h.headers, client_ip);
  if (h.body == http::BodyKind::Length) http::write_header(hd, "Content-Length", h.content_length);
  else if (h.body == http::BodyKind::Chunked) http::write_header(hd, "Transfer-Encoding", "chunked");
  http::end_head(hd);
}

namespace fetch_pool {
namespace {

constexpr std::size_t kKeep = 64;      // of each kind, per thread (as many as the buffer spares)
constexpr std::size_t kKeepHead = 4096;  // a longer head's string is not kept

struct Spares {
  void* blocks[kKeep];
  std::size_t nblocks = 0;
  std::vector<http::HeaderList> fields;
  std::vector<std::string> heads;
  Spares() {
    fields.reserve(kKeep);
    heads.reserve(kKeep);
  }
  void drain() noexcept {
    for (std::size_t i = 0; i < nblocks; ++i) ::operator delete(blocks[i]);
    nblocks = 0;
    fields.clear();
    heads.clear();
  }
};
// A pointer (trivially destroyed): a Fetch freed after its worker's thread closed the
// pool, or on a thread without one, goes straight to the allocator.
thread_local Spares* spares = nullptr;

}  // namespace

void open() noexcept {
  if (!spares) spares = new (std::nothrow) Spares;
}

void close() noexcept {
  if (!spares) return;
  spares->drain();
  delete spares;
  spares = nullptr;
}

void drain() noexcept {
  if (spares) spares->drain();
}

std::string take_head() {
  std::string s;
  if (spares && !spares->heads.empty()) {
    s = std::move(spares->heads.back());
    spares->heads.pop_back();
  }
  return s;
}

}  // namespace fetch_pool

void* Fetch::operator new(std::size_t n) {
  if (fetch_pool::spares && fetch_pool::spares->nblocks > 0 && n == sizeof(Fetch))
    return fetch_pool::spares->blocks[--fetch_pool::spares->nblocks];
  return ::operator new(n);
}

void Fetch::operator delete(void* p, std::size_t n) noexcept {
  if (fetch_pool::spares && fetch_pool::spares->nblocks < fetch_pool::kKeep && n == sizeof(Fetch)) {
    fetch_pool::spares->blocks[fetch_pool::spares->nblocks++] = p;
    return;
  }
  ::operator delete(p);
}

Fetch::Fetch(Session& s, ringlog::Txn bereq_txn, delivery::ObjRef into_obj, Buf to, Buf from)
    : bereq(std::move(bereq_txn)),
      to_backend(std::move(to)),
      from_backend(std::move(from)),
      into(std::move(into_obj)),
      session_(s),
      w_(s.worker()),
      srv_(s.worker().server()),
      req_txn_(s.req_txn()) {
  to_backend.clear();
  from_backend.clear();
  if (auto* sp = fetch_pool::spares; sp && !sp->fields.empty()) {
    beresp.headers = std::move(sp->fields.back());  // (empty, with its capacity)
    sp->fields.pop_back();
  }
}

Fetch::~Fetch() {
  auto* sp = fetch_pool::spares;
  if (!sp) return;
  // (the vectors were reserved for kKeep: these push_backs do not allocate)
  if (sp->fields.size() < fetch_pool::kKeep) {
    beresp.headers.clear();
    sp->fields.push_back(std::move(beresp.headers));
  }
  if (sp->heads.size() < fetch_pool::kKeep && bereq_head_.capacity() <= fetch_pool::kKeepHead) {
    bereq_head_.clear();
    sp->heads.push_back(std::move(bereq_head_));
  }
}

void Fetch::start(std::string head, std::string_view method_name, std::string_view url, http::Method m) {
  if (bereq.enabled(Tag::Timestamp) || req_txn_.enabled(Tag::Timestamp)) {
    std::uint64_t now = bereq.now_ns();  // one instant, one clock read
    bereq.timestamp("Start", now);
    req_txn_.timestamp("Fetch", now);
  }
  method_ = m;
  bereq_head_ = std::move(head);
  header_log::backend_request(bereq, method_name, url, std::string_view(bereq_head_).substr(0, bereq_head_.size() - 2));
  to_backend.append(bereq_head_);
  pick_backend();
}

void Fetch::pick_backend() {
  Backend* be = w_.backends().pick();
  if (!be) {
    w_.counters().add(M::fetch_no_backend);
    RP_TRACE(req_txn_, "fetch -> no healthy backend");
    fail(503, "no healthy backend", M::fetch_failed);
    return;
  }
  backend = be;
  connect();
}

bool Fetch::connect() {
  bool reused = false;
  BackendConn* c = w_.backends().get(*backend, reused);
  if (!c) {
    char why[128];
    std::snprintf(why, sizeof why, "backend %s: connect: %s", backend->spec.name.c_str(), std::strerror(errno));
    w_.counters().add(M::backend_fail);
    backend->connect_failed();
    fail(503, why, M::fetch_failed);
    return false;
  }
  c->session = &session_;
  conn = c;
  reused_ = reused;
  got_response_bytes_ = false;
  w_.counters().add(M::backend_req);
  backend->count(V::req);
  if (reused) {
    bereq.timestamp("Connected");  // as Varnish: once a connection is had, new or pooled
    w_.counters().add(M::backend_reuse);
    backend->count(V::reuse);
    state = Sending;
    deadline_ = w_.now() + srv_.params().ns(first_byte_timeout);
  } else {
    state = Connecting;
    deadline_ = w_.now() + srv_.params().ns(connect_timeout);
  }
  RP_TRACE(req_txn_, "fetch -> backend %s fd=%d %s", backend->spec.name.c_str(), c->fd(),
           reused ? "reused" : "connecting");
  return true;
}

// Failed before the response head was delivered: FetchError, then the session answers
// with a synthetic error response.
void Fetch::fail(int status, const char* why, std::uint32_t counter) {
  bereq.record(Tag::FetchError, why);
  bereq.timestamp("Error");
  w_.counters().add(counter);
  if (counter != M::fetch_failed) w_.counters().add(M::fetch_failed);
  RP_TRACE(req_txn_, "fetch failed status=%d: %s", status, why);
  session_.fetch_failed(status, why);
}

void Fetch::pump() {
  BackendConn* c = conn;
  if (!c || ended_) return;
  Params& p = srv_.params();
  if (state == Connecting) {
    if (!c->can_write && !c->hup) return;
    int err = c->connect_error();
    if (err != 0) {
      char why[160];
      std::snprintf(why, sizeof why, "backend %s: connect: %s", backend->spec.name.c_str(), std::strerror(err));
      w_.counters().add(M::backend_fail);
      backend->connect_failed();
      fail(503, why, M::fetch_failed);
      return;
    }
    c->connected = true;
    bereq.timestamp("Connected");
    w_.counters().add(M::backend_conn);
    c->log_open(bereq, false);
    state = Sending;
    deadline_ = w_.now() + p.ns(first_byte_timeout);
    RP_TRACE(req_txn_, "fetch connected fd=%d", c->fd());
  } else if (state == Sending && reused_ && !got_response_bytes_ && hdr_tx == 0) {
    c->log_open(bereq, true);
  }
  if (state != Connecting) session_.fetch_connected();
  // Send what is queued for the backend.
  if (!to_backend.empty() && c->can_write) {
    std::uint64_t sent = 0;
    bool blocked = false;
    std::size_t before_hdr = hdr_tx < bereq_head_.size() ? bereq_head_.size() - hdr_tx : 0;
    bool ok = c->send(to_backend, blocked, &sent);
    session_.moved_ += sent;
    std::uint64_t h = std::min<std::uint64_t>(sent, before_hdr);
    hdr_tx += h;
    body_tx += sent - h;
    if (blocked) c->can_write = false;
    if (!ok) {
      if (can_retry()) {
        retry("fetch retry: reused connection failed on send");
        return;
      }
      char why[160];
      std::snprintf(why, sizeof why, "backend %s: write error: %s", backend->spec.name.c_str(), std::strerror(errno));
      fail(503, why, M::fetch_failed);
      return;
    }
    if (to_backend.empty() && hdr_tx >= bereq_head_.size() && state == Sending) {
      bereq.timestamp("Bereq");
      state = WaitHead;
      deadline_ = w_.now() + p.ns(first_byte_timeout);
      RP_TRACE(req_txn_, "fetch request sent");
    }
  }
  if (state == Sending && to_backend.empty() && hdr_tx >= bereq_head_.size()) {
    state = WaitHead;
    bereq.timestamp("Bereq");
  }
  if (transport_receives()) {
    receive_body(*c);
    return;
  }
  // Read the response (head, then body as the client takes it). At most kPumpReads
  // reads a call: an origin that is always ready (the demo origin) yields to the loop.
  for (int reads = 0; !ended_ && (state == WaitHead || state == Sending || (state == Body && !body_end)) &&
                      c->can_read && reads < kPumpReads;
       ++reads) {
    if (transport_receives()) {
      receive_body(*c);
      return;
    }
    if (state == Body && !into && session_.client_output_full()) break;  // back-pressure
    if (state == Body && from_backend.size() >= kHighWater) break;
    ssize_t n = c->recv(from_backend);
    if (n > 0) {
      session_.moved_ += std::uint64_t(n);
      got_response_bytes_ = true;
      if (state == Body) deadline_ = w_.now() + p.ns(between_bytes_timeout);
      if (state != Body) {
        if (!parse_head()) return;
      }
      if (state == Body) {
        session_.fetch_body();
        if (ended_) return;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c->can_read = false;
      break;
    }
    // EOF or error from the backend.
    read_ended(n < 0 ? errno : 0);
    return;
  }
}

// io_uring: a fetch body going into an object (cache fetch or pass), with nothing
// decoded left over, is received by the transport straight into the object's storage:
// no copy through from_backend, and no readiness event nor recv(2) per read. Chunked
// bodies (decoded on the way) keep the read loop; so does an origin without a socket.
bool Fetch::transport_receives() const noexcept {
  if (ended_ || !w_.uring()) return false;
  if (body_recv && body_recv->inflight) return true;
  return conn && conn->fd() >= 0 && into && state == Body && head_ready && !body_end && from_backend.empty() &&
         unstored.empty() && (beresp.body == http::BodyKind::Length || beresp.body == http::BodyKind::UntilClose);
}

bool Fetch::take_body_(std::size_t (*take)(void*, std::string_view), void* ctx) {
  switch (beresp.body) {
    case http::BodyKind::None:
    case http::BodyKind::Tunnel:
      body_end = true;
      break;
    case http::BodyKind::Length: {
      std::size_t n = std::size_t(std::min<std::uint64_t>(body_left, from_backend.size()));
      std::size_t k = take(ctx, from_backend.view().substr(0, n));
      from_backend.consume(k);
      body_left -= k;
      body_rx += k;
      if (body_left == 0) body_end = true;
      break;
    }
    case http::BodyKind::Chunked:
      while (!from_backend.empty() && !body_end) {
        auto st = body_decoder.step(from_backend.view());
        if (st.kind == http::ChunkedDecoder::Step::Failed) {
          std::string_view why = http::error_reason(st.error);
          bereq.recordf(Tag::FetchError, "backend %s: bad chunked body: %.*s", backend->spec.name.c_str(),
                        int(why.size()), why.data());
          w_.counters().add(M::fetch_failed);
          return false;
        }
        bool short_take = false;
        if (st.kind == http::ChunkedDecoder::Step::Data) {
          std::size_t k = take(ctx, st.data);
          body_rx += st.data.size();
          if (k < st.data.size()) {
            unstored.assign(st.data.substr(k));  // before consume(): st.data is in from_backend
            short_take = true;
          }
        } else if (st.kind == http::ChunkedDecoder::Step::Done) {
          body_end = true;
        }
        from_backend.consume(st.consumed);
        if (short_take) break;
      }
      break;
    case http::BodyKind::UntilClose: {
      std::size_t k = take(ctx, from_backend.view());
      body_rx += k;
      from_backend.consume(k);
      break;
    }
  }
  return true;
}

bool Fetch::reusable() const noexcept {
  return beresp.keep_alive && beresp.body != http::BodyKind::UntilClose && from_backend.empty() &&
         to_backend.empty() && req_body_sent;
}

void Fetch::receive_body(BackendConn& c) {
  if (!body_recv) {
    body_recv = std::make_unique<delivery::RecvOp>();
    body_recv->user = &session_;
    body_recv->batch_us = kRecvBatchUs;
  }
  delivery::ReadyNotify* room = session_.window_notify();
  for (int turns = 0; turns < 64 && !ended_; ++turns) {
    if (body_recv->inflight) return;
    if (body_recv->done) {
      body_recv->done = false;
      int res = body_recv->res;
      // Cut by its batch timeout with nothing in (a slow backend): the next receive
      // waits for the first byte instead, so a quiet backend costs no periodic wake-up.
      body_recv->batch_us = res == -ECANCELED ? 0 : kRecvBatchUs;
      if (res == -EINTR || res == -EAGAIN || res == -ENOBUFS || res == -ECANCELED) continue;
      if (res <= 0) {
        read_ended(-res);
        return;
      }
      std::size_t n = std::size_t(res);
      into->commit(n);
      session_.moved_ += n;
      body_rx += n;
      if (beresp.body == http::BodyKind::Length) {
        body_left -= std::min<std::uint64_t>(n, body_left);
        if (body_left == 0) body_end = true;
      }
      deadline_ = w_.now() + srv_.params().ns(between_bytes_timeout);
      if (body_end) {
        session_.fetch_body();  // finishes the object and ends the fetch
        return;
      }
      continue;
    }
    if (room) room->take();  // cleared before looking: a wake-up after this is not lost
    std::size_t want = beresp.body == http::BodyKind::Length ? std::size_t(std::min<std::uint64_t>(body_left, SIZE_MAX))
                                                             : SIZE_MAX;
    body_recv->niov = into->write_spans(body_recv->iov, delivery::RecvOp::kMaxSpans, want);
    if (body_recv->niov == 0) {
      if (into->failed()) {
        bereq.record(Tag::FetchError, "storage exhausted");
        w_.counters().add(M::fetch_failed);
        session_.end_fetch(false);
      } else if (!into->arm_space(room)) {  // a pass window is full: wait for room
        session_.drive_later();
      }
      return;
    }
    if (!c.quiet) {  // the socket's read events would only wake the loop for nothing now
      c.quiet = true;
      w_.mod_fd(c.fd(), &c, EPOLLRDHUP);
    }
    if (!w_.transport().recv(c.fd(), *body_recv)) session_.drive_later();  // no submission slot: next turn
    return;
  }
  if (!ended_) session_.drive_later();
}

// A pooled connection the backend had closed (nothing came back, no request body to
// resend): the fetch may go again, once, on a new connection.
bool Fetch::can_retry() const noexcept {
  return reused_ && !got_response_bytes_ && !retried_ && session_.request_body_untouched();
}

void Fetch::retry(const char* why) {
  (void)why;  // trace text (RP_TRACE is empty in the notrace build)
  w_.counters().add(M::backend_retry);
  RP_TRACE(req_txn_, "%s", why);
  w_.backends().release(conn, false);
  conn = nullptr;
  retried_ = true;
  to_backend.clear();
  to_backend.append(bereq_head_);
  hdr_tx = 0;
  from_backend.clear();
  resp_parser_.reset();
  connect();  // sets the state
}

// The backend's stream ended (err 0) or failed (err) before the body did.
void Fetch::read_ended(int e) {
  if (state == Body && beresp.body == http::BodyKind::UntilClose) {
    body_end = true;
    session_.fetch_body();
    return;
  }
  if (can_retry()) {
    retry("fetch retry: reused connection closed before a response");
    return;
  }
  char why[160];
  std::snprintf(why, sizeof why, "backend %s: %s %s", backend->spec.name.c_str(),
                state == Body ? "body cut short:" : "closed before a response:", e ? std::strerror(e) : "EOF");
  if (state == Body) {
    // The head went out already: nothing to do but cut the client connection.
    bereq.record(Tag::FetchError, why);
    w_.counters().add(M::fetch_failed);
    session_.fetch_cut();
    return;
  }
  fail(502, why, M::fetch_failed);
}

// The response head arrived (maybe in parts): parse, log, and hand it to the session.
// false: the fetch ended meanwhile.
bool Fetch::parse_head() {
  for (;;) {
    http::ParseResult r = resp_parser_.parse(from_backend.view(), beresp, method_);
    if (r.need_more()) return true;
    if (r.failed()) {
      std::string_view why = http::error_reason(r.error);
      char buf[200];
      std::snprintf(buf, sizeof buf, "backend %s: bad response: %.*s", backend->spec.name.c_str(), int(why.size()),
                    why.data());
      fail(502, buf, M::fetch_failed);
      return false;
    }
    hdr_rx += r.consumed;
    if (beresp.interim) {
      // 100 Continue (ours went to the client already) or another 1xx: skipped.
      from_backend.consume(r.consumed);
      continue;
    }
    bereq.timestamp("Beresp");
    header_log::backend_response(bereq, beresp);
    state = Body;
    head_ready = true;
    body_left = beresp.content_length;
    body_decoder.reset();
    deadline_ = w_.now() + srv_.params().ns(between_bytes_timeout);
    RP_TRACE(req_txn_, "fetch response status=%u body=%d", unsigned(beresp.status), int(beresp.body));
    // Consuming only moves the read offset: beresp's views stay valid for the session.
    from_backend.consume(r.consumed);
    if (beresp.body == http::BodyKind::None) body_end = true;
    session_.fetch_head();
    return !ended_;
  }
}

void Fetch::finish(bool reusable) {
  if (ended_) return;
  ended_ = true;
  if (body_recv && body_recv->inflight) {
    // The kernel still receives into the object: end that receive (shutdown) and let
    // the worker keep the operation and the object until its completion is reaped.
    reusable = false;
    if (conn && conn->fd() >= 0) ::shutdown(conn->fd(), SHUT_RDWR);
    body_recv->user = nullptr;
    w_.orphan(std::move(body_recv), into);
  }
  if (body_recv) body_recv->done = false;
  if (into && into->state() == delivery::ObjState::busy) {
    // A cache fetch that did not complete: the object is failed and unindexed (its
    // streaming readers get an error, its waiters look up again).
    srv_.cache()->fail(into);
  }
  if (conn) {
    conn->session = nullptr;
    conn->log_close(bereq, reusable);
    w_.backends().release(conn, reusable);
    conn = nullptr;
  }
  if (head_ready) {
    bereq.timestamp("BerespBody");
    bereq.record_with<20>(Tag::Length, [&](char* o) { return ringlog::format_u64(o, body_rx); });
  }
  header_log::backend_acct(bereq, {.hdr_rx = hdr_rx, .body_rx = body_rx, .hdr_tx = hdr_tx, .body_tx = body_tx});
  if (backend) {
    backend->count(V::bereq_hdrbytes, hdr_tx);
    backend->count(V::bereq_bodybytes, body_tx);
    backend->count(V::beresp_hdrbytes, hdr_rx);
    backend->count(V::beresp_bodybytes, body_rx);
  }
  bereq.end();
  w_.counters().add(M::log_txn);
}

std::uint64_t Fetch::timer() const noexcept {
  return !ended_ && deadline_ && backend && state != Done ? deadline_ : 0;
}

bool Fetch::check_timer(std::uint64_t now) {
  std::uint64_t t = timer();
  if (!t || now < t) return false;
  backend->count(V::timeouts);
  if (state == Connecting) {
    char why[160];
    std::snprintf(why, sizeof why, "backend %s: connect timeout", backend->spec.name.c_str());
    w_.counters().add(M::backend_fail);
    backend->connect_failed();
    fail(503, why, M::fetch_timeout_connect);
  } else if (state == Sending || state == WaitHead) {
    char why[160];
    std::snprintf(why, sizeof why, "backend %s: first byte timeout", backend->spec.name.c_str());
    fail(504, why, M::fetch_timeout_first_byte);
  } else if (state == Body && !body_end) {
    bereq.recordf(Tag::FetchError, "backend %s: between bytes timeout", backend->spec.name.c_str());
    w_.counters().add(M::fetch_timeout_between_bytes);
    w_.counters().add(M::fetch_failed);
    RP_TRACE(req_txn_, "fetch between bytes timeout");
    session_.fetch_cut();
  }
  return true;
}

}  // namespace ringproxy
