// The worker loop and the HTTP/1.1 session and request state machines.
//
// A client session (Client) reads request heads, and for each request runs:
//   recv -> [tunnel hook] -> lookup -> fetch (backend or demo origin) -> deliver -> done
// one request at a time, so pipelined requests are answered in order. Every step logs
// a Trace record when tracing is on (globally, or for one request from a trusted
// address). A request's backend side (Fetch) streams the request body to the backend
// and the response body back; both directions apply back-pressure through the
// buffers (no read while the other side's output is over a high-water mark).
// Never blocks: every socket is non-blocking and edge-triggered.
//
// The cache path (cache on, GET/HEAD without a body): lookup() asks the cache.
//   hit  -> deliver from the object: a delivery::Sender pulls leases through the
//           filter chain (range, gzip/gunzip, chunked) and the worker's transport
//           (writev or io_uring) sends them; a grace hit also refreshes the object
//           with a fetch of its own (the client is served the stale copy at once).
//   miss -> fetch into a busy object (GET, no conditionals, no Range); when its head is
//           in, the cache decides TTL / hit-for-pass and this client streams the object
//           like any hit while the body comes in.
//   wait -> another client is fetching the key: a one-shot notification is armed on the
//           busy object; this session holds no thread and looks up again when woken.
//   pass, hit-for-pass -> the direct path below (Fetch -> out_ with back-pressure).
#include "worker.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "ringlog/fmt.hpp"
#include "ringproxy/cache/cache.hpp"
#include "ringproxy/http/http.hpp"

#ifdef RINGPROXY_NO_TRACE
#define RP_TRACE(txn, ...) \
  do {                     \
  } while (0)
#else
// A trace point of the session state machine (used inside Client only): when tracing
// is off, one predictable branch; when on, a Trace record and MAIN.trace_records.
#define RP_TRACE(txn, ...)                                 \
  do {                                                     \
    if ((txn).tracing()) [[unlikely]] {                    \
      w_.counters().add(::ringproxy::counters::main::trace_records); \
      (txn).trace_printf(__VA_ARGS__);                     \
    }                                                      \
  } while (0)
#endif

namespace ringproxy {

namespace http = ringproxy::http;
namespace cache = ringproxy::cache;
namespace delivery = ringproxy::delivery;
namespace M = ringproxy::counters::main;
namespace V = ringproxy::counters::vbe;
using ringlog::Tag;

std::uint64_t mono_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec);
}
std::uint64_t real_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec);
}

namespace {

constexpr std::size_t kReadChunk = 32 * 1024;
constexpr std::size_t kHighWater = 256 * 1024;  // stop producing into a buffer above this
constexpr std::uint64_t kSweepNs = 20'000'000;  // timeout resolution
// io_uring receives of fetch bodies complete when their span is full or after this long
// (what came in by then goes on to the client): larger pieces from a fast backend.
constexpr unsigned kRecvBatchUs = 5000;
// Longest sleep of a loop with no timer due: bounds how late a timeout parameter
// lowered at run time (param.set) is first applied to a timer set before the change.
constexpr std::uint64_t kMaxSleepNs = 1'000'000'000;

// A byte buffer with a read and a write offset. Views into it stay valid until the
// next make_room() (which may compact or grow it).
struct Buf {
  std::unique_ptr<char[]> p;
  std::size_t cap = 0, rd = 0, wr = 0;
  Buf() = default;
  Buf(Buf&& o) noexcept : p(std::move(o.p)), cap(o.cap), rd(o.rd), wr(o.wr) { o.cap = o.rd = o.wr = 0; }
  Buf& operator=(Buf&& o) noexcept {
    p = std::move(o.p);
    cap = o.cap, rd = o.rd, wr = o.wr;
    o.cap = o.rd = o.wr = 0;
    return *this;
  }
  std::string_view view() const noexcept { return {p.get() + rd, wr - rd}; }
  std::size_t size() const noexcept { return wr - rd; }
  bool empty() const noexcept { return rd == wr; }
  void consume(std::size_t n) noexcept {
    rd += std::min(n, wr - rd);
    if (rd == wr) rd = wr = 0;
  }
  void clear() noexcept { rd = wr = 0; }
  void make_room(std::size_t n) {
    if (cap - wr >= n) return;
    if (rd > 0) {
      std::memmove(p.get(), p.get() + rd, wr - rd);
      wr -= rd;
      rd = 0;
      if (cap - wr >= n) return;
    }
    std::size_t nc = std::max<std::size_t>(cap ? cap * 2 : 16384, wr + n);
    auto np = std::make_unique_for_overwrite<char[]>(nc);  // no zero fill: bytes are written before read
    if (wr) std::memcpy(np.get(), p.get(), wr);
    p = std::move(np);
    cap = nc;
  }
  char* tail() noexcept { return p.get() + wr; }
  std::size_t room() const noexcept { return cap - wr; }
  void append(std::string_view s) {
    make_room(s.size());
    std::memcpy(p.get() + wr, s.data(), s.size());
    wr += s.size();
  }
  void release_if_idle() noexcept {
    if (empty() && cap > 64 * 1024) {
      p.reset();
      cap = rd = wr = 0;
    }
  }
};

// recv() into b; returns bytes read, 0 on EOF, -1 with errno (EAGAIN: nothing now).
ssize_t read_into(int fd, Buf& b, std::size_t want = kReadChunk) {
  b.make_room(want);
  ssize_t n;
  do n = ::recv(fd, b.tail(), b.room(), 0);
  while (n < 0 && errno == EINTR);
  if (n > 0) b.wr += std::size_t(n);
  return n;
}

// send() what b holds; returns false on a hard error (errno set). Sets `blocked`.
bool write_from(int fd, Buf& b, bool& blocked, std::uint64_t* sent) {
  blocked = false;
  while (!b.empty()) {
    ssize_t n = ::send(fd, b.p.get() + b.rd, b.size(), MSG_NOSIGNAL);
    if (n > 0) {
      b.consume(std::size_t(n));
      if (sent) *sent += std::uint64_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      blocked = true;
      return true;
    }
    return false;
  }
  return true;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// "Name: value" of a parsed field, logged from the bytes in place when the field was
// received in the usual "Name: value" shape (no copy), else formatted.
void log_header(ringlog::Txn& t, Tag tag, const http::Header& h) {
  if (!t.enabled(tag)) return;
  const char* end = h.value.data() + h.value.size();
  if (!h.value.empty() && h.value.data() == h.name.data() + h.name.size() + 2 && h.name.data()[h.name.size()] == ':' &&
      h.name.data()[h.name.size() + 1] == ' ')
    t.record(tag, std::string_view(h.name.data(), std::size_t(end - h.name.data())));
  else
    t.recordf(tag, "%.*s: %.*s", int(h.name.size()), h.name.data(), int(h.value.size()), h.value.data());
}

// Writes "name: value\r\n" to out and logs it.
void put_header(std::string& out, ringlog::Txn& t, Tag tag, std::string_view name, std::string_view value) {
  std::size_t at = out.size();
  http::write_header(out, name, value);
  t.record(tag, std::string_view(out).substr(at, out.size() - at - 2));
}

// Logs each "Name: value" field line in [from, to) of a serialized head.
void log_head_fields(ringlog::Txn& t, Tag tag, std::string_view head) {
  if (!t.enabled(tag)) return;
  std::size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos) {
    pos += 2;
    std::size_t e = head.find("\r\n", pos);
    if (e == std::string_view::npos || e == pos) break;
    t.record(tag, head.substr(pos, e - pos));
    pos = e;
  }
}

bool token_value(std::string_view v) {
  return v == "1" || http::iequals(v, "on") || http::iequals(v, "true") || http::iequals(v, "yes");
}

// The built-in demo origin: the first number in the path is the body size (k/m
// suffixes; default 1024, at most 1 GiB); "ttl=N" in the query sets max-age, a path
// with "private" or "nocache" is uncacheable, anything else is cacheable for 60 s.
struct DemoObject {
  std::uint64_t size = 1024;
  std::string cache_control = "public, max-age=60";
  int status = 200;
};
DemoObject demo_object(std::string_view target) {
  DemoObject o;
  std::string_view path = target, query;
  if (auto q = target.find('?'); q != std::string_view::npos) {
    path = target.substr(0, q);
    query = target.substr(q + 1);
  }
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] < '0' || path[i] > '9') continue;
    std::uint64_t v = 0;
    std::size_t j = i;
    while (j < path.size() && path[j] >= '0' && path[j] <= '9' && v < (1ull << 40)) v = v * 10 + std::uint64_t(path[j++] - '0');
    if (j < path.size() && (path[j] == 'k' || path[j] == 'K')) v <<= 10;
    else if (j < path.size() && (path[j] == 'm' || path[j] == 'M')) v <<= 20;
    o.size = std::min<std::uint64_t>(v, 1ull << 30);
    break;
  }
  if (path.find("private") != std::string_view::npos || path.find("nocache") != std::string_view::npos)
    o.cache_control = "private, no-store";
  if (auto t = query.find("ttl="); t != std::string_view::npos) {
    std::uint64_t v = 0;
    for (std::size_t j = t + 4; j < query.size() && query[j] >= '0' && query[j] <= '9'; ++j) v = v * 10 + std::uint64_t(query[j] - '0');
    o.cache_control = "public, max-age=" + std::to_string(v);
  }
  return o;
}

}  // namespace

// ------------------------------------------------------------------------------------
// Backend connections

class BackendConn : public Handler {
 public:
  BackendConn(Worker& w, Backend& b, int sock) : w_(w), be(b), fd(sock) {}
  ~BackendConn() override {
    if (fd >= 0) ::close(fd);
  }
  void on_event(std::uint32_t ev) override;

  Worker& w_;
  Backend& be;
  int fd;
  Client* owner = nullptr;        // the session using it; nullptr while pooled
  bool can_read = false, can_write = false, hup = false, connected = false;
  bool quiet = false;  // EPOLLIN off: the transport receives the body (io_uring)
  std::uint64_t idle_deadline = 0;
  unsigned uses = 0;
  bool retired = false;
};

// ------------------------------------------------------------------------------------
// A request's backend side.

struct Fetch {
  enum State : std::uint8_t { Connecting, Sending, WaitHead, Body, Done, Failed };
  ringlog::Txn bereq;
  Backend* be = nullptr;          // nullptr: the demo origin
  BackendConn* conn = nullptr;
  State st = Connecting;
  bool reused = false;
  bool retried = false;
  Buf out;                        // to the backend: head, then request body
  Buf in;                         // from the backend
  std::string head;               // the backend request head (kept for a retry)
  http::ResponseParser rp;
  http::ResponseHead rh;
  http::ChunkedDecoder dec;
  std::uint64_t body_left = 0;    // Length bodies
  std::uint64_t deadline = 0;
  std::uint64_t hdr_tx = 0, body_tx = 0, hdr_rx = 0, body_rx = 0;
  bool got_any = false;           // a response byte arrived on this connection
  bool body_end = false;          // response body complete
  bool req_body_sent = false;     // request body fully queued
  bool head_ready = false;        // rh is valid
  DemoObject demo;
  std::uint64_t demo_left = 0;
  http::Method method = http::Method::Get;  // of the backend request (parses the response)
  delivery::ObjRef into;                    // cache fetch: the body goes into this object
  bool pass_object = false;                 // a pass through the delivery stack: at the
                                            // head, into becomes a transient object
  std::string pending;                      // decoded body bytes the object had no room for
};

// The request as the cache sees it. A hit is looked up and planned while the parsed
// head is alive, so req views the head's bytes; a request that outlives them (miss,
// wait, grace refresh, pass) copies them first (own()). Kept by the session across
// requests, so its vectors and strings are allocated once.
struct CacheReq {
  std::string method, host, url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string fetch_head;  // backend request of a miss (GET, no conditionals, no Range)
  std::string pass_head;   // backend request as a pass
  cache::Request req;
  bool owned = false;
  void view(const http::RequestHead& h) {
    req.method = h.method_name;
    const http::Header* host_field = h.headers.find("Host");
    req.host = host_field ? host_field->value : std::string_view();
    req.url = h.target;
    req.headers.clear();
    for (const http::Header& x : h.headers) req.headers.emplace_back(x.name, x.value);
    fetch_head.clear();
    pass_head.clear();
    owned = false;
  }
  void own() {
    if (owned) return;
    method.assign(req.method);
    host.assign(req.host);
    url.assign(req.url);
    headers.resize(req.headers.size());
    for (std::size_t i = 0; i < headers.size(); ++i) {
      headers[i].first.assign(req.headers[i].first);
      headers[i].second.assign(req.headers[i].second);
    }
    req.method = method;
    req.host = host;
    req.url = url;
    for (std::size_t i = 0; i < headers.size(); ++i) req.headers[i] = {headers[i].first, headers[i].second};
    owned = true;
  }
};

double now_s() noexcept { return double(real_ns()) / 1e9; }

// ------------------------------------------------------------------------------------
// A client session.

