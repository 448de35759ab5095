// A request's backend side (Varnish's cache_fetch.c): a Fetch owns its connection to a
// backend (BackendConn: a socket, or the demo origin), sends the backend request and
// the request body the session queues, reads and logs the response head, retries once
// on a pooled connection the backend had closed, and keeps the connect, first byte and
// between bytes timeouts. Body bytes and the head go to the session, which delivers
// them directly (direct_delivery.cpp) or stores them in an object (cache_delivery.cpp).
// May call: the worker's backend pool, transport and counters, the header logging, and
// the session's fetch_* reactions (which may end the fetch: after one, a method
// returns at once if ended()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "backend.hpp"
#include "io_buf.hpp"
#include "ringlog/txn.hpp"
#include "ringproxy/delivery/transport.hpp"
#include "ringproxy/http/http.hpp"

namespace ringproxy {

class Server;
class Session;
class Worker;

// The backend request head for a client's request h. cache_fetch: the fetch of a cache
// miss, which wants the whole object whatever this client asked (GET, no conditionals,
// no Range). client_ip goes into X-Forwarded-For.
std::string build_backend_request(const http::RequestHead& h, bool cache_fetch, const Server& srv,
                                  std::string_view client_ip);
// The same, written into hd (cleared first), whose capacity a steady connection reuses.
void build_backend_request(std::string& hd, const http::RequestHead& h, bool cache_fetch, const Server& srv,
                           std::string_view client_ip);

// This thread's spare Fetch memory (the object, its response head's field list and its
// backend request head), a bounded number of each, so that a proxied request allocates
// none of them: HAProxy keeps its streams and buffers in per-thread pools the same way.
// Only a worker's thread keeps spares, between open() and close() (which frees them);
// drain() frees what is kept (an idle loop's heap trim).
namespace fetch_pool {
void open() noexcept;
void close() noexcept;
void drain() noexcept;
std::string take_head();  // an empty string, with the capacity of one used before
}  // namespace fetch_pool

class Fetch {
 public:
  enum State : std::uint8_t { Connecting, Sending, WaitHead, Body, Done, Failed };

  // bereq: the fetch's own transaction (a child of the request's). into: a cache fetch
  // whose body goes into that object instead of to the client.
  Fetch(Session& s, ringlog::Txn bereq, delivery::ObjRef into, Buf to_backend, Buf from_backend);
  ~Fetch();
  Fetch(const Fetch&) = delete;
  Fetch& operator=(const Fetch&) = delete;
  // From this thread's spares (fetch_pool) when it keeps one.
  static void* operator new(std::size_t n);
  static void operator delete(void* p, std::size_t n) noexcept;

  // Logs the backend request (head: as built), picks a backend and connects to it.
  void start(std::string head, std::string_view method_name, std::string_view url, http::Method m);
  // Everything that can make progress now: connect completion, sending what is queued,
  // reading the response head, then the body as the session takes it.
  void pump();
  // Lets go of the backend (pooled again when reusable) and logs the accounting.
  void finish(bool reusable);
  bool ended() const noexcept { return ended_; }
  // The backend's timer: when it fires (0: none), and acting on it (true: it had fired).
  std::uint64_t timer() const noexcept;
  bool check_timer(std::uint64_t now);
  // io_uring: the body is received by the transport straight into the object.
  bool transport_receives() const noexcept;
  // The one step over the response body that both delivery paths take (direct delivery
  // sends the bytes, cache delivery stores them): the next body bytes in from_backend,
  // unframed as beresp says (Length: up to body_left; chunked: decoded; until close:
  // what came; no body: none), go to take(bytes), which returns how many it accepted.
  // Stops when from_backend runs dry, the body ends (body_end) or take accepts less
  // than it was given (decoded bytes it left wait in `unstored`). false: the chunked
  // framing is broken (logged as FetchError and counted); the caller ends the fetch.
  template <class Take>
  bool take_body(Take&& take) {
    using T = std::remove_reference_t<Take>;
    return take_body_([](void* t, std::string_view d) -> std::size_t { return (*static_cast<T*>(t))(d); },
                      const_cast<void*>(static_cast<const void*>(&take)));
  }
  // The backend connection may go back to the pool: keep-alive, a framed body read to
  // its end with nothing after it, and the whole request sent.
  bool reusable() const noexcept;

  ringlog::Txn bereq;                   // the fetch's transaction
  Backend* backend = nullptr;           // the origin asked (a configured backend or the demo origin)
  BackendConn* conn = nullptr;          // owned while the fetch uses it, then given back to the pool
  State state = Connecting;
  Buf to_backend;                       // the request head, then the request body
  Buf from_backend;                     // response bytes not yet taken by the session
  http::ResponseHead beresp;            // valid once head_ready (views into from_backend's bytes)
  http::ChunkedDecoder body_decoder;    // a chunked response body
  std::uint64_t body_left = 0;          // Length bodies: bytes still to come
  std::uint64_t hdr_tx = 0, body_tx = 0, hdr_rx = 0, body_rx = 0;
  bool head_ready = false;              // beresp is valid
  bool body_end = false;                // response body complete
  bool req_body_sent = false;           // request body fully queued in to_backend
  delivery::ObjRef into;                // cache fetch: the body goes into this object
  bool pass_object = false;             // a pass through the delivery stack: at the head,
                                        // `into` becomes a transient object
  std::string unstored;                 // decoded body bytes the object had no room for yet
  std::unique_ptr<delivery::RecvOp> body_recv;  // the transport's receive into `into`

 private:
  bool take_body_(std::size_t (*take)(void*, std::string_view), void* ctx);
  void pick_backend();
  bool connect();
  void fail(int status, const char* why, std::uint32_t counter);
  void receive_body(BackendConn& c);
  bool can_retry() const noexcept;
  void retry(const char* why);
  void read_ended(int err);
  bool parse_head();

  Session& session_;
  Worker& w_;
  Server& srv_;
  ringlog::Txn& req_txn_;  // the session's request transaction (trace records)
  std::string bereq_head_;  // as sent (kept for a retry)
  http::ResponseParser resp_parser_;
  http::Method method_ = http::Method::Get;  // of the backend request (frames the response)
  std::uint64_t deadline_ = 0;
  bool reused_ = false;
  bool retried_ = false;
  bool got_response_bytes_ = false;  // a response byte arrived on this connection
  bool ended_ = false;
};

}  // namespace ringproxy
