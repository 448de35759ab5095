// Cache delivery (Varnish's cache_deliver_proc.c with an object): a cache fetch's
// response head goes to the cache (TTL, hit-for-pass; or a transient object for a
// pass), its body into the object's storage (no back-pressure from clients, except a
// pass window); a hit, a miss being fetched or a pass object goes to this client
// through a delivery::Sender that pulls leases through the filter chain (range,
// gzip/gunzip, chunked, crc32) into the worker's transport (writev or io_uring).
// May call the cache, the delivery stack, the worker's transport, the session's Fetch
// and the header logging.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "cache_request.hpp"
#include "header_log.hpp"
#include "server.hpp"
#include "session.hpp"
#include "trace.hpp"
#include "worker.hpp"

namespace ringproxy {

namespace M = ringproxy::counters::main;
using ringlog::Tag;

// A cache fetch's response head is in: the cache decides (TTL, hit-for-pass), stores
// the head and wakes the waiters; the client that fetched streams the object.
void Session::cache_fetch_head() {
  Fetch& f = *fetch_;
  cache::Response resp;
  resp.status = f.beresp.status;
  resp.reason.assign(f.beresp.reason.empty() ? http::reason_phrase(f.beresp.status) : f.beresp.reason);
  resp.headers.reserve(f.beresp.headers.size() + 1);
  // The backend's Via fields are folded into ours, stored last.
  for (const http::Header& h : f.beresp.headers) {
    if (h.id == http::FieldId::Via || http::is_hop_by_hop(h, f.beresp.connection)) continue;
    resp.headers.emplace_back(std::string(h.name), std::string(h.value));
  }
  std::string via;
  http::write_via(via, f.beresp.headers, f.beresp.version_minor, srv_.config().via);
  // write_via made "Via: ...\r\n": store its value.
  if (via.size() > 7) resp.headers.emplace_back("Via", via.substr(5, via.size() - 7));
  if (f.pass_object) {
    f.into = srv_.cache()->pass_object(resp, &f.bereq);
    object_ = f.into;
    if (!window_notify_) window_notify_ = std::make_unique<delivery::ReadyNotify>(w_.notify_waker());
    RP_TRACE(req_txn_, "fetch head: pass through a transient object status=%d", resp.status);
    start_delivery();
    return;
  }
  if (f.beresp.body == http::BodyKind::Length) f.into->set_size_hint(f.beresp.content_length);
  srv_.cache()->headers(f.into, cache_req_->req, resp, now_s(), &f.bereq);
  RP_TRACE(req_txn_, "fetch head stored status=%d", resp.status);
  if (f.into == object_ && resp_stage_ == Resp::None) start_delivery();
}

// Moves the fetched body into the object (cache fetch): no back-pressure from clients,
// the object is in storage. A pass object's window can be full: the rest waits (in
// f.from_backend, or decoded in f.unstored) and a notification is armed for when its
// reader frees room.
void Session::store_body() {
  Fetch& f = *fetch_;
  if (!f.head_ready || !f.into) return;
  if (window_notify_) window_notify_->take();
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
  if (!f.unstored.empty()) {
    f.unstored.erase(0, put(f.unstored));
  }
  if (!f.unstored.empty() || !ok) {
    // still no room (or failed): nothing more now
  } else if (!f.take_body(put)) {
    end_fetch(false);  // a broken chunked body fails the object: its readers get an error
    return;
  }
  if (!ok) {
    f.bereq.record(Tag::FetchError, "storage exhausted");
    w_.counters().add(M::fetch_failed);
    end_fetch(false);
    return;
  }
  if (full || !f.unstored.empty()) {
    // The pass window is full: go on when the reader has freed room (or at once if it
    // already has). Reading from the backend stops at the input buffer's high water.
    if (!f.into->arm_space(window_notify_.get())) {
      drive_later();
    }
    return;
  }
  if (f.body_end && f.unstored.empty()) {
    if (f.into->transient()) f.into->finish();
    else srv_.cache()->finish(f.into);
    RP_TRACE(req_txn_, "fetch body stored bytes=%llu", (unsigned long long)f.body_rx);
    end_fetch(f.reusable());
  }
}

// deliver (cache path): the plan (status, head, filters) for this client and a Sender
// that pulls the object through the filter chain into the worker's transport.
void Session::start_delivery() {
  req_txn_.timestamp("Process");
  std::string extra = "X-Varnish: ";
  extra += std::to_string(req_txn_.vxid());
  if (!fetch_ || fetch_->into != object_) {  // a hit: also the fetch that made the object, as Varnish does
    const auto& m = static_cast<const cache::ObjMeta&>(*object_->meta);
    if (m.vxid) extra += " " + std::to_string(m.vxid);
  }
  extra += "\r\n";
  if (srv_.stopping()) keep_alive_ = false;
  cache::DeliveryPlan plan = cache::plan_delivery(cache_req_->req, object_, now_s(), extra, req_minor_ == 0);
  if (plan.close_delimited) keep_alive_ = false;
  if (!keep_alive_) plan.head.insert(plan.head.size() - 2, "Connection: close\r\n");
  else if (req_minor_ == 0) plan.head.insert(plan.head.size() - 2, "Connection: keep-alive\r\n");
  resp_status_ = plan.status;
  if (req_txn_.enabled(Tag::Filters)) {  // the delivery filters, as Varnish lists them (none: no record)
    std::string fl;
    if (plan.body && plan.range && plan.status == 206) fl += " range";
    if (plan.body && plan.coding == cache::DeliveryPlan::Coding::gunzip) fl += " gunzip";
    if (plan.body && plan.coding == cache::DeliveryPlan::Coding::gzip) fl += " gzip";
    if (plan.body && plan.chunked) fl += " chunked";
    if (plan.body && srv_.config().crc32) fl += " crc32";
    if (!fl.empty()) req_txn_.record(Tag::Filters, std::string_view(fl).substr(1));
  }
  std::string_view head = plan.head;
  header_log::response_head(req_txn_, head);
  RP_TRACE(req_txn_, "deliver from cache status=%d filters=%s%s%s", plan.status, plan.range ? "range " : "",
           plan.coding != cache::DeliveryPlan::Coding::none ? "zlib " : "", plan.chunked ? "chunked" : "");
  resp_hdr_tx_ = plan.head.size();
  w_.counters().add(M::s_resp_hdrbytes, resp_hdr_tx_);
  count_status(plan.status);
  filter_chain_ = cache::make_chain(plan, object_, object_notify_.get());
  crc_filter_ = nullptr;
  if (filter_chain_ && srv_.config().crc32) {
    auto c = std::make_unique<delivery::Crc32Filter>();
    crc_filter_ = c.get();
    filter_chain_->push(std::move(c));
  }

  // A scatter array as large as the transport takes for a large stored object (io_uring:
  // a 64 MiB hit goes out in one send), the usual 64 extents otherwise. A filter that
  // reads every byte (crc32, gzip) fills the array before it goes: 128 extents (8 MiB
  // of 64 KiB segments) keep its work overlapping the sends.
  std::size_t iov = std::clamp<std::size_t>(64 + object_->fetched() / (64 << 10), 64, w_.transport().max_iov());
  if (crc_filter_ || plan.coding != cache::DeliveryPlan::Coding::none) iov = std::min<std::size_t>(iov, 128);
  sender_ = std::make_unique<delivery::Sender>(fd_, std::move(plan.head), filter_chain_.get(), iov);
  sender_->user = this;
  sender_->zerocopy = !peer_.loopback();
  // io_uring: such a filter works on the next array while the kernel sends this one.
  if (w_.uring() && (crc_filter_ || plan.coding != cache::DeliveryPlan::Coding::none)) sender_->enable_prefill();
  resp_stage_ = Resp::Stream;
  if (w_.uring() && !sends_quiet_) {
    // The transport's sends wait for room themselves: the socket's write events (one
    // each time the client drains a full buffer) would only wake the loop for nothing.
    sends_quiet_ = true;
    w_.mod_fd(fd_, this, EPOLLIN | EPOLLRDHUP);
  }
  if (!watched_) w_.watch(this), watched_ = true;
}

// The sender's next array waits for the loop's next submission: come back after it.
void Session::schedule_prefill() {
  if (sender_->prefill_pending() && !scheduled_) {
    scheduled_ = true;
    w_.schedule(this);
  }
}

void Session::pump_sender() {
  delivery::Transport& t = w_.transport();
  for (int turns = 0; turns < 16; ++turns) {
    if (sender_->finished()) return;
    if (sender_->inflight()) {
      // io_uring with a prefill (enable_prefill): the next array is filled now, or after
      // the loop's next submission has handed the kernel the current one.
      object_notify_->take();  // cleared before leasing, as below
      t.pump(*sender_);
      schedule_prefill();
      return;
    }
    if (sender_->status() == delivery::Sender::Status::wait_write && !client_writable_) return;
    object_notify_->take();  // cleared before leasing: a wake-up after this is never lost
    std::uint64_t before = sender_->bytes_sent();
    delivery::Sender::Status st = t.pump(*sender_);
    std::uint64_t sent = sender_->bytes_sent() - before;
    moved_ += sent;
    if (sent && client_timer_ == Timer::Send) client_timer_ = Timer::None;
    switch (st) {
      case delivery::Sender::Status::wait_write:
        client_writable_ = false;
        watch_writes();
        if (client_timer_ != Timer::Send || sent) {
          client_timer_ = Timer::Send;
          client_deadline_ = w_.now() + srv_.params().ns(timeout_send);
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
          req_txn_.record(Tag::Error, "object failed while being delivered");
          close_session("TX_ERROR");
        } else {
          req_txn_.recordf(Tag::Error, "client write: %s", std::strerror(sender_->error()));
          close_session("TX_ERROR");
        }
        return;
    }
  }
}

// The Sender is done and no fetch of ours is running: account, then done.
void Session::finish_delivery() {
  resp_body_tx_ = body_sent();
  w_.counters().add(M::s_resp_bodybytes, resp_body_tx_);
  if (crc_filter_)
    req_txn_.recordf(Tag::Debug, "crc32 %08x bytes %llu", crc_filter_->crc(), (unsigned long long)crc_filter_->bytes());
  drop_delivery();
  resp_stage_ = Resp::Queued;
  finish_request();
}

// Body bytes sent by the Sender without the chunked framing (as Varnish's ReqAcct and
// the direct path count them).
std::uint64_t Session::body_sent() const noexcept {
  std::uint64_t n = sender_->body_bytes_sent();
  if (filter_chain_)
    if (auto* c = static_cast<delivery::ChunkedFilter*>(filter_chain_->find("chunked")))
      n = std::min(n, c->payload_bytes());
  return n;
}

// Lets go of the cache path's state. A Sender the kernel still holds (io_uring) goes
// to the worker with everything it points into.
void Session::drop_delivery() {
  if (object_ && object_notify_) object_->disarm(object_notify_.get());  // a wait armed by lookup
  if (sender_ && sender_->inflight()) {
    sender_->user = nullptr;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // the pending send fails at once
    w_.orphan(std::move(sender_), std::move(filter_chain_), std::move(object_notify_), object_);
  }
  sender_.reset();
  crc_filter_ = nullptr;
  filter_chain_.reset();
  object_.reset();
  if (watched_) {
    w_.unwatch(this);
    watched_ = false;
  }
}

}  // namespace ringproxy