class Client : public Handler {
 public:
  Client(Worker& w, int fd, const SockAddr& peer, const SockAddr& local, const std::string& listener);
  ~Client() override;
  void on_event(std::uint32_t ev) override;
  void check_timeouts(std::uint64_t now);
  std::uint64_t next_deadline() const noexcept;  // earliest timer check_timeouts acts on
  void shutdown_begin();  // the server is stopping
  bool idle() const noexcept { return !req_active_ && in_.empty() && out_.empty(); }
  void close_session(const char* reason);
  bool closed() const noexcept { return fd_ < 0; }
  // Closed, but its cache fetch goes on for the object's other readers (and the cache).
  bool detached() const noexcept { return detached_; }
  void resume() {
    if (fd_ >= 0) drive();
    else if (detached_) drive_fetch();
  }
  bool scheduled_ = false;
  std::uint64_t moved_ = 0;  // bytes read or written by this session's sockets (progress)
  BackendConn* backend_conn() const noexcept { return f_ ? f_->conn : nullptr; }

 private:
  void drive();
  bool read_client();
  bool step_head();
  void start_request(const http::RequestHead& h, std::size_t head_len);
  void begin_req_txn();
  void bad_request(http::Error e, int status);
  bool lookup();
  void start_fetch(const http::RequestHead& h);
  bool connect_backend();
  void fetch_fail(int status, const char* why, std::uint32_t counter);
  void fetch_backend();
  void deliver_demo();
  void pump_request_body();
  void pump_backend();
  bool transport_receives() const noexcept;
  void receive_body(BackendConn& c);
  void backend_read_end(int err);
  bool can_retry_fetch() const noexcept;
  void retry_fetch(const char* why);
  bool parse_backend_head();
  void fill_response();
  void deliver_head();
  void schedule_prefill();
  void synth(int status, std::string_view why, bool close);
  void finish_request();
  void end_fetch(bool reusable, const char* why);
  void flush_client();
  void watch_writes();
  void count_status(int status);
  void become_tunnel();
  // The cache path (see the top of this file).
  bool lookup(const http::RequestHead& h);
  bool cache_lookup(const http::RequestHead* h);
  void purge(const http::RequestHead& h);
  std::string build_bereq(const http::RequestHead& h, bool cache_fetch);
  void start_fetch_head(std::string head, std::string_view method_name, std::string_view url, http::Method m,
                        delivery::ObjRef into);
  void cache_fetch_head();
  void store_body();
  void start_delivery();
  void pump_sender();
  void finish_delivery();
  void drop_delivery();
  void drive_fetch();
  void start_pass();
  void log_req_acct();
  std::uint64_t body_sent() const noexcept;

 public:
  // The worker: an event for this session (its backend socket, a notification, or a
  // completion of its send or receive in the transport).
  void wake();
  // Peeks: the flag is taken by the step that acts on it (the wait or the Sender).
  bool notified() const noexcept {
    return (notify_ && notify_->ready.load(std::memory_order_acquire)) ||
           (space_ && space_->ready.load(std::memory_order_acquire));
  }

 private:
  Worker& w_;
  Server& srv_;
  int fd_;
  SockAddr peer_;
  std::string peer_ip_, peer_port_, listener_;
  ringlog::Txn sess_;
  std::uint64_t sess_start_real_ = 0, sess_start_mono_ = 0;
  Buf in_, out_;
  bool can_read_ = false, can_write_ = false, rd_eof_ = false, wr_err_ = false;
  bool closing_ = false;          // close once out_ is flushed
  const char* close_reason_ = "REQ_CLOSE";
  std::uint64_t deadline_ = 0;    // client-side timer (header, idle or send)
  enum class Timer : std::uint8_t { None, Idle, Header, Send } timer_ = Timer::None;
  std::uint64_t hdr_start_real_ = 0;  // first byte of the current request head
  http::RequestParser parser_;
  http::RequestHead head_;
  std::uint64_t reqs_ = 0;

  // The request in progress.
  bool req_active_ = false;
  ringlog::Txn req_;
  http::Method method_ = http::Method::Get;
  std::uint8_t minor_ = 1;
  bool keep_alive_ = true;
  http::BodyKind req_body_ = http::BodyKind::None;
  std::uint64_t req_body_left_ = 0;
  http::ChunkedDecoder req_dec_;
  bool req_body_done_ = true;
  bool expect_continue_ = false;
  bool tunnel_ = false;
  std::uint64_t req_hdr_rx_ = 0, req_body_rx_ = 0, resp_hdr_tx_ = 0, resp_body_tx_ = 0;
  int status_ = 0;
  // None: no response yet; Body: direct path, head queued, body flowing through out_;
  // Queued: everything is in out_; Wait: waiting on a busy object (cache path);
  // Stream: a Sender delivers from the cache (cache path).
  enum class Resp : std::uint8_t { None, Body, Queued, Wait, Stream } resp_ = Resp::None;
  bool resp_chunked_ = false;     // encode the body in chunks for the client
  bool resp_until_close_ = false; // HTTP/1.0 client and no length: close ends the body
  std::uint64_t resp_left_ = 0;   // Length bodies: bytes still to forward
  std::unique_ptr<Fetch> f_;
  Buf spare_in_, spare_out_;  // a finished fetch's buffers, for the next one
  std::string scratch_;
  // The cache path.
  std::unique_ptr<CacheReq> creq_;
  delivery::ObjRef obj_;                           // delivered from (hit, miss, stale)
  std::unique_ptr<delivery::ReadyNotify> notify_;  // armed on obj_ (wait, or streaming)
  std::unique_ptr<delivery::Chain> chain_;
  std::unique_ptr<delivery::Sender> sender_;
  bool watched_ = false;
  bool quiet_ = false;  // EPOLLOUT off: the transport (io_uring) sends, epoll need not watch
  std::unique_ptr<delivery::RecvOp> rop_;  // the transport's receive of a fetch body
  bool detached_ = false;
  std::unique_ptr<delivery::ReadyNotify> space_;  // a pass fetch waits for window room
  delivery::Crc32Filter* crc_ = nullptr;          // --crc32: the chain's check filter
};

// ------------------------------------------------------------------------------------

Client::Client(Worker& w, int fd, const SockAddr& peer, const SockAddr& local, const std::string& listener)
    : w_(w), srv_(w.server()), fd_(fd), peer_(peer), listener_(listener) {
  peer_ip_ = peer.ip();
  peer_port_ = std::to_string(peer.port());
  Params& p = srv_.params();
  parser_.set_limits({p.count(max_header_bytes), p.count(max_headers), p.count(max_url), false});
  sess_start_real_ = real_ns();
  sess_start_mono_ = w.now();
  sess_ = srv_.log().begin(ringlog::TxnType::sess, "HTTP/1");
  sess_.timestamp("Start", sess_start_real_);
  if (sess_.enabled(Tag::SessOpen))
    sess_.record(Tag::SessOpen, ringlog::Line()
                                    .s(peer_ip_).sp().s(peer_port_).sp().s(listener).sp().s(local.ip()).sp()
                                    .u(local.port()).sp().f(double(sess_start_real_) / 1e9, 6).sp().i(fd)
                                    .view());
  RP_TRACE(sess_, "sess open fd=%d worker=%u", fd, w.index());
  timer_ = Timer::Idle;
  deadline_ = w.now() + p.ns(timeout_idle);
}

Client::~Client() {
  if (f_) end_fetch(false, "close");  // (normally ended before; frees nothing the kernel holds)
  drop_delivery();
  if (fd_ >= 0) ::close(fd_);
}

void Client::close_session(const char* reason) {
  if (fd_ < 0) return;
  // A cache fetch outlives its client (other requests stream or wait for the object,
  // a grace refresh is for everyone): the session detaches and the fetch goes on.
  bool detach = f_ && f_->into && !f_->into->transient() && f_->st != Fetch::Done && f_->st != Fetch::Failed &&
                !srv_.stopping();
  if (f_ && !detach) end_fetch(false, "close");
  if (sender_) resp_body_tx_ = body_sent();
  drop_delivery();
  if (req_active_) {
    // A request cut short (client gone, timeout, shutdown): still logged in full.
    req_.timestamp("Resp");
    log_req_acct();
    req_.end();
    req_active_ = false;
  }
  w_.del_fd(fd_);
  ::close(fd_);
  fd_ = -1;
  RP_TRACE(sess_, "sess close reason=%s requests=%llu", reason, (unsigned long long)reqs_);
  if (sess_.enabled(Tag::SessClose))
    sess_.record(Tag::SessClose, ringlog::Line().s(reason).sp().f(double(w_.now() - sess_start_mono_) / 1e9, 3).view());
  sess_.end();
  w_.counters().add(M::sess_closed);
  w_.counters().sub(M::sess_active);
  if (detach) {
    detached_ = true;  // retired by drive_fetch() when the fetch is over
    drive_fetch();
    return;
  }
  w_.retire(this);
}

void Client::on_event(std::uint32_t ev) {
  if (fd_ < 0) return;
  if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) can_read_ = true;
  if (ev & EPOLLOUT) can_write_ = true;
  if (ev & (EPOLLHUP | EPOLLERR)) can_write_ = true;  // the send reports the error
  drive();
}

void Client::wake() {
  if (fd_ >= 0) drive();
  else if (detached_) drive_fetch();
}

// A detached session: only its cache fetch runs, until it completes or fails.
void Client::drive_fetch() {
  scheduled_ = false;
  for (int guard = 0; f_; ++guard) {
    if (guard == 64) {
      scheduled_ = true;
      w_.schedule(this);
      return;
    }
    std::uint64_t before = moved_;
    pump_backend();
    if (f_) fill_response();  // into the object
    if (moved_ == before) break;
  }
  if (f_ && !f_->be && !scheduled_) {  // the demo origin makes bytes without an event
    scheduled_ = true;
    w_.schedule(this);
    return;
  }
  if (!f_) {
    detached_ = false;
    w_.retire(this);
  }
}

// The state machine's pump: runs every step that can make progress now.
void Client::drive() {
  scheduled_ = false;
  for (int guard = 0; fd_ >= 0; ++guard) {
    if (guard == 64) {
      // Fairness: a long transfer yields to the other sessions and resumes on the
      // loop's next turn (its sockets may stay ready without a new edge).
      scheduled_ = true;
      w_.schedule(this);
      return;
    }
    std::size_t in_before = in_.size(), out_before = out_.size();
    std::uint64_t moved_before = moved_;
    bool progressed = false;
    if (!req_active_ && !closing_) {
      progressed = step_head();
      if (fd_ < 0) return;
    }
    if (req_active_) {
      if (!req_body_done_) pump_request_body();
      if (f_) pump_backend();
      if (fd_ < 0) return;
      if (resp_ == Resp::Body || (f_ && f_->into)) fill_response();
      if (fd_ < 0) return;
      if (resp_ == Resp::Wait && notify_->take()) {
        // The busy object changed (its head is in, or it failed): look up again.
        RP_TRACE(req_, "lookup again after waiting");
        obj_->disarm(notify_.get());
        obj_.reset();
        resp_ = Resp::None;
        if (!cache_lookup(nullptr)) start_pass();
        progressed = true;
        if (fd_ < 0) return;
      }
      if (resp_ == Resp::Stream && sender_) pump_sender();
      if (fd_ < 0) return;
    }
    flush_client();
    if (fd_ < 0) return;
    if (req_active_ && resp_ == Resp::Queued && out_.empty() && req_body_done_ && !f_) {
      finish_request();
      progressed = true;
    } else if (req_active_ && resp_ == Resp::Stream && sender_ && sender_->finished() && out_.empty() && !f_) {
      finish_delivery();
      if (fd_ < 0) return;
      progressed = true;
    }
    if (closing_ && out_.empty()) {
      close_session(close_reason_);
      return;
    }
    // Read more from the client only when someone will consume it.
    bool want_in = !closing_ && (!req_active_ ? true : !req_body_done_) && in_.size() < kHighWater;
    if (want_in && can_read_ && !rd_eof_) {
      if (read_client()) progressed = true;
      if (fd_ < 0) return;
    }
    if (!progressed && in_.size() == in_before && out_.size() == out_before && moved_ == moved_before) break;
  }
}

bool Client::read_client() {
  ssize_t n = read_into(fd_, in_);
  if (n > 0) {
    moved_ += std::uint64_t(n);
    if (!req_active_ && hdr_start_real_ == 0) {
      hdr_start_real_ = real_ns();
      timer_ = Timer::Header;
      deadline_ = w_.now() + srv_.params().ns(timeout_header);
    }
    return true;
  }
  if (n == 0) {
    rd_eof_ = true;
    if (!req_active_) {
      close_session(in_.empty() ? "REM_CLOSE" : "RX_JUNK");
    } else if (!req_body_done_) {
      // The client went away in the middle of its request body.
      close_session("RX_BODY");
    }
    return false;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    can_read_ = false;
    return false;
  }
  close_session("RX_ERROR");
  return false;
}

// recv: parse the next request head from what the client sent.
bool Client::step_head() {
  if (in_.empty()) return false;
  http::ParseResult r = parser_.parse(in_.view(), head_);
  if (r.need_more()) {
    if (hdr_start_real_ == 0) {
      hdr_start_real_ = real_ns();
      timer_ = Timer::Header;
      deadline_ = w_.now() + srv_.params().ns(timeout_header);
    }
    return false;
  }
  if (hdr_start_real_ == 0) hdr_start_real_ = real_ns();
  if (r.failed()) {
    bad_request(r.error, r.http_status);
    return true;
  }
  if (reqs_ > 0 && timer_ != Timer::Header) w_.counters().add(M::sess_pipeline);
  start_request(head_, r.consumed);
  return true;
}

