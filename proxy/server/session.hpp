// A client session (Varnish's cache_session.c and cache_req_fsm.c): the client socket,
// its request heads, keep-alive, the client-side timeouts (header, idle, send), and one
// request at a time, so pipelined requests are answered in order:
//   recv -> [tunnel hook] -> lookup -> fetch -> deliver -> done
// The Session owns its request's Fetch (fetch.hpp) and its delivery state; the stages'
// code is in the files named after them:
//   session.cpp          socket I/O, request heads, routing, done, timeouts
//   request_body.cpp     the request body, client input to the fetch's backend output
//   lookup.cpp           the cache's step: hit, miss, wait, pass, PURGE
//   direct_delivery.cpp  responses written into the client buffer: the backend's (pass,
//                        cache off) with back-pressure, and synthetic ones
//   cache_delivery.cpp   fetching into an object, and delivering one through a Sender
// May call: its Fetch, the worker (epoll registration, scheduling, counters), the
// cache, the tunnel hook, the header logging. Never blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fetch.hpp"
#include "handler.hpp"
#include "io_buf.hpp"
#include "ringlog/txn.hpp"
#include "ringproxy/cache/cache.hpp"
#include "ringproxy/delivery/filters.hpp"
#include "ringproxy/delivery/transport.hpp"
#include "ringproxy/http/http.hpp"

namespace ringproxy {

class Server;
class Worker;
struct CacheRequest;

// Whether a connection stays open after a response, and if not, SessClose's reason.
struct AfterResponse {
  bool keep = true;
  const char* close_reason = nullptr;
};
// keep_alive: what the request and response agreed; client_eof: the client has shut its
// side; minor: the request's HTTP/1.x; close_reason: why keep_alive went false, if known.
AfterResponse after_response(bool keep_alive, bool client_eof, std::uint8_t minor, const char* close_reason) noexcept;

// What a session needs only within one step (parsing a request head; building a
// response head, or holding a CONNECT target until the tunnel takes it), one per thread
// rather than one per connection: an idle connection holds neither.
struct SessionScratch {
  http::RequestHead req_head;
  std::string head;
};
SessionScratch& session_scratch() noexcept;  // this thread's

class Session final : public Handler {
 public:
  Session(Worker& w, int fd, const SockAddr& peer, const SockAddr& local, const std::string& listener);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The worker's side: events, timers, shutdown, notifications.
  void on_event(std::uint32_t ev) override;  // the client socket
  void wake();  // its backend socket, a notification, or a transport completion
  void resume() { wake(); }
  void check_timeouts(std::uint64_t now);
  std::uint64_t next_deadline() const noexcept;  // earliest timer check_timeouts acts on
  void shutdown_begin();                         // the server is stopping
  void close_session(const char* reason);
  bool closed() const noexcept { return fd_ < 0; }
  // Closed, but its cache fetch goes on for the object's other readers (and the cache).
  bool detached() const noexcept { return detached_; }
  // Peeks: the flag is taken by the step that acts on it (the wait or the Sender).
  bool notified() const noexcept {
    return (object_notify_ && object_notify_->ready.load(std::memory_order_acquire)) ||
           (window_notify_ && window_notify_->ready.load(std::memory_order_acquire));
  }
  bool scheduled_ = false;   // in the worker's list of sessions to drive on its next turn
  std::uint64_t moved_ = 0;  // bytes read or written by this session's sockets (progress)

  // The fetch's side (fetch.cpp calls these; each may end the fetch).
  Worker& worker() noexcept { return w_; }
  ringlog::Txn& req_txn() noexcept { return req_txn_; }
  void fetch_connected();   // the backend is there: a 100 Continue may go to the client
  void fetch_head();        // the response head is in: deliver it, or store it
  void fetch_body();        // body bytes (or the body's end) are in: move them on
  void fetch_failed(int status, const char* why);  // before the head: a synthetic response
  void fetch_cut();         // after the head: the client connection is cut
  void end_fetch(bool reusable);
  bool client_output_full() const noexcept { return client_out_.size() >= kHighWater; }
  bool request_body_untouched() const noexcept { return req_body_rx_ == 0 && req_body_done_; }
  delivery::ReadyNotify* window_notify() noexcept { return window_notify_.get(); }
  void drive_later();       // drive again on the loop's next turn

