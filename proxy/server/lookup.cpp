// The lookup step (Varnish's cache_req_fsm.c, cnt_lookup and cnt_purge): for a GET or
// HEAD without a body, with the cache on, the cache says
//   hit  -> deliver from the object (cache_delivery.cpp); a grace hit also refreshes the
//           object with a fetch of its own (the client is served the stale copy at once);
//   miss -> fetch into a busy object (GET, no conditionals, no Range); when its head is
//           in, the cache decides TTL / hit-for-pass and this client streams the object
//           like any hit while the body comes in;
//   wait -> another client is fetching the key: a one-shot notification is armed on the
//           busy object; this session holds no thread and looks up again when woken;
//   pass, hit-for-pass -> a GET goes through a transient object (its window bounds the
//           memory held), anything else the direct path (direct_delivery.cpp).
// PURGE from a trusted address drops every variant of Host + URL. May call the cache,
// the session's fetch start and the delivery steps.
#include <cstdio>

#include "cache_request.hpp"
#include "fetch.hpp"
#include "server.hpp"
#include "session.hpp"
#include "trace.hpp"
#include "worker.hpp"

namespace ringproxy {

using ringlog::Tag;

// lookup: the cache's step. Returns true for a pass (the caller fetches directly), false
// when the cache path took the request (hit, miss or wait).
bool Session::lookup(const http::RequestHead& h) {
  cache::Cache* c = srv_.cache();
  if (!c || !req_body_done_ || h.connection.upgrade ||
      (h.method != http::Method::Get && h.method != http::Method::Head)) {
    RP_TRACE(req_txn_, "lookup -> pass (%s)", !c ? "cache off" : "method or body");
    return true;
  }
  if (!cache_req_) cache_req_ = std::make_unique<CacheRequest>();
  cache_req_->view(h);
  if (!object_notify_) object_notify_ = std::make_unique<delivery::ReadyNotify>(w_.notify_waker());
  if (cache_lookup(&h)) return false;
  if (h.method == http::Method::Get) {
    // A GET pass goes through the delivery stack too: a transient object whose window
    // bounds the memory it holds, whatever the body size.
    cache_req_->own();
    cache_req_->pass_head = build_backend_request(h, false, srv_, peer_ip_);
    start_pass();
    return false;
  }
  return true;
}

void Session::start_pass() {
  start_fetch(cache_req_->pass_head, cache_req_->req.method, cache_req_->req.url, req_method_, nullptr);
  if (fetch_ && req_method_ == http::Method::Get) fetch_->pass_object = true;
}

// One cache lookup of cache_req_: false for pass / hit-for-pass (the caller fetches).
// h: the parsed head, on the first lookup (null on a lookup after a wait, by when the
// backend requests are built).
bool Session::cache_lookup(const http::RequestHead* h) {
  cache::Cache& c = *srv_.cache();
  cache::Lookup r = c.lookup(cache_req_->req, object_notify_.get(), &req_txn_, now_s());
  auto fetch_head = [&]() -> std::string& {
    cache_req_->own();  // the fetch outlives the head
    if (cache_req_->fetch_head.empty() && h) cache_req_->fetch_head = build_backend_request(*h, true, srv_, peer_ip_);
    return cache_req_->fetch_head;
  };
  switch (r.verdict) {
    case cache::Verdict::hit:
      RP_TRACE(req_txn_, "lookup -> hit%s", r.stale ? " (stale, refreshing)" : "");
      object_ = std::move(r.obj);
      if (r.refresh) start_fetch(fetch_head(), "GET", cache_req_->req.url, http::Method::Get, std::move(r.refresh));
      if (fd_ >= 0) start_delivery();
      return true;
    case cache::Verdict::miss:
      RP_TRACE(req_txn_, "lookup -> miss");
      object_ = r.obj;
      start_fetch(fetch_head(), "GET", cache_req_->req.url, http::Method::Get, std::move(r.obj));
      return true;
    case cache::Verdict::wait:
      RP_TRACE(req_txn_, "lookup -> wait for a busy object");
      if (h) {  // the wait ends in a hit, a miss or a pass: have every request ready
        fetch_head();
        cache_req_->pass_head = build_backend_request(*h, false, srv_, peer_ip_);
      }
      object_ = std::move(r.obj);
      resp_stage_ = Resp::Wait;
      if (!watched_) w_.watch(this), watched_ = true;
      return true;
    case cache::Verdict::hit_pass:
    case cache::Verdict::pass:
      RP_TRACE(req_txn_, "lookup -> pass");
      return false;
  }
  return false;
}

// PURGE from a trusted address: every variant of Host + URL.
void Session::purge(const http::RequestHead& h) {
  if (!srv_.trusted(peer_)) {
    req_txn_.record(Tag::Error, "PURGE from an untrusted address");
    synth(405, "PURGE is not allowed from this address", false);
    return;
  }
  const http::Header* host = h.headers.find(http::FieldId::Host);
  std::size_t n = srv_.cache()->purge(host ? host->value : std::string_view(), h.target);
  char why[64];
  std::snprintf(why, sizeof why, "Purged %zu", n);
  RP_TRACE(req_txn_, "purge -> %zu objects", n);
  synth(200, why, false);
}

}  // namespace ringproxy