void Client::begin_req_txn() {
  req_ = sess_.child(ringlog::TxnType::req, "rxreq");
  req_active_ = true;
  ++reqs_;
  req_hdr_rx_ = req_body_rx_ = resp_hdr_tx_ = resp_body_tx_ = 0;
  status_ = 0;
  resp_ = Resp::None;
  req_.timestamp("Start", hdr_start_real_);
  req_.timestamp("Req");
  if (req_.enabled(Tag::ReqStart))
    req_.record(Tag::ReqStart, ringlog::Line().s(peer_ip_).sp().s(peer_port_).sp().s(listener_).view());
  timer_ = Timer::None;
}

void Client::bad_request(http::Error e, int status) {
  begin_req_txn();
  RP_TRACE(req_, "recv failed: %.*s", int(http::error_reason(e).size()), http::error_reason(e).data());
  std::string_view why = http::error_reason(e);
  req_.recordf(Tag::Error, "%.*s", int(why.size()), why.data());
  if (status == 414) w_.counters().add(M::client_req_414);
  else if (status == 431) w_.counters().add(M::client_req_431);
  else w_.counters().add(M::client_req_400);
  req_hdr_rx_ = in_.size();
  in_.clear();
  keep_alive_ = false;
  minor_ = 1;
  method_ = http::Method::Get;
  req_body_done_ = true;
  close_reason_ = status == 431 || status == 414 ? "RX_OVERFLOW" : "RX_BAD";
  synth(status, why, true);
}

// A head is complete: log it, decide what to do with it, start the fetch.
void Client::start_request(const http::RequestHead& h, std::size_t head_len) {
  begin_req_txn();
  Params& p = srv_.params();
  w_.counters().add(M::client_req);
  w_.counters().add(M::s_req_hdrbytes, head_len);
  req_hdr_rx_ = head_len;
  method_ = h.method;
  minor_ = h.version_minor;
  keep_alive_ = h.keep_alive && !srv_.stopping();
  req_body_ = h.body;
  req_body_left_ = h.content_length;
  req_body_done_ = h.body == http::BodyKind::None;
  req_dec_.reset();
  expect_continue_ = h.expect_continue && !req_body_done_;
  tunnel_ = false;

  // Per-request tracing: the trace header, from a trusted address only.
  if (!srv_.config().trace_header.empty()) {
    if (const http::Header* t = h.headers.find(srv_.config().trace_header); t && srv_.trusted(peer_))
      req_.set_trace(token_value(t->value));
  }
  RP_TRACE(req_, "recv method=%.*s url_len=%zu headers=%zu body=%d keep_alive=%d", int(h.method_name.size()),
           h.method_name.data(), h.target.size(), h.headers.size(), int(h.body), int(keep_alive_));

  req_.record(Tag::ReqMethod, h.method_name);
  req_.record(Tag::ReqURL, h.target);
  req_.record(Tag::ReqProtocol, h.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1");
  if (req_.enabled(Tag::ReqHeader))
    for (const http::Header& hd : h.headers) log_header(req_, Tag::ReqHeader, hd);

  if (h.expect_unknown) {
    req_.record(Tag::Error, "unsupported expectation");
    RP_TRACE(req_, "recv -> synth 417");
    close_reason_ = "RX_BAD";
    in_.consume(head_len);
    synth(417, "Expectation Failed", !req_body_done_);
    return;
  }

  // Tunnel hook: this is where a request becomes a tunnel. CONNECT (and, once the
  // backend answered 101, an Upgrade: see deliver_head()) hands both fds and the bytes
  // already read to srv_.tunnel_hook via become_tunnel(); the session then ends here.
  if (h.method == http::Method::Connect) {
    in_.consume(head_len);
    if (srv_.tunnel_hook) {
      RP_TRACE(req_, "recv -> tunnel CONNECT %.*s", int(h.target.size()), h.target.data());
      scratch_.assign(h.target);
      become_tunnel();
      return;
    }
    req_.record(Tag::Error, "CONNECT is not enabled");
    synth(501, "Not Implemented", true);
    return;
  }
  if (srv_.tunnel_hook && srv_.pipe_match && srv_.pipe_match(h.target)) {
    RP_TRACE(req_, "recv -> pipe");
    scratch_.clear();  // no CONNECT target: the hook pipes to a backend; in_ keeps the raw head
    become_tunnel();
    return;
  }

  if (srv_.cache() && h.method == http::Method::Other && h.method_name == "PURGE") {
    purge(h);
    in_.consume(head_len);
    return;
  }
  if (!lookup(h)) {
    in_.consume(head_len);  // the cache path copied what it needs
    return;
  }
  start_fetch(h);
  // The head's views into in_ are dead from here on: the backend request is built.
  in_.consume(head_len);
  (void)p;
}

// lookup: the cache's step. Returns true for a pass (the caller fetches directly), false
// when the cache path took the request (hit, miss or wait).
bool Client::lookup(const http::RequestHead& h) {
  cache::Cache* c = srv_.cache();
  if (!c || !req_body_done_ || h.connection.upgrade ||
      (h.method != http::Method::Get && h.method != http::Method::Head)) {
    RP_TRACE(req_, "lookup -> pass (%s)", !c ? "cache off" : "method or body");
    return true;
  }
  if (!creq_) creq_ = std::make_unique<CacheReq>();
  creq_->view(h);
  if (!notify_) notify_ = std::make_unique<delivery::ReadyNotify>(w_.notify_waker());
  if (cache_lookup(&h)) return false;
  if (h.method == http::Method::Get) {
    // A GET pass goes through the delivery stack too: a transient object whose window
    // bounds the memory it holds, whatever the body size.
    creq_->own();
    creq_->pass_head = build_bereq(h, false);
    start_pass();
    return false;
  }
  return true;
}

void Client::start_pass() {
  start_fetch_head(creq_->pass_head, creq_->req.method, creq_->req.url, method_, nullptr);
  if (f_ && method_ == http::Method::Get) f_->pass_object = true;
}

// One cache lookup of creq_: false for pass / hit-for-pass (the caller fetches).
// h: the parsed head, on the first lookup (null on a lookup after a wait, by when the
// backend requests are built).
bool Client::cache_lookup(const http::RequestHead* h) {
  cache::Cache& c = *srv_.cache();
  cache::Lookup r = c.lookup(creq_->req, notify_.get(), &req_, now_s());
  auto fetch_head = [&]() -> std::string& {
    creq_->own();  // the fetch outlives the head
    if (creq_->fetch_head.empty() && h) creq_->fetch_head = build_bereq(*h, true);
    return creq_->fetch_head;
  };
  switch (r.verdict) {
    case cache::Verdict::hit:
      RP_TRACE(req_, "lookup -> hit%s", r.stale ? " (stale, refreshing)" : "");
      obj_ = std::move(r.obj);
      if (r.refresh) start_fetch_head(fetch_head(), "GET", creq_->req.url, http::Method::Get, std::move(r.refresh));
      if (fd_ >= 0) start_delivery();
      return true;
    case cache::Verdict::miss:
      RP_TRACE(req_, "lookup -> miss");
      obj_ = r.obj;
      start_fetch_head(fetch_head(), "GET", creq_->req.url, http::Method::Get, std::move(r.obj));
      return true;
    case cache::Verdict::wait:
      RP_TRACE(req_, "lookup -> wait for a busy object");
      if (h) {  // the wait ends in a hit, a miss or a pass: have every request ready
        fetch_head();
        creq_->pass_head = build_bereq(*h, false);
      }
      obj_ = std::move(r.obj);
      resp_ = Resp::Wait;
      if (!watched_) w_.watch(this), watched_ = true;
      return true;
    case cache::Verdict::hit_pass:
    case cache::Verdict::pass:
      RP_TRACE(req_, "lookup -> pass");
      return false;
  }
  return false;
}

// PURGE from a trusted address: every variant of Host + URL.
void Client::purge(const http::RequestHead& h) {
  if (!srv_.trusted(peer_)) {
    req_.record(Tag::Error, "PURGE from an untrusted address");
    synth(405, "PURGE is not allowed from this address", false);
    return;
  }
  const http::Header* host = h.headers.find("Host");
  std::size_t n = srv_.cache()->purge(host ? host->value : std::string_view(), h.target);
  char why[64];
  std::snprintf(why, sizeof why, "Purged %zu", n);
  RP_TRACE(req_, "purge -> %zu objects", n);
  synth(200, why, false);
}

// fetch: builds the backend request (or asks the demo origin) and connects.
void Client::start_fetch(const http::RequestHead& h) {
  start_fetch_head(build_bereq(h, false), h.method_name, h.target, h.method, nullptr);
}

// The backend request head for h. cache_fetch: the fetch of a cache miss, which wants
// the whole object whatever this client asked (GET, no conditionals, no Range).
std::string Client::build_bereq(const http::RequestHead& h, bool cache_fetch) {
  std::string hd;
  std::size_t want = h.target.size() + 256;  // request line, Via, X-Forwarded-For, framing
  for (const http::Header& x : h.headers) want += x.name.size() + x.value.size() + 4;
  hd.reserve(want);  // one allocation instead of the doublings (callgrind: 5 M of 114 M)
  http::write_request_line(hd, cache_fetch ? std::string_view("GET") : h.method_name, h.target, 1);
  const std::string& trace_hdr = srv_.config().trace_header;
  for (const http::Header& x : h.headers) {
    if (http::is_hop_by_hop(x.name, h.connection) || http::iequals(x.name, "Content-Length") ||
        http::iequals(x.name, "Expect") || http::iequals(x.name, "Via") || http::iequals(x.name, "X-Forwarded-For") ||
        (!trace_hdr.empty() && http::iequals(x.name, trace_hdr)))
      continue;
    if (cache_fetch && (http::iequals(x.name, "Range") || http::iequals(x.name, "If-Range") ||
                        http::iequals(x.name, "If-None-Match") || http::iequals(x.name, "If-Modified-Since") ||
                        http::iequals(x.name, "If-Match") || http::iequals(x.name, "If-Unmodified-Since")))
      continue;
    http::write_header(hd, x.name, x.value);
  }
  // Upgrade and Connection are hop-by-hop: they go on only when a tunnel can take a 101.
  if (!cache_fetch && srv_.tunnel_hook && h.connection.upgrade) {
    if (const http::Header* u = h.headers.find("Upgrade")) {
      http::write_header(hd, "Upgrade", u->value);
      http::write_header(hd, "Connection", "upgrade");
    }
  }
  http::write_via(hd, h.headers, h.version_minor, srv_.config().via);
  http::write_x_forwarded_for(hd, h.headers, peer_ip_);
  if (h.body == http::BodyKind::Length) http::write_header(hd, "Content-Length", h.content_length);
  else if (h.body == http::BodyKind::Chunked) http::write_header(hd, "Transfer-Encoding", "chunked");
  http::end_head(hd);
  return hd;
}

// Starts a backend fetch (or asks the demo origin) with a built request head. into: a
// cache fetch whose body goes into that object instead of to this client.
void Client::start_fetch_head(std::string head, std::string_view method_name, std::string_view url, http::Method m,
                              delivery::ObjRef into) {
  f_ = std::make_unique<Fetch>();
  Fetch& f = *f_;
  f.in = std::move(spare_in_);
  f.out = std::move(spare_out_);
  f.in.clear();
  f.out.clear();
  // Varnish's Link reasons: a fetch into nothing is a pass; into another object than
  // the one delivered, a grace refresh.
  f.bereq = req_.child(ringlog::TxnType::bereq, !into ? "pass" : into != obj_ ? "bgfetch" : "fetch");
  f.req_body_sent = req_body_done_;
  f.bereq.timestamp("Start");
  req_.timestamp("Fetch");
  f.rp.reset();
  f.method = m;
  f.into = std::move(into);
  f.head = std::move(head);
  const std::string& hd = f.head;
  f.bereq.record(Tag::BereqMethod, method_name);
  f.bereq.record(Tag::BereqURL, url);
  f.bereq.record(Tag::BereqProtocol, "HTTP/1.1");
  log_head_fields(f.bereq, Tag::BereqHeader, std::string_view(hd).substr(0, hd.size() - 2));

  if (!srv_.backends().empty()) {
    f.out.append(hd);
    fetch_backend();
    return;
  }
  // The built-in demo origin: the response is made here, no socket.
  f.demo = demo_object(url);
  f.demo_left = m == http::Method::Head ? 0 : f.demo.size;
  f.hdr_tx = hd.size();
  f.bereq.record(Tag::BackendOpen, "-1 demo - - - -");
  f.bereq.timestamp("Bereq");
  RP_TRACE(req_, "fetch -> demo origin size=%llu", (unsigned long long)f.demo.size);
  if (!req_body_done_) {
    // Like a real origin, the demo reads the whole request body before answering.
    if (expect_continue_) {
      out_.append("HTTP/1.1 100 Continue\r\n\r\n");
      expect_continue_ = false;
    }
    return;
  }
  deliver_demo();
}

void Client::deliver_demo() {
  Fetch& f = *f_;
  f.st = Fetch::Body;
  f.bereq.timestamp("Beresp");
  f.bereq.record(Tag::BerespProtocol, "HTTP/1.1");
  f.bereq.record(Tag::BerespStatus, ringlog::Line().i(f.demo.status).view());
  f.bereq.record(Tag::BerespReason, "OK");
  if (f.bereq.enabled(Tag::BerespHeader)) {
    f.bereq.record(Tag::BerespHeader, ringlog::Line().s("Content-Length: ").u(f.demo.size).view());
    f.bereq.record(Tag::BerespHeader, ringlog::Line().s("Cache-Control: ").s(f.demo.cache_control).view());
  }
  f.head_ready = true;
  f.req_body_sent = true;
  if (f.into || f.pass_object) {
    cache_fetch_head();
    return;
  }
  deliver_head();
}

void Client::fetch_backend() {
  Fetch& f = *f_;
  Backend* be = w_.pick_backend();
  if (!be) {
    w_.counters().add(M::fetch_no_backend);
    RP_TRACE(req_, "fetch -> no healthy backend");
    fetch_fail(503, "no healthy backend", M::fetch_failed);
    return;
  }
  f.be = be;
  connect_backend();
}

bool Client::connect_backend() {
  Fetch& f = *f_;
  bool reused = false;
  BackendConn* c = w_.get_backend_conn(*f.be, reused);
  if (!c) {
    char why[128];
    std::snprintf(why, sizeof why, "backend %s: connect: %s", f.be->spec.name.c_str(), std::strerror(errno));
    f.be->stats.add(V::fail);
    w_.counters().add(M::backend_fail);
    if (f.be->healthy.exchange(false)) f.be->stats.add(V::sick);
    fetch_fail(503, why, M::fetch_failed);
    return false;
  }
  c->owner = this;
  f.conn = c;
  f.reused = reused;
  f.got_any = false;
  w_.counters().add(M::backend_req);
  f.be->stats.add(V::req);
  if (reused) {
    f.bereq.timestamp("Connected");  // as Varnish: once a connection is had, new or pooled
    w_.counters().add(M::backend_reuse);
    f.be->stats.add(V::reuse);
    f.st = Fetch::Sending;
    f.deadline = w_.now() + srv_.params().ns(first_byte_timeout);
  } else {
    f.st = Fetch::Connecting;
    f.deadline = w_.now() + srv_.params().ns(connect_timeout);
  }
  RP_TRACE(req_, "fetch -> backend %s fd=%d %s", f.be->spec.name.c_str(), c->fd, reused ? "reused" : "connecting");
  return true;
}

// A fetch failed before the response head was delivered: FetchError, then a synthetic
// error response; the request body (if any is left) cannot be read past: close after.
void Client::fetch_fail(int status, const char* why, std::uint32_t counter) {
  Fetch& f = *f_;
  f.bereq.record(Tag::FetchError, why);
  f.bereq.timestamp("Error");
  w_.counters().add(counter);
  if (counter != M::fetch_failed) w_.counters().add(M::fetch_failed);
  RP_TRACE(req_, "fetch failed status=%d: %s", status, why);
  bool background = f.into && f.into != obj_;  // a grace refresh: the client has its (stale) object
  end_fetch(false, "error");
  if (!background) synth(status, why, !req_body_done_);
}

// Request body: client input -> backend output (or discarded for the demo origin).
void Client::pump_request_body() {
  if (in_.empty()) return;
  Fetch* f = f_.get();
  bool demo = f && !f->be;
  if (f && !demo && f->out.size() >= kHighWater) return;
  Buf* dst = (f && !demo && f->st != Fetch::Done && f->st != Fetch::Failed) ? &f->out : nullptr;
  if (req_body_ == http::BodyKind::Length) {
    std::size_t n = std::size_t(std::min<std::uint64_t>(req_body_left_, in_.size()));
    if (dst) dst->append(in_.view().substr(0, n));
    in_.consume(n);
    req_body_left_ -= n;
    req_body_rx_ += n;
    if (req_body_left_ == 0) req_body_done_ = true;
  } else if (req_body_ == http::BodyKind::Chunked) {
    while (!in_.empty() && !req_body_done_) {
      auto s = req_dec_.step(in_.view());
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
        in_.consume(s.consumed);
        std::string_view why = http::error_reason(s.error);
        req_.recordf(Tag::Error, "request body: %.*s", int(why.size()), why.data());
        w_.counters().add(M::client_req_400);
        RP_TRACE(req_, "recv body failed");
        if (f_) end_fetch(false, "error");
        req_body_done_ = true;
        close_reason_ = "RX_BAD";
        if (resp_ == Resp::None) {
          synth(400, why, true);
        } else {
          close_session("RX_BAD");
        }
        return;
      }
      in_.consume(s.consumed);
    }
  }
  if (req_body_done_) {
    req_.timestamp("ReqBody");
    w_.counters().add(M::s_req_bodybytes, req_body_rx_);
    RP_TRACE(req_, "recv body done bytes=%llu", (unsigned long long)req_body_rx_);
    if (f) f->req_body_sent = true;
    if (demo && !f->head_ready) deliver_demo();
  }
}