 private:
  // session.cpp
  void drive();
  void drive_fetch();
  bool read_client();
  bool step_head();
  void begin_req_txn();
  void bad_request(http::Error e, int status);
  void start_request(const http::RequestHead& h, std::size_t head_len);
  void start_fetch(std::string head, std::string_view method_name, std::string_view url, http::Method m,
                   delivery::ObjRef into);
  void pump_request_body();
  void finish_request();
  void flush_client();
  void watch_writes();
  void become_tunnel();
  void log_req_acct();
  void release_idle();
  // lookup.cpp
  bool lookup(const http::RequestHead& h);
  bool cache_lookup(const http::RequestHead* h);
  void start_pass();
  void purge(const http::RequestHead& h);
  // direct_delivery.cpp
  void deliver_head();
  void fill_response();
  void synth(int status, std::string_view why, bool close);
  void count_status(int status);
  // cache_delivery.cpp
  void cache_fetch_head();
  void store_body();
  void start_delivery();
  void schedule_prefill();
  void pump_sender();
  void finish_delivery();
  void drop_delivery();
  std::uint64_t body_sent() const noexcept;

  Worker& w_;
  Server& srv_;
  int fd_;  // the client socket; -1 once closed
  SockAddr peer_;
  std::string peer_ip_, listener_;
  std::uint16_t peer_port_ = 0;
  ringlog::Txn sess_txn_;
  std::uint64_t sess_start_real_ = 0, sess_start_mono_ = 0;
  Buf client_in_, client_out_;
  bool client_readable_ = false, client_writable_ = false, client_eof_ = false;
  bool client_hup_ = false;  // epoll reported a hang-up: reads go on until EOF or EAGAIN
  bool closing_ = false;  // close once client_out_ is flushed
  const char* close_reason_ = "REQ_CLOSE";
  std::uint64_t client_deadline_ = 0;  // the client-side timer (header, idle or send)
  enum class Timer : std::uint8_t { None, Idle, Header, Send } client_timer_ = Timer::None;
  std::uint64_t hdr_start_real_ = 0;  // first byte of the current request head
  http::RequestParser req_parser_;
  std::uint64_t requests_ = 0;

  // The request in progress.
  bool req_active_ = false;
  ringlog::Txn req_txn_;
  http::Method req_method_ = http::Method::Get;
  std::uint8_t req_minor_ = 1;
  bool keep_alive_ = true;
  http::BodyKind req_body_ = http::BodyKind::None;
  std::uint64_t req_body_left_ = 0;
  http::ChunkedDecoder req_body_decoder_;
  bool req_body_done_ = true;
  bool expect_continue_ = false;
  std::uint64_t req_hdr_rx_ = 0, req_body_rx_ = 0, resp_hdr_tx_ = 0, resp_body_tx_ = 0;
  int resp_status_ = 0;
  // None: no response yet; Body: direct path, head queued, body flowing through
  // client_out_; Queued: everything is in client_out_; Wait: waiting on a busy object
  // (cache path); Stream: a Sender delivers from the cache (cache path).
  enum class Resp : std::uint8_t { None, Body, Queued, Wait, Stream } resp_stage_ = Resp::None;
  bool resp_chunked_ = false;      // encode the body in chunks for the client
  std::unique_ptr<Fetch> fetch_;        // the request's backend side, while it runs
  std::unique_ptr<Fetch> ended_fetch_;  // the last one, kept until the next ends (its
                                        // methods may still be on the stack)
  Buf spare_to_backend_, spare_from_backend_;  // an ended fetch's buffers, for the next one
  // The cache path.
  std::unique_ptr<CacheRequest> cache_req_;
  delivery::ObjRef object_;                               // delivered from (hit, miss, stale)
  std::unique_ptr<delivery::ReadyNotify> object_notify_;  // armed on object_ (wait, or streaming)
  std::unique_ptr<delivery::Chain> filter_chain_;
  std::unique_ptr<delivery::Sender> sender_;
  bool watched_ = false;       // in the worker's list of sessions with a notification or Sender
  bool sends_quiet_ = false;   // EPOLLOUT off: the transport (io_uring) sends, epoll need not watch
  bool detached_ = false;
  std::unique_ptr<delivery::ReadyNotify> window_notify_;  // a pass fetch waits for window room
  delivery::Crc32Filter* crc_filter_ = nullptr;           // --crc32: the chain's check filter
};

}  // namespace ringproxy