// The backend connection's part: connect completion, sending, reading the response.
void Client::pump_backend() {
  Fetch& f = *f_;
  if (!f.be) return;  // demo origin: fill_response() makes the body
  BackendConn* c = f.conn;
  if (!c) return;
  Params& p = srv_.params();
  if (f.st == Fetch::Connecting) {
    if (!c->can_write && !c->hup) return;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      char why[160];
      std::snprintf(why, sizeof why, "backend %s: connect: %s", f.be->spec.name.c_str(), std::strerror(err));
      f.be->stats.add(V::fail);
      w_.counters().add(M::backend_fail);
      if (f.be->healthy.exchange(false)) f.be->stats.add(V::sick);
      fetch_fail(503, why, M::fetch_failed);
      return;
    }
    c->connected = true;
    f.bereq.timestamp("Connected");
    w_.counters().add(M::backend_conn);
    SockAddr local = sockaddr_of_fd(c->fd, false);
    if (f.bereq.enabled(Tag::BackendOpen))
      f.bereq.record(Tag::BackendOpen, ringlog::Line()
                                           .i(c->fd).sp().s(f.be->spec.name).sp().s(f.be->ip).sp().u(f.be->port).sp()
                                           .s(local.ip()).sp().u(local.port())
                                           .view());
    f.st = Fetch::Sending;
    f.deadline = w_.now() + p.ns(first_byte_timeout);
    RP_TRACE(req_, "fetch connected fd=%d", c->fd);
  } else if (f.st == Fetch::Sending && f.reused && !f.got_any && f.hdr_tx == 0) {
    if (f.bereq.enabled(Tag::BackendOpen))
      f.bereq.record(Tag::BackendOpen, ringlog::Line()
                                           .i(c->fd).sp().s(f.be->spec.name).sp().s(f.be->ip).sp().u(f.be->port)
                                           .s(" reused")
                                           .view());
  }
  if (expect_continue_ && f.st != Fetch::Connecting && resp_ == Resp::None) {
    out_.append("HTTP/1.1 100 Continue\r\n\r\n");
    RP_TRACE(req_, "recv -> 100 Continue");
    expect_continue_ = false;
  }
  // Send what is queued for the backend.
  if (!f.out.empty() && c->can_write) {
    std::uint64_t sent = 0;
    bool blocked = false;
    std::size_t before_hdr = f.hdr_tx < f.head.size() ? f.head.size() - f.hdr_tx : 0;
    bool ok = write_from(c->fd, f.out, blocked, &sent);
    moved_ += sent;
    std::uint64_t h = std::min<std::uint64_t>(sent, before_hdr);
    f.hdr_tx += h;
    f.body_tx += sent - h;
    if (blocked) c->can_write = false;
    if (!ok) {
      if (can_retry_fetch()) {
        retry_fetch("fetch retry: reused connection failed on send");
        return;
      }
      char why[160];
      std::snprintf(why, sizeof why, "backend %s: write error: %s", f.be->spec.name.c_str(), std::strerror(errno));
      fetch_fail(503, why, M::fetch_failed);
      return;
    }
    if (f.out.empty() && f.hdr_tx >= f.head.size() && f.st == Fetch::Sending) {
      f.bereq.timestamp("Bereq");
      f.st = Fetch::WaitHead;
      f.deadline = w_.now() + p.ns(first_byte_timeout);
      RP_TRACE(req_, "fetch request sent");
    }
  }
  if (f.st == Fetch::Sending && f.out.empty() && f.hdr_tx >= f.head.size()) {
    f.st = Fetch::WaitHead;
    f.bereq.timestamp("Bereq");
  }
  if (transport_receives()) {
    receive_body(*c);
    return;
  }
  // Read the response (head, then body as the client takes it).
  while (f_ && (f.st == Fetch::WaitHead || f.st == Fetch::Sending || (f.st == Fetch::Body && !f.body_end)) &&
         c->can_read) {
    if (transport_receives()) {
      receive_body(*c);
      return;
    }
    if (f.st == Fetch::Body && !f.into && out_.size() >= kHighWater) break;  // back-pressure
    if (f.st == Fetch::Body && f.in.size() >= kHighWater) break;
    ssize_t n = read_into(c->fd, f.in);
    if (n > 0) {
      moved_ += std::uint64_t(n);
      f.got_any = true;
      if (f.st == Fetch::Body) f.deadline = w_.now() + p.ns(between_bytes_timeout);
      if (f.st != Fetch::Body) {
        if (!parse_backend_head()) return;
      }
      if (f.st == Fetch::Body) {
        fill_response();
        if (!f_) return;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c->can_read = false;
      break;
    }
    // EOF or error from the backend.
    backend_read_end(n < 0 ? errno : 0);
    return;
  }
}

// io_uring: a fetch body going into an object (cache fetch or pass), with nothing
// decoded left over, is received by the transport straight into the object's storage:
// no copy through f.in, and no readiness event nor recv(2) per read. Chunked bodies
// (decoded on the way) keep the read loop.
bool Client::transport_receives() const noexcept {
  if (!f_ || !w_.uring()) return false;
  const Fetch& f = *f_;
  if (rop_ && rop_->inflight) return true;
  return f.be && f.conn && f.into && f.st == Fetch::Body && f.head_ready && !f.body_end && f.in.empty() &&
         f.pending.empty() && (f.rh.body == http::BodyKind::Length || f.rh.body == http::BodyKind::UntilClose);
}

void Client::receive_body(BackendConn& c) {
  Fetch& f = *f_;
  if (!rop_) {
    rop_ = std::make_unique<delivery::RecvOp>();
    rop_->user = this;
    rop_->batch_us = kRecvBatchUs;
  }
  for (int turns = 0; turns < 64 && f_; ++turns) {
    if (rop_->inflight) return;
    if (rop_->done) {
      rop_->done = false;
      int res = rop_->res;
      // Cut by its batch timeout with nothing in (a slow backend): the next receive
      // waits for the first byte instead, so a quiet backend costs no periodic wake-up.
      rop_->batch_us = res == -ECANCELED ? 0 : kRecvBatchUs;
      if (res == -EINTR || res == -EAGAIN || res == -ENOBUFS || res == -ECANCELED) continue;
      if (res <= 0) {
        backend_read_end(-res);
        return;
      }
      std::size_t n = std::size_t(res);
      f.into->commit(n);
      moved_ += n;
      f.body_rx += n;
      if (f.rh.body == http::BodyKind::Length) {
        f.body_left -= std::min<std::uint64_t>(n, f.body_left);
        if (f.body_left == 0) f.body_end = true;
      }
      f.deadline = w_.now() + srv_.params().ns(between_bytes_timeout);
      if (f.body_end) {
        store_body();  // finishes the object and ends the fetch
        return;
      }
      continue;
    }
    if (space_) space_->take();  // cleared before looking: a wake-up after this is not lost
    std::size_t want = f.rh.body == http::BodyKind::Length ? std::size_t(std::min<std::uint64_t>(f.body_left, SIZE_MAX))
                                                           : SIZE_MAX;
    rop_->niov = f.into->write_spans(rop_->iov, delivery::RecvOp::kMaxSpans, want);
    if (rop_->niov == 0) {
      if (f.into->failed()) {
        f.bereq.record(Tag::FetchError, "storage exhausted");
        w_.counters().add(M::fetch_failed);
        end_fetch(false, "error");
      } else if (!f.into->arm_space(space_.get())) {  // a pass window is full: wait for room
        scheduled_ = true;
        w_.schedule(this);
      }
      return;
    }
    if (!c.quiet) {  // the socket's read events would only wake the loop for nothing now
      c.quiet = true;
      w_.mod_fd(c.fd, &c, EPOLLRDHUP);
    }
    if (!w_.transport().recv(c.fd, *rop_)) {
      scheduled_ = true;  // no submission slot: try again on the next turn
      w_.schedule(this);
    }
    return;
  }
  if (f_) {
    scheduled_ = true;
    w_.schedule(this);
  }
}

// A pooled connection the backend had closed (nothing came back, no request body to
// resend): the fetch may go again, once, on a new connection.
bool Client::can_retry_fetch() const noexcept {
  const Fetch& f = *f_;
  return f.reused && !f.got_any && !f.retried && req_body_rx_ == 0 && req_body_done_;
}

void Client::retry_fetch(const char* why) {
  (void)why;  // trace text (RP_TRACE is empty in the notrace build)
  Fetch& f = *f_;
  w_.counters().add(M::backend_retry);
  RP_TRACE(req_, "%s", why);
  w_.release_backend_conn(f.conn, false, "close");
  f.conn = nullptr;
  f.retried = true;
  f.out.clear();
  f.out.append(f.head);
  f.hdr_tx = 0;
  f.in.clear();
  f.rp.reset();
  connect_backend();  // sets the state
}

// The backend's stream ended (err 0) or failed (err) before the body did.
void Client::backend_read_end(int e) {
  Fetch& f = *f_;
  if (f.st == Fetch::Body && f.rh.body == http::BodyKind::UntilClose) {
    f.body_end = true;
    fill_response();
    return;
  }
  if (can_retry_fetch()) {
    retry_fetch("fetch retry: reused connection closed before a response");
    return;
  }
  char why[160];
  std::snprintf(why, sizeof why, "backend %s: %s %s", f.be->spec.name.c_str(),
                f.st == Fetch::Body ? "body cut short:" : "closed before a response:",
                e ? std::strerror(e) : "EOF");
  if (f.st == Fetch::Body) {
    // The head went out already: nothing to do but cut the client connection.
    f.bereq.record(Tag::FetchError, why);
    w_.counters().add(M::fetch_failed);
    bool into = f.into != nullptr;  // a cache fetch: its readers see the object fail
    end_fetch(false, "error");
    if (!into) close_session("TX_ERROR");
    return;
  }
  fetch_fail(502, why, M::fetch_failed);
}

// The response head arrived (maybe in parts): parse, log, and start delivery.
bool Client::parse_backend_head() {
  Fetch& f = *f_;
  for (;;) {
    http::ParseResult r = f.rp.parse(f.in.view(), f.rh, f.method);
    if (r.need_more()) return true;
    if (r.failed()) {
      std::string_view why = http::error_reason(r.error);
      char buf[200];
      std::snprintf(buf, sizeof buf, "backend %s: bad response: %.*s", f.be->spec.name.c_str(), int(why.size()), why.data());
      fetch_fail(502, buf, M::fetch_failed);
      return false;
    }
    f.hdr_rx += r.consumed;
    if (f.rh.interim && f.rh.status == 100) {
      // 100 Continue from the backend: ours went to the client already.
      f.in.consume(r.consumed);
      continue;
    }
    if (f.rh.interim) {
      f.in.consume(r.consumed);
      continue;
    }
    f.bereq.timestamp("Beresp");
    f.bereq.record(Tag::BerespProtocol, f.rh.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1");
    f.bereq.record(Tag::BerespStatus, ringlog::Line().u(f.rh.status).view());
    f.bereq.record(Tag::BerespReason, f.rh.reason);
    if (f.bereq.enabled(Tag::BerespHeader))
      for (const http::Header& h : f.rh.headers) log_header(f.bereq, Tag::BerespHeader, h);
    f.st = Fetch::Body;
    f.head_ready = true;
    f.body_left = f.rh.content_length;
    f.dec.reset();
    f.deadline = w_.now() + srv_.params().ns(between_bytes_timeout);
    RP_TRACE(req_, "fetch response status=%u body=%d", unsigned(f.rh.status), int(f.rh.body));
    // Consuming only moves the read offset: rh's views stay valid for deliver_head().
    f.in.consume(r.consumed);
    if (f.rh.body == http::BodyKind::None) f.body_end = true;
    if (f.into || f.pass_object) {
      cache_fetch_head();
      if (f_ && f.body_end) store_body();  // no body: the object is complete now
      return f_ != nullptr;
    }
    deliver_head();
    return f_ != nullptr;
  }
}

// deliver: the client response head, from the backend's (or the demo origin's).
void Client::deliver_head() {
  Fetch& f = *f_;
  req_.timestamp("Process");
  RP_TRACE(req_, "deliver");
  std::string& o = scratch_;
  o.clear();
  int status = f.be ? f.rh.status : f.demo.status;
  std::string_view reason = f.be ? f.rh.reason : std::string_view("OK");
  if (f.be && f.rh.status == 101) {
    // Upgrade accepted by the backend: the tunnel hook takes it from here.
    if (srv_.tunnel_hook) {
      status_ = 101;
      // The 101 head (with its Upgrade and Connection) goes to the client first (in o,
      // which is scratch_: become_tunnel() passes it on).
      http::write_status_line(o, 101, f.rh.reason, 1);
      for (const http::Header& h : f.rh.headers) http::write_header(o, h.name, h.value);
      http::end_head(o);
      req_.record(Tag::RespProtocol, "HTTP/1.1");
      req_.record(Tag::RespStatus, "101");
      req_.record(Tag::RespReason, f.rh.reason.empty() ? http::reason_phrase(101) : f.rh.reason);
      if (req_.enabled(Tag::RespHeader))
        for (const http::Header& h : f.rh.headers) log_header(req_, Tag::RespHeader, h);
      become_tunnel();
      return;
    }
  }
  status_ = status;
  http::write_status_line(o, status, reason, 1);
  req_.record(Tag::RespProtocol, "HTTP/1.1");
  req_.record(Tag::RespStatus, ringlog::Line().i(status).view());
  req_.record(Tag::RespReason, reason.empty() ? http::reason_phrase(status) : reason);
  bool no_body = method_ == http::Method::Head || status == 204 || status == 304 || (status >= 100 && status < 200);
  std::uint64_t length = 0;
  bool have_length = false;
  if (f.be) {
    bool kept_cl = false;
    for (const http::Header& h : f.rh.headers) {
      if (http::is_hop_by_hop(h.name, f.rh.connection) || http::iequals(h.name, "Via")) continue;
      if (http::iequals(h.name, "Content-Length")) {
        // HEAD and 304 keep the origin's length; other bodies get our framing below.
        if (f.rh.body != http::BodyKind::None || f.rh.cl_and_te || kept_cl) continue;
        kept_cl = true;
      }
      std::size_t at = o.size();
      http::write_header(o, h.name, h.value);
      req_.record(Tag::RespHeader, std::string_view(o).substr(at, o.size() - at - 2));
    }
    if (f.rh.body == http::BodyKind::Length) have_length = true, length = f.rh.content_length;
    else if (f.rh.body == http::BodyKind::None && !kept_cl && !no_body) have_length = true, length = 0;
    std::size_t at = o.size();
    http::write_via(o, f.rh.headers, f.rh.version_minor, srv_.config().via);
    req_.record(Tag::RespHeader, std::string_view(o).substr(at, o.size() - at - 2));
  } else {
    put_header(o, req_, Tag::RespHeader, "Cache-Control", f.demo.cache_control);
    put_header(o, req_, Tag::RespHeader, "Content-Type", "application/octet-stream");
    char via[64];
    std::snprintf(via, sizeof via, "1.1 %s", srv_.config().via.c_str());
    put_header(o, req_, Tag::RespHeader, "Via", via);
    have_length = true;
    length = f.demo.size;
  }
  resp_chunked_ = resp_until_close_ = false;
  if (have_length) {
    std::size_t at = o.size();
    http::write_header(o, "Content-Length", length);
    req_.record(Tag::RespHeader, std::string_view(o).substr(at, o.size() - at - 2));
    resp_left_ = no_body ? 0 : length;
  } else if (!no_body) {
    if (minor_ >= 1) {
      resp_chunked_ = true;
      put_header(o, req_, Tag::RespHeader, "Transfer-Encoding", "chunked");
    } else {
      resp_until_close_ = true;
      keep_alive_ = false;
    }
  }
  if (!req_body_done_) keep_alive_ = false;  // unread request body left: close after
  if (srv_.stopping()) keep_alive_ = false;
  if (!keep_alive_) put_header(o, req_, Tag::RespHeader, "Connection", "close");
  else if (minor_ == 0) put_header(o, req_, Tag::RespHeader, "Connection", "keep-alive");
  http::end_head(o);
  out_.append(o);
  resp_hdr_tx_ = o.size();
  w_.counters().add(M::s_resp_hdrbytes, o.size());
  count_status(status);
  resp_ = Resp::Body;
  if (no_body) {
    // A bodiless response: the backend's body (none) is complete with the head.
    resp_left_ = 0;
  }
}

// Pulls response body bytes from the source (backend input or the demo origin) into
// the client output, up to the high-water mark.
void Client::fill_response() {
  if (f_ && f_->into) {
    store_body();
    return;
  }
  if (resp_ != Resp::Body || !f_) return;
  Fetch& f = *f_;
  bool no_body = method_ == http::Method::Head || status_ == 204 || status_ == 304;
  if (!f.be) {
    while (f.demo_left > 0 && out_.size() < kHighWater) {
      static const std::string pattern = [] {
        std::string s;
        for (int i = 0; i < 64 * 1024; ++i) s += char('a' + (i % 26));
        return s;
      }();
      std::size_t n = std::size_t(std::min<std::uint64_t>(f.demo_left, 64 * 1024));
      out_.append(std::string_view(pattern).substr(0, n));
      f.demo_left -= n;
      resp_body_tx_ += n;
      f.body_rx += n;
    }
    if (f.demo_left == 0) f.body_end = true;
  } else {
    auto emit = [&](std::string_view d) {
      if (d.empty() || no_body) return;
      if (resp_chunked_) {
        char h[http::kChunkHeaderMax];
        std::size_t hl = http::chunk_header(h, d.size());
        out_.append({h, hl});
        out_.append(d);
        out_.append(http::kChunkDataEnd);
      } else {
        out_.append(d);
      }
      resp_body_tx_ += d.size();
    };
    switch (f.rh.body) {
      case http::BodyKind::None:
      case http::BodyKind::Tunnel:
        f.body_end = true;
        break;
      case http::BodyKind::Length: {
        std::size_t n = std::size_t(std::min<std::uint64_t>(f.body_left, f.in.size()));
        emit(f.in.view().substr(0, n));
        f.in.consume(n);
        f.body_left -= n;
        f.body_rx += n;
        if (f.body_left == 0) f.body_end = true;
        break;
      }
      case http::BodyKind::Chunked:
        while (!f.in.empty() && !f.body_end) {
          auto s = f.dec.step(f.in.view());
          if (s.kind == http::ChunkedDecoder::Step::Data) {
            emit(s.data);
            f.body_rx += s.data.size();
          } else if (s.kind == http::ChunkedDecoder::Step::Done) {
            f.body_end = true;
          } else if (s.kind == http::ChunkedDecoder::Step::Failed) {
            std::string_view why = http::error_reason(s.error);
            f.bereq.recordf(Tag::FetchError, "backend %s: bad chunked body: %.*s", f.be->spec.name.c_str(), int(why.size()),
                            why.data());
            w_.counters().add(M::fetch_failed);
            end_fetch(false, "error");
            close_session("TX_ERROR");
            return;
          }
          f.in.consume(s.consumed);
        }
        break;
      case http::BodyKind::UntilClose:
        emit(f.in.view());
        f.body_rx += f.in.size();
        f.in.clear();
        break;
    }
  }
  if (f.body_end) {
    if (resp_chunked_ && !no_body) out_.append(http::kLastChunk);
    w_.counters().add(M::s_resp_bodybytes, resp_body_tx_);
    resp_ = Resp::Queued;
    bool reusable = f.be && f.rh.keep_alive && f.rh.body != http::BodyKind::UntilClose && f.in.empty() &&
                    f.out.empty() && f.req_body_sent;
    end_fetch(reusable, "recycle");
  }
}

void Client::end_fetch(bool reusable, const char* why) {
  if (!f_) return;
  Fetch& f = *f_;
  if (rop_ && rop_->inflight) {
    // The kernel still receives into the object: end that receive (shutdown) and let
    // the worker keep the operation and the object until its completion is reaped.
    reusable = false;
    if (f.conn && f.conn->fd >= 0) ::shutdown(f.conn->fd, SHUT_RDWR);
    rop_->user = nullptr;
    w_.orphan(std::move(rop_), f.into);
  }
  if (rop_) rop_->done = false;
  if (f.into && f.into->state() == delivery::ObjState::busy) {
    // A cache fetch that did not complete: the object is failed and unindexed (its
    // streaming readers get an error, its waiters look up again).
    srv_.cache()->fail(f.into);
  }
  if (f.conn) {
    f.conn->owner = nullptr;
    if (f.bereq.enabled(Tag::BackendClose))
      f.bereq.record(Tag::BackendClose, ringlog::Line()
                                            .i(f.conn->fd).sp().s(f.be->spec.name).sp().s(reusable ? "recycle" : "close")
                                            .view());
    w_.release_backend_conn(f.conn, reusable, why);
    f.conn = nullptr;
  }
  if (f.head_ready) {
    f.bereq.timestamp("BerespBody");
    if (f.bereq.enabled(Tag::Length)) f.bereq.record(Tag::Length, ringlog::Line().u(f.body_rx).view());
  }
  if (f.bereq.enabled(Tag::BereqAcct))
    f.bereq.record(Tag::BereqAcct, ringlog::Line()
                                       .u(f.hdr_tx).sp().u(f.body_tx).sp().u(f.hdr_tx + f.body_tx).sp()
                                       .u(f.hdr_rx).sp().u(f.body_rx).sp().u(f.hdr_rx + f.body_rx)
                                       .view());
  if (f.be) {
    f.be->stats.add(V::bereq_hdrbytes, f.hdr_tx);
    f.be->stats.add(V::bereq_bodybytes, f.body_tx);
    f.be->stats.add(V::beresp_hdrbytes, f.hdr_rx);
    f.be->stats.add(V::beresp_bodybytes, f.body_rx);
  }
  f.bereq.end();
  w_.counters().add(M::log_txn);
  // Keep the buffers for the next fetch of this session (no allocation per request).
  f.in.clear();
  f.out.clear();
  f.in.release_if_idle();
  f.out.release_if_idle();
  spare_in_ = std::move(f.in);
  spare_out_ = std::move(f.out);
  f_.reset();
}

// ------------------------------------------------------------------------------------
// The cache path: fetch into an object, deliver from it.

// A cache fetch's response head is in: the cache decides (TTL, hit-for-pass), stores
// the head and wakes the waiters; the client that fetched streams the object.
void Client::cache_fetch_head() {
  Fetch& f = *f_;
  cache::Response resp;
  if (f.be) {
    resp.status = f.rh.status;
    resp.reason.assign(f.rh.reason.empty() ? http::reason_phrase(f.rh.status) : f.rh.reason);
    resp.headers.reserve(f.rh.headers.size() + 1);
    for (const http::Header& h : f.rh.headers) {
      if (http::is_hop_by_hop(h.name, f.rh.connection)) continue;
      resp.headers.emplace_back(std::string(h.name), std::string(h.value));
    }
    std::string via;
    http::write_via(via, f.rh.headers, f.rh.version_minor, srv_.config().via);
    // write_via made "Via: ...\r\n" with the backend's Via folded in: store its value.
    for (auto it = resp.headers.begin(); it != resp.headers.end();)
      it = http::iequals(it->first, "Via") ? resp.headers.erase(it) : it + 1;
    if (via.size() > 7) resp.headers.emplace_back("Via", via.substr(5, via.size() - 7));
  } else {
    resp.status = f.demo.status;
    resp.reason = "OK";
    resp.headers = {{"Content-Length", std::to_string(f.demo.size)},
                    {"Cache-Control", f.demo.cache_control},
                    {"Content-Type", "application/octet-stream"},
                    {"Via", "1.1 " + srv_.config().via}};
  }
  if (f.pass_object) {
    f.into = srv_.cache()->pass_object(resp, &f.bereq);
    obj_ = f.into;
    if (!space_) space_ = std::make_unique<delivery::ReadyNotify>(w_.notify_waker());
    RP_TRACE(req_, "fetch head: pass through a transient object status=%d", resp.status);
    start_delivery();
    return;
  }
  if (!f.be) f.into->set_size_hint(f.demo.size);
  else if (f.rh.body == http::BodyKind::Length) f.into->set_size_hint(f.rh.content_length);
  srv_.cache()->headers(f.into, creq_->req, resp, now_s(), &f.bereq);
  RP_TRACE(req_, "fetch head stored status=%d", resp.status);
  if (f.into == obj_ && resp_ == Resp::None) start_delivery();
}

// Moves the fetched body into the object (cache fetch): no back-pressure from clients,
// the object is in storage; the demo origin's bytes are made a slice per call. A pass
// object's window can be full: the rest waits (in f.in, or decoded in f.pending) and a
// notification is armed for when its reader frees room.
void Client::store_body() {
  Fetch& f = *f_;
  if (!f.head_ready || !f.into) return;
  if (space_) space_->take();
  bool ok = true, full = false;
  auto put = [&](std::string_view d) -> std::size_t {
    std::size_t taken = 0;
    while (taken < d.size()) {
      ssize_t n = f.into->append(d.data() + taken, d.size() - taken);
      if (n < 0) {
        ok = false;
        break;
      }
      if (n == 0) {
        full = true;
        break;
      }
      taken += std::size_t(n);
    }
    moved_ += taken;
    return taken;
  };
  if (!f.pending.empty()) {
    f.pending.erase(0, put(f.pending));
  }
  if (!f.pending.empty() || !ok) {
    // still no room (or failed): nothing more now
  } else if (!f.be) {
    static const std::string pattern = [] {
      std::string s;
      for (int i = 0; i < 64 * 1024; ++i) s += char('a' + (i % 26));
      return s;
    }();
    for (int i = 0; i < 16 && f.demo_left > 0 && ok && !full; ++i) {
      std::size_t n = std::size_t(std::min<std::uint64_t>(f.demo_left, pattern.size()));
      std::size_t k = put(std::string_view(pattern).substr(0, n));
      f.demo_left -= k;
      f.body_rx += k;
    }
    if (f.demo_left == 0) f.body_end = true;
  } else {
    switch (f.rh.body) {
      case http::BodyKind::None:
      case http::BodyKind::Tunnel:
        f.body_end = true;
        break;
      case http::BodyKind::Length: {
        std::size_t n = std::size_t(std::min<std::uint64_t>(f.body_left, f.in.size()));
        std::size_t k = put(f.in.view().substr(0, n));
        f.in.consume(k);
        f.body_left -= k;
        f.body_rx += k;
        if (f.body_left == 0) f.body_end = true;
        break;
      }
      case http::BodyKind::Chunked:
        while (!f.in.empty() && !f.body_end && ok && !full) {
          auto st = f.dec.step(f.in.view());
          if (st.kind == http::ChunkedDecoder::Step::Data) {
            std::size_t k = put(st.data);
            f.body_rx += st.data.size();
            if (k < st.data.size()) f.pending.assign(st.data.substr(k));
          } else if (st.kind == http::ChunkedDecoder::Step::Done) {
            f.body_end = true;
          } else if (st.kind == http::ChunkedDecoder::Step::Failed) {
            std::string_view why = http::error_reason(st.error);
            f.bereq.recordf(Tag::FetchError, "backend %s: bad chunked body: %.*s", f.be->spec.name.c_str(),
                            int(why.size()), why.data());
            w_.counters().add(M::fetch_failed);
            end_fetch(false, "error");  // fails the object: its readers get an error
            return;
          }
          f.in.consume(st.consumed);
        }
        break;
      case http::BodyKind::UntilClose: {
        std::size_t k = put(f.in.view());
        f.body_rx += k;
        f.in.consume(k);
        break;
      }
    }
  }
  if (!ok) {
    f.bereq.record(Tag::FetchError, "storage exhausted");
    w_.counters().add(M::fetch_failed);
    end_fetch(false, "error");
    return;
  }
  if (full || !f.pending.empty()) {
    // The pass window is full: go on when the reader has freed room (or at once if it
    // already has). Reading from the backend stops at the input buffer's high water.
    if (!f.into->arm_space(space_.get())) {
      scheduled_ = true;
      w_.schedule(this);
    }
    return;
  }
  if (f.body_end && f.pending.empty()) {
    if (f.into->transient()) f.into->finish();
    else srv_.cache()->finish(f.into);
    bool reusable = f.be && f.rh.keep_alive && f.rh.body != http::BodyKind::UntilClose && f.in.empty() &&
                    f.out.empty() && f.req_body_sent;
    RP_TRACE(req_, "fetch body stored bytes=%llu", (unsigned long long)f.body_rx);
    end_fetch(reusable, "recycle");
  }
}

// deliver (cache path): the plan (status, head, filters) for this client and a Sender
// that pulls the object through the filter chain into the worker's transport.
void Client::start_delivery() {
  req_.timestamp("Process");
  std::string extra = "X-Varnish: ";
  extra += std::to_string(req_.vxid());
  if (!f_ || f_->into != obj_) {  // a hit: also the fetch that made the object, as Varnish does
    const auto& m = static_cast<const cache::ObjMeta&>(*obj_->meta);
    if (m.vxid) extra += " " + std::to_string(m.vxid);
  }
  extra += "\r\n";
  if (srv_.stopping()) keep_alive_ = false;
  cache::DeliveryPlan plan = cache::plan_delivery(creq_->req, obj_, now_s(), extra, minor_ == 0);
  if (plan.close_delimited) keep_alive_ = false;
  if (!keep_alive_) plan.head.insert(plan.head.size() - 2, "Connection: close\r\n");
  else if (minor_ == 0) plan.head.insert(plan.head.size() - 2, "Connection: keep-alive\r\n");
  status_ = plan.status;
  if (req_.enabled(Tag::Filters)) {  // the delivery filters, as Varnish lists them (none: no record)
    std::string fl;
    if (plan.body && plan.range && plan.status == 206) fl += " range";
    if (plan.body && plan.coding == cache::DeliveryPlan::Coding::gunzip) fl += " gunzip";
    if (plan.body && plan.coding == cache::DeliveryPlan::Coding::gzip) fl += " gzip";
    if (plan.body && plan.chunked) fl += " chunked";
    if (plan.body && srv_.config().crc32) fl += " crc32";
    if (!fl.empty()) req_.record(Tag::Filters, std::string_view(fl).substr(1));
  }
  std::string_view head = plan.head;
  std::size_t sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1), eol = head.find("\r\n");
  req_.record(Tag::RespProtocol, "HTTP/1.1");
  req_.record(Tag::RespStatus, head.substr(sp1 + 1, sp2 - sp1 - 1));
  req_.record(Tag::RespReason, head.substr(sp2 + 1, eol - sp2 - 1));
  log_head_fields(req_, Tag::RespHeader, head);
  RP_TRACE(req_, "deliver from cache status=%d filters=%s%s%s", plan.status, plan.range ? "range " : "",
           plan.coding != cache::DeliveryPlan::Coding::none ? "zlib " : "", plan.chunked ? "chunked" : "");
  resp_hdr_tx_ = plan.head.size();
  w_.counters().add(M::s_resp_hdrbytes, resp_hdr_tx_);
  count_status(plan.status);
  chain_ = cache::make_chain(plan, obj_, notify_.get());
  crc_ = nullptr;
  if (chain_ && srv_.config().crc32) {
    auto c = std::make_unique<delivery::Crc32Filter>();
    crc_ = c.get();
    chain_->push(std::move(c));
  }

  // A scatter array as large as the transport takes for a large stored object (io_uring:
  // a 64 MiB hit goes out in one send), the usual 64 extents otherwise. A filter that
  // reads every byte (crc32, gzip) fills the array before it goes: 128 extents (8 MiB
  // of 64 KiB segments) keep its work overlapping the sends.
  std::size_t iov = std::clamp<std::size_t>(64 + obj_->fetched() / (64 << 10), 64, w_.transport().max_iov());
  if (crc_ || plan.coding != cache::DeliveryPlan::Coding::none) iov = std::min<std::size_t>(iov, 128);
  sender_ = std::make_unique<delivery::Sender>(fd_, std::move(plan.head), chain_.get(), iov);
  sender_->user = this;
  sender_->zerocopy = !peer_.loopback();
  // io_uring: such a filter works on the next array while the kernel sends this one.
  if (w_.uring() && (crc_ || plan.coding != cache::DeliveryPlan::Coding::none)) sender_->enable_prefill();
  resp_ = Resp::Stream;
  if (w_.uring() && !quiet_) {
    // The transport's sends wait for room themselves: the socket's write events (one
    // each time the client drains a full buffer) would only wake the loop for nothing.
    quiet_ = true;
    w_.mod_fd(fd_, this, EPOLLIN | EPOLLRDHUP);
  }
  if (!watched_) w_.watch(this), watched_ = true;
}

// The sender's next array waits for the loop's next submission: come back after it.
void Client::schedule_prefill() {
  if (sender_->prefill_pending() && !scheduled_) {
    scheduled_ = true;
    w_.schedule(this);
  }
}

void Client::pump_sender() {
  delivery::Transport& t = w_.transport();
  for (int turns = 0; turns < 16; ++turns) {
    if (sender_->finished()) return;
    if (sender_->inflight()) {
      // io_uring with a prefill (enable_prefill): the next array is filled now, or after
      // the loop's next submission has handed the kernel the current one.
      notify_->take();  // cleared before leasing, as below
      t.pump(*sender_);
      schedule_prefill();
      return;
    }
    if (sender_->status() == delivery::Sender::Status::wait_write && !can_write_) return;
    notify_->take();  // cleared before leasing: a wake-up after this is never lost
    std::uint64_t before = sender_->bytes_sent();
    delivery::Sender::Status st = t.pump(*sender_);
    std::uint64_t sent = sender_->bytes_sent() - before;
    moved_ += sent;
    if (sent && timer_ == Timer::Send) timer_ = Timer::None;
    switch (st) {
      case delivery::Sender::Status::wait_write:
        can_write_ = false;
        watch_writes();
        if (timer_ != Timer::Send || sent) {
          timer_ = Timer::Send;
          deadline_ = w_.now() + srv_.params().ns(timeout_send);
        }
        return;
      case delivery::Sender::Status::inflight:
        schedule_prefill();
        return;
      case delivery::Sender::Status::wait_data:
      case delivery::Sender::Status::done:
        return;
      case delivery::Sender::Status::ready:
        continue;
      case delivery::Sender::Status::error:
        if (sender_->error() == EIO) {
          req_.record(Tag::Error, "object failed while being delivered");
          close_session("TX_ERROR");
        } else {
          req_.recordf(Tag::Error, "client write: %s", std::strerror(sender_->error()));
          close_session("TX_ERROR");
        }
        return;
    }
  }
}

// The Sender is done and no fetch of ours is running: account, then done.
void Client::finish_delivery() {
  resp_body_tx_ = body_sent();
  w_.counters().add(M::s_resp_bodybytes, resp_body_tx_);
  if (crc_) req_.recordf(Tag::Debug, "crc32 %08x bytes %llu", crc_->crc(), (unsigned long long)crc_->bytes());
  drop_delivery();
  resp_ = Resp::Queued;
  finish_request();
}

void Client::log_req_acct() {
  if (!req_.enabled(Tag::ReqAcct)) return;
  req_.record(Tag::ReqAcct, ringlog::Line()
                                .u(req_hdr_rx_).sp().u(req_body_rx_).sp().u(req_hdr_rx_ + req_body_rx_).sp()
                                .u(resp_hdr_tx_).sp().u(resp_body_tx_).sp().u(resp_hdr_tx_ + resp_body_tx_)
                                .view());
}

// Body bytes sent by the Sender without the chunked framing (as Varnish's ReqAcct and
// the direct path count them).
std::uint64_t Client::body_sent() const noexcept {
  std::uint64_t n = sender_->body_bytes_sent();
  if (chain_)
    if (auto* c = static_cast<delivery::ChunkedFilter*>(chain_->find("chunked")))
      n = std::min(n, c->payload_bytes());
  return n;
}

// Lets go of the cache path's state. A Sender the kernel still holds (io_uring) goes
// to the worker with everything it points into.
void Client::drop_delivery() {
  if (obj_ && notify_) obj_->disarm(notify_.get());  // a wait armed by lookup
  if (sender_ && sender_->inflight()) {
    sender_->user = nullptr;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // the pending send fails at once
    w_.orphan(std::move(sender_), std::move(chain_), std::move(notify_), obj_);
  }
  sender_.reset();
  crc_ = nullptr;
  chain_.reset();
  obj_.reset();
  if (watched_) {
    w_.unwatch(this);
    watched_ = false;
  }
}

// A response made here (errors, 417...). close: the connection closes after it.
void Client::synth(int status, std::string_view why, bool close) {
  req_.timestamp("Process");
  RP_TRACE(req_, "synth status=%d close=%d", status, int(close));
  std::string& o = scratch_;
  o.clear();
  std::string_view reason = http::reason_phrase(status);
  http::write_status_line(o, status, reason, 1);
  req_.record(Tag::RespProtocol, "HTTP/1.1");
  req_.record(Tag::RespStatus, ringlog::Line().i(status).view());
  req_.record(Tag::RespReason, reason);
  char body[512];
  int bl = std::snprintf(body, sizeof body,
                         "<!DOCTYPE html>\n<html><head><title>%d %.*s</title></head>\n<body><h1>%d %.*s</h1>\n"
                         "<p>%.*s</p>\n<p>ringproxy</p></body></html>\n",
                         status, int(reason.size()), reason.data(), status, int(reason.size()), reason.data(),
                         int(std::min<std::size_t>(why.size(), 200)), why.data());
  bl = std::min(bl, int(sizeof body) - 1);
  put_header(o, req_, Tag::RespHeader, "Content-Type", "text/html; charset=utf-8");
  std::size_t at = o.size();
  http::write_header(o, "Content-Length", std::uint64_t(method_ == http::Method::Head ? 0 : bl));
  req_.record(Tag::RespHeader, std::string_view(o).substr(at, o.size() - at - 2));
  if (close || srv_.stopping()) keep_alive_ = false;
  if (!req_body_done_) keep_alive_ = false;
  if (!keep_alive_) put_header(o, req_, Tag::RespHeader, "Connection", "close");
  http::end_head(o);
  out_.append(o);
  resp_hdr_tx_ = o.size();
  if (method_ != http::Method::Head) {
    out_.append({body, std::size_t(bl)});
    resp_body_tx_ = std::size_t(bl);
  }
  w_.counters().add(M::s_resp_hdrbytes, resp_hdr_tx_);
  w_.counters().add(M::s_resp_bodybytes, resp_body_tx_);
  status_ = status;
  count_status(status);
  resp_ = Resp::Queued;
  if (!req_body_done_) {
    // The rest of the request body will not be read: the connection closes.
    req_body_done_ = true;
    in_.clear();
  }
}

void Client::count_status(int status) {
  if (status < 200) w_.counters().add(M::client_resp_1xx);
  else if (status < 300) w_.counters().add(M::client_resp_2xx);
  else if (status < 400) w_.counters().add(M::client_resp_3xx);
  else if (status < 500) w_.counters().add(M::client_resp_4xx);
  else w_.counters().add(M::client_resp_5xx);
}

// done: everything was sent. Log the accounting, then the next request (pipelined
// bytes may already be in in_) or close.
void Client::finish_request() {
  req_.timestamp("Resp");
  if (req_.enabled(Tag::ReqAcct))
    log_req_acct();
  RP_TRACE(req_, "done status=%d keep_alive=%d", status_, int(keep_alive_));
  req_.end();
  w_.counters().add(M::log_txn);
  req_active_ = false;
  resp_ = Resp::None;
  hdr_start_real_ = 0;
  parser_.set_limits({srv_.params().count(max_header_bytes), srv_.params().count(max_headers),
                      srv_.params().count(max_url), false});
  if (!keep_alive_ || rd_eof_) {
    close_session(keep_alive_ ? "REM_CLOSE" : (minor_ == 0 ? "REQ_HTTP10" : close_reason_));
    return;
  }
  out_.release_if_idle();
  in_.release_if_idle();
  timer_ = Timer::Idle;
  deadline_ = w_.now() + srv_.params().ns(timeout_idle);
  if (!in_.empty()) {
    // Bytes of the next request are here already.
    hdr_start_real_ = real_ns();
  }
}

void Client::flush_client() {
  if (out_.empty() || !can_write_) {
    if (!out_.empty() && timer_ != Timer::Send) {
      timer_ = Timer::Send;
      deadline_ = w_.now() + srv_.params().ns(timeout_send);
    }
    return;
  }
  bool blocked = false;
  std::size_t before = out_.size();
  if (!write_from(fd_, out_, blocked, &moved_)) {
    if (req_active_) req_.recordf(Tag::Error, "client write: %s", std::strerror(errno));
    close_session("TX_ERROR");
    return;
  }
  if (blocked) {
    can_write_ = false;
    watch_writes();
    if (timer_ != Timer::Send || out_.size() < before) {
      timer_ = Timer::Send;
      deadline_ = w_.now() + srv_.params().ns(timeout_send);
    }
  } else if (timer_ == Timer::Send) {
    timer_ = Timer::None;
  }
}

// A write would block: epoll must tell when the socket drains (undoes quiet_).
void Client::watch_writes() {
  if (!quiet_) return;
  quiet_ = false;
  w_.mod_fd(fd_, this, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
}

void Client::become_tunnel() {
  watch_writes();
  TunnelHandoff t;
  t.worker = &w_;
  t.client_fd = fd_;
  bool upgrade = f_ && f_->conn;  // a 101: scratch_ holds its head, not a CONNECT target
  if (!upgrade) t.target = scratch_;
  t.client_pending.assign(in_.view());
  in_.clear();
  t.req = &req_;
  w_.del_fd(fd_);
  if (f_ && f_->conn) {
    t.backend_fd = f_->conn->fd;
    t.backend_pending = scratch_;
    t.backend_pending.append(f_->in.view());
    w_.del_fd(f_->conn->fd);
    f_->conn->fd = -1;  // owned by the tunnel now
    f_->conn->owner = nullptr;
    w_.release_backend_conn(f_->conn, false, "tunnel");
    f_->conn = nullptr;
  }
  if (f_) end_fetch(false, "tunnel");
  RP_TRACE(req_, "tunnel handoff client_fd=%d backend_fd=%d", t.client_fd, t.backend_fd);
  bool taken = srv_.tunnel_hook(t);
  if (!taken) {
    if (t.backend_fd >= 0) ::close(t.backend_fd);
    ::close(t.client_fd);
  }
  // The session ends here; the tunnel logs its own accounting into req_.
  fd_ = -1;
  req_.end();
  req_active_ = false;
  sess_.recordf(Tag::SessClose, "TX_PIPE %.3f", double(w_.now() - sess_start_mono_) / 1e9);
  sess_.end();
  w_.counters().add(M::sess_closed);
  w_.counters().sub(M::sess_active);
  w_.retire(this);
}

std::uint64_t Client::next_deadline() const noexcept {
  std::uint64_t d = UINT64_MAX;
  if (fd_ < 0 && !detached_) return d;
  if (f_ && f_->deadline && f_->be && f_->st != Fetch::Done) d = f_->deadline;
  if (fd_ >= 0 && timer_ != Timer::None) d = std::min(d, deadline_);
  return d;
}

void Client::check_timeouts(std::uint64_t now) {
  if (fd_ < 0 && !detached_) return;
  if (f_ && f_->deadline && now >= f_->deadline && f_->be && f_->st != Fetch::Done) {
    Fetch& f = *f_;
    f.be->stats.add(V::timeouts);
    if (f.st == Fetch::Connecting) {
      char why[160];
      std::snprintf(why, sizeof why, "backend %s: connect timeout", f.be->spec.name.c_str());
      w_.counters().add(M::backend_fail);
      f.be->stats.add(V::fail);
      if (f.be->healthy.exchange(false)) f.be->stats.add(V::sick);
      fetch_fail(503, why, M::fetch_timeout_connect);
    } else if (f.st == Fetch::Sending || f.st == Fetch::WaitHead) {
      char why[160];
      std::snprintf(why, sizeof why, "backend %s: first byte timeout", f.be->spec.name.c_str());
      fetch_fail(504, why, M::fetch_timeout_first_byte);
    } else if (f.st == Fetch::Body && !f.body_end) {
      f.bereq.recordf(Tag::FetchError, "backend %s: between bytes timeout", f.be->spec.name.c_str());
      w_.counters().add(M::fetch_timeout_between_bytes);
      w_.counters().add(M::fetch_failed);
      RP_TRACE(req_, "fetch between bytes timeout");
      bool into = f.into != nullptr;  // a cache fetch: its readers see the object fail
      end_fetch(false, "error");
      if (!into) close_session("TX_ERROR");
      else resume();
      return;
    }
    resume();
    return;
  }
  if (fd_ < 0) return;
  if (timer_ == Timer::None || now < deadline_) return;
  switch (timer_) {
    case Timer::Idle:
      if (!req_active_ && in_.empty() && out_.empty()) {
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
      if (!out_.empty() || (sender_ && sender_->status() == delivery::Sender::Status::wait_write)) {
        w_.counters().add(M::sess_timeout_send);
        if (req_active_) req_.record(Tag::Error, "send timeout");
        close_session("TX_ERROR");
      } else {
        timer_ = Timer::None;
      }
      break;
    case Timer::None:
      break;
  }
}

void Client::shutdown_begin() {
  if (detached_) {
    end_fetch(false, "shutdown");
    detached_ = false;
    w_.retire(this);
    return;
  }
  if (fd_ < 0) return;
  if (!req_active_ && out_.empty()) {
    // Idle (or partial head): nothing in flight to finish.
    close_session(in_.empty() ? "RX_CLOSE_IDLE" : "RX_TIMEOUT");
    return;
  }
  keep_alive_ = false;
}

// ------------------------------------------------------------------------------------

void BackendConn::on_event(std::uint32_t ev) {
  if (retired) return;
  if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) can_read = true;
  if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) can_write = true;
  if (ev & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) hup = true;
  if (owner) {
    owner->wake();
  } else if (hup || (ev & EPOLLIN)) {
    // A pooled connection the backend closed (or sent junk on): drop it.
    w_.release_backend_conn(this, false, "close");
  }
}

// ------------------------------------------------------------------------------------

Worker::Worker(Server& srv, unsigned index) : srv_(srv), index_(index) {
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep_ < 0 || wake_fd_ < 0) throw ConfigError(std::string("epoll/eventfd: ") + std::strerror(errno));
  waker_.w = this;
  add_fd(wake_fd_, &waker_, EPOLLIN);
  pool_.resize(srv.backends().size());
  if (srv.cache()) {
    try {
      notify_waker_ = std::make_unique<delivery::LoopWaker>();
    } catch (const std::system_error& e) {
      throw ConfigError(std::string("eventfd: ") + e.what());
    }
    notify_handler_.w = this;
    add_fd(notify_waker_->fd(), &notify_handler_, EPOLLIN);
    delivery::TransportOptions to;
    to.kind = srv.config().transport;
    std::string notice;
    // The fallback notice (io_uring refused) is logged once, by the first worker.
    transport_ = delivery::make_transport(to, index == 0 ? &srv.log() : nullptr, &notice);
    completion_handler_.w = this;
    // A transport that drives the loop (io_uring) hands its completions to the loop's
    // wait directly; otherwise its completion fd is one more epoll source.
    if (transport_->completion_fd() >= 0 && !transport_->drives_loop())
      add_fd(transport_->completion_fd(), &completion_handler_, EPOLLIN);
  }
}

Worker::~Worker() {
  for (auto& l : listeners_)
    if (l->fd >= 0) ::close(l->fd);
  for (auto& v : pool_)
    for (BackendConn* c : v) delete c;
  free_retired();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (ep_ >= 0) ::close(ep_);
}

void Worker::bind_listeners() {
  const auto& addrs = srv_.config().listen;
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    auto l = std::make_unique<Listener>();
    l->w = this;
    l->addr = addrs[i];
    l->name = "a" + std::to_string(i);
    int fd = ::socket(addrs[i].family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw ConfigError("socket: " + std::string(std::strerror(errno)));
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (::bind(fd, addrs[i].sa(), addrs[i].len) != 0) {
      int e = errno;
      ::close(fd);
      throw ConfigError("cannot listen on " + addrs[i].str() + ": " + std::strerror(e));
    }
    if (::listen(fd, 1024) != 0) {
      int e = errno;
      ::close(fd);
      throw ConfigError("cannot listen on " + addrs[i].str() + ": " + std::strerror(e));
    }
    l->fd = fd;
    add_fd(fd, l.get(), EPOLLIN);
    listeners_.push_back(std::move(l));
  }
}

void Worker::add_fd(int fd, Handler* h, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events | EPOLLET;
  ev.data.ptr = h;
  ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
}

void Worker::del_fd(int fd) { ::epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr); }

void Worker::mod_fd(int fd, Handler* h, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events | EPOLLET;
  ev.data.ptr = h;
  ::epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
}

void Worker::wake() {
  std::uint64_t one = 1;
  ssize_t r = ::write(wake_fd_, &one, sizeof one);
  (void)r;
}

void Worker::Waker::on_event(std::uint32_t) {
  std::uint64_t v;
  while (::read(w->wake_fd_, &v, sizeof v) > 0) {
  }
  if (w->srv_.stopping() && !w->shutting_down_) w->begin_shutdown();
}

void Worker::accept_all(Listener& l) {
  for (;;) {
    SockAddr peer;
    peer.len = sizeof peer.ss;
    int fd = ::accept4(l.fd, reinterpret_cast<sockaddr*>(&peer.ss), &peer.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) main_->add(M::sess_dropped);
      return;
    }
    if (shutting_down_) {
      ::close(fd);
      continue;
    }
    set_nodelay(fd);
    SockAddr local = sockaddr_of_fd(fd, false);
    main_->add(M::sess_conn);
    main_->add(M::sess_active);
    auto* c = new Client(*this, fd, peer, local, l.name);
    clients_.push_back(c);
    add_fd(fd, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
  }
}

Backend* Worker::pick_backend() noexcept {
  auto& bs = srv_.backends();
  std::size_t n = bs.size();
  for (std::size_t i = 0; i < n; ++i) {
    Backend* b = bs[(rr_++) % n].get();
    if (b->healthy.load(std::memory_order_relaxed)) return b;
  }
  return nullptr;
}

BackendConn* Worker::get_backend_conn(Backend& b, bool& reused) {
  auto& idle = pool_[b.index];
  while (!idle.empty()) {
    BackendConn* c = idle.back();
    idle.pop_back();
    if (c->hup) {
      delete c;
      b.stats.sub(V::conn);
      continue;
    }
    reused = true;
    ++c->uses;
    return c;
  }
  reused = false;
  int fd = ::socket(b.spec.addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  set_nodelay(fd);
  int r = ::connect(fd, b.spec.addr.sa(), b.spec.addr.len);
  if (r != 0 && errno != EINPROGRESS) {
    int e = errno;
    ::close(fd);
    errno = e;
    return nullptr;
  }
  auto* c = new BackendConn(*this, b, fd);
  c->uses = 1;
  b.stats.add(V::conn);
  add_fd(fd, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
  return c;
}

void Worker::release_backend_conn(BackendConn* c, bool reusable, const char*) {
  c->owner = nullptr;
  if (reusable && !c->hup && !shutting_down_ && c->fd >= 0) {
    if (c->quiet) {  // pooled: epoll watches it again (a close by the backend, junk)
      c->quiet = false;
      mod_fd(c->fd, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
    }
    c->idle_deadline = now_ns_ + srv_.params().ns(backend_idle_timeout);
    pool_[c->be.index].push_back(c);
    return;
  }
  auto& idle = pool_[c->be.index];
  idle.erase(std::remove(idle.begin(), idle.end(), c), idle.end());
  if (c->fd >= 0) {
    del_fd(c->fd);
    ::close(c->fd);
    c->fd = -1;
  }
  c->be.stats.sub(V::conn);
  retire(c);
}

void Worker::NotifyHandler::on_event(std::uint32_t) {
  if (!w->notify_waker_->drain()) return;
  scan();
}

void Worker::NotifyHandler::scan() {
  // Every session with an armed notification or a running Sender: the fired ones move.
  std::vector<Client*> ws = w->watchers_;
  for (Client* c : ws)
    if (c->notified()) c->wake();
}

void Worker::CompletionHandler::on_event(std::uint32_t) {
  w->reaped_.clear();
  w->transport_->reap(w->reaped_);
  completed();
}

void Worker::CompletionHandler::completed() {
  for (delivery::Sender* s : w->reaped_)
    if (s->user) static_cast<Client*>(s->user)->wake();
  w->recvs_.clear();
  w->transport_->take_recvs(w->recvs_);
  for (delivery::RecvOp* r : w->recvs_)
    if (r->user) static_cast<Client*>(r->user)->wake();
  // Orphans whose last completion came in are freed.
  auto& o = w->orphans_;
  o.erase(std::remove_if(o.begin(), o.end(),
                         [](const Orphan& x) {
                           return !(x.sender && x.sender->inflight()) && !(x.recv && x.recv->inflight);
                         }),
          o.end());
}

void Worker::watch(Client* c) { watchers_.push_back(c); }
void Worker::unwatch(Client* c) { watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), c), watchers_.end()); }

void Worker::orphan(std::unique_ptr<delivery::Sender> s, std::unique_ptr<delivery::Chain> c,
                    std::unique_ptr<delivery::ReadyNotify> n, delivery::ObjRef o) {
  Orphan x;
  x.notify = std::move(n);
  x.obj = std::move(o);
  x.chain = std::move(c);
  x.sender = std::move(s);
  orphans_.push_back(std::move(x));
}

void Worker::orphan(std::unique_ptr<delivery::RecvOp> r, delivery::ObjRef o) {
  Orphan x;
  x.obj = std::move(o);
  x.recv = std::move(r);
  orphans_.push_back(std::move(x));
}

void Worker::retire(Client* c) { dead_clients_.push_back(c); }
void Worker::schedule(Client* c) { ready_.push_back(c); }
void Worker::retire(BackendConn* c) {
  if (c->retired) return;
  c->retired = true;
  dead_conns_.push_back(c);
}

void Worker::free_retired() {
  if (!dead_clients_.empty()) {
    for (Client* c : dead_clients_) {
      clients_.erase(std::remove(clients_.begin(), clients_.end(), c), clients_.end());
      ready_.erase(std::remove(ready_.begin(), ready_.end(), c), ready_.end());
      delete c;
    }
    dead_clients_.clear();
  }
  for (BackendConn* c : dead_conns_) delete c;
  dead_conns_.clear();
}

// Acts on the timers that are due and returns when the next sweep must run: the
// earliest timer still pending, or sooner, the shortest timeout a timer set from now on
// can have (every timer is "now + a timeout parameter"). An idle loop therefore sleeps
// seconds, not kSweepNs, and a loop with work wakes for its events only.
std::uint64_t Worker::sweep() {
  std::uint64_t next = UINT64_MAX;
  for (std::size_t i = 0; i < clients_.size(); ++i) {
    clients_[i]->check_timeouts(now_ns_);
    next = std::min(next, clients_[i]->next_deadline());
  }
  for (auto& idle : pool_) {
    for (std::size_t i = 0; i < idle.size();) {
      BackendConn* c = idle[i];
      if (now_ns_ >= c->idle_deadline) {
        release_backend_conn(c, false, "timeout");  // erases it from idle
      } else {
        next = std::min(next, c->idle_deadline);
        ++i;
      }
    }
  }
  Params& p = srv_.params();
  std::uint64_t shortest = kMaxSleepNs;
  for (std::uint64_t t : {p.ns(timeout_header), p.ns(timeout_idle), p.ns(timeout_send), p.ns(connect_timeout),
                          p.ns(first_byte_timeout), p.ns(between_bytes_timeout), p.ns(backend_idle_timeout)})
    shortest = std::min(shortest, t);
  next = std::min(next, now_ns_ + shortest);
  return std::max(next, now_ns_ + kSweepNs);
}

void Worker::begin_shutdown() {
  shutting_down_ = true;
  shutdown_deadline_ = now_ns_ + srv_.params().ns(shutdown_grace);
  for (auto& l : listeners_) {
    if (l->fd >= 0) {
      del_fd(l->fd);
      ::close(l->fd);
      l->fd = -1;
    }
  }
  std::vector<Client*> cs = clients_;
  for (Client* c : cs) c->shutdown_begin();
}

void Worker::run() {
  ringlog::set_thread_index(index_);
  main_ = std::make_unique<ringlog::stats::LocalCounters>(srv_.main_stats().local());
  main_->add(M::threads);
  epoll_event evs[256];
  now_ns_ = mono_ns();
  if (notify_waker_) notify_waker_->bind_to_this_thread();
  if (srv_.stopping()) begin_shutdown();
  const bool uring_loop = transport_ && transport_->drives_loop();
  bool epoll_more = false;  // the last epoll_wait filled its array: more may be ready
  for (;;) {
    bool local = notify_waker_ && notify_waker_->local_pending();
    int wait_ms = 0;
    if (ready_.empty() && !local)
      wait_ms = shutting_down_ ? int(kSweepNs / 1'000'000)
                               : int((std::max(next_sweep_, now_ns_ + 1'000'000) - now_ns_ + 999'999) / 1'000'000);
    int n = 0;
    if (uring_loop) {
      // One system call: this turn's sends go in, the loop sleeps until a completion,
      // an epoll event or the timer. epoll_wait runs only when epoll has events.
      reaped_.clear();
      bool ev = transport_->wait(ep_, epoll_more ? 0 : wait_ms, reaped_) || epoll_more;
      if (ev) n = ::epoll_wait(ep_, evs, 256, 0);
      epoll_more = n == 256;
      now_ns_ = mono_ns();
      completion_handler_.completed();
    } else {
      n = ::epoll_wait(ep_, evs, 256, wait_ms);
      now_ns_ = mono_ns();
    }
    for (int i = 0; i < n; ++i) static_cast<Handler*>(evs[i].data.ptr)->on_event(evs[i].events);
    if (!ready_.empty()) {
      std::vector<Client*> batch;
      batch.swap(ready_);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        // A session closed meanwhile is retired, not freed, until free_retired().
        if ((!batch[i]->closed() || batch[i]->detached()) && batch[i]->scheduled_) batch[i]->resume();
      }
    }
    // Notifications this thread raised itself (no eventfd write): served now.
    for (int i = 0; i < 8 && notify_waker_ && notify_waker_->take_local(); ++i) notify_handler_.scan();
    free_retired();
    if (transport_) {
      if (!uring_loop) transport_->flush();  // io_uring: this turn's sends, one submission
      // The transport's own tallies, published as counters once per loop turn.
      std::uint64_t sc = transport_->syscalls(), zc = transport_->zc_sends();
      if (sc != syscalls_seen_) main_->add(M::delivery_syscalls, sc - syscalls_seen_), syscalls_seen_ = sc;
      if (zc != zc_seen_) main_->add(M::delivery_zc_sends, zc - zc_seen_), zc_seen_ = zc;
    }
    if (now_ns_ >= next_sweep_) {
      next_sweep_ = sweep();
      free_retired();
    }
    if (shutting_down_) {
      bool any = false;
      for (Client* c : clients_)
        if (!c->closed()) any = true;
      if (!any) break;
      if (now_ns_ >= shutdown_deadline_) {
        std::vector<Client*> cs = clients_;
        for (Client* c : cs) c->close_session("SHUTDOWN");
        free_retired();
        break;
      }
    }
  }
  for (auto& idle : pool_) {
    while (!idle.empty()) release_backend_conn(idle.back(), false, "shutdown");
  }
  free_retired();
  // Sends still in the kernel (io_uring; their sockets were shut down): wait for their
  // completions so nothing the kernel points into is freed before it is done.
  for (int i = 0; i < 200 && !orphans_.empty() && transport_ && transport_->completion_fd() >= 0; ++i) {
    transport_->flush();
    pollfd p{transport_->completion_fd(), POLLIN, 0};
    ::poll(&p, 1, 10);
    completion_handler_.on_event(EPOLLIN);
  }
  main_->sub(M::threads);
}

}  // namespace ringproxy
