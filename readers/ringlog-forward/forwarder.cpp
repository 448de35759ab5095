// ringlog-forward's delivery side (see forwarder.hpp): the shared message queue and
// one non-blocking socket per destination. Single-threaded: poll(2) drives it all.
#include "forwarder.hpp"

#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>

#include "ringlog/stats.hpp"

// FORWARD: one group per destination (ident = its name), from counters_forward.def.
#define RINGLOG_GROUP_NAMESPACE ringlog::forward::ctr
#define RINGLOG_GROUP_KIND "FORWARD"
#define RINGLOG_GROUP_LIST "counters_forward.def"
#include "ringlog/counter_group.hpp"

namespace ringlog::forward {

namespace {

namespace rs = ringlog::stats;


std::string errno_text(int e) { return std::strerror(e); }

bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == ':';
}

}  // namespace

std::optional<Endpoint> parse_endpoint(std::string_view spec, std::string& err) {
  Endpoint ep;
  std::size_t eq = spec.find('=');
  std::size_t scheme_end = spec.find("://");
  if (eq != std::string_view::npos && (scheme_end == std::string_view::npos || eq < scheme_end)) {
    ep.name = std::string(spec.substr(0, eq));
    spec.remove_prefix(eq + 1);
    if (ep.name.empty() || ep.name.size() > 47 || !std::all_of(ep.name.begin(), ep.name.end(), ident_char)) {
      err = "destination name '" + ep.name + "': expected 1 to 47 of [A-Za-z0-9_:-]";
      return std::nullopt;
    }
  }
  ep.url = std::string(spec);
  if (spec.starts_with("tcp://")) {
    ep.proto = Proto::tcp;
  } else if (spec.starts_with("udp://")) {
    ep.proto = Proto::udp;
  } else {
    err = "destination '" + ep.url + "': expected tcp://HOST:PORT or udp://HOST:PORT";
    return std::nullopt;
  }
  std::string_view rest = spec.substr(6);
  std::string_view host, port;
  if (rest.starts_with("[")) {
    std::size_t close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      err = "destination '" + ep.url + "': expected [IPV6]:PORT";
      return std::nullopt;
    }
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      err = "destination '" + ep.url + "': the port is missing (HOST:PORT)";
      return std::nullopt;
    }
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty() || host.find_first_of("/ ") != std::string_view::npos) {
    err = "destination '" + ep.url + "': bad host";
    return std::nullopt;
  }
  unsigned long p = 0;
  bool digits = !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  if (digits) p = std::stoul(std::string(port));
  if (!digits || p == 0 || p > 65535) {
    err = "destination '" + ep.url + "': bad port '" + std::string(port) + "' (1 to 65535)";
    return std::nullopt;
  }
  ep.host = std::string(host);
  ep.port = std::string(port);
  if (ep.name.empty()) {
    std::string n = ep.proto == Proto::tcp ? "tcp:" : "udp:";
    for (char c : ep.host) n.push_back(ident_char(c) && c != ':' ? c : '_');
    n += ":" + ep.port;
    if (n.size() > 47) n = n.substr(0, 41 - ep.port.size()) + "_" + n.substr(n.size() - ep.port.size() - 1);
    ep.name = n;
  }
  return ep;
}

struct Forwarder::Dest {
  Endpoint ep;
  enum class State : std::uint8_t { down, connecting, up } st = State::down;
  int fd = -1;
  bool ever_up = false;
  Clock::time_point next_try{};
  std::chrono::milliseconds backoff{0};     // before jitter, for the next failed attempt
  std::chrono::milliseconds retry_wait{0};  // what the last failed attempt waits, jitter included
  // Sequence numbers: below `unconfirmed` all is delivered; [unconfirmed, next) is
  // staged or written on the current connection; `next` is the next to stage.
  std::uint64_t next = 0;
  std::uint64_t unconfirmed = 0;
  std::uint64_t sent_hwm = 0;      // `sent` counts each sequence number once
  std::uint64_t resend_until = 0;  // staging below this is a resend
  std::string sbuf;                // staged framed bytes; sbuf[soff..] not yet written
  std::size_t soff = 0;
  struct Inflight {
    std::uint64_t seq, start, end;  // offsets in this connection's byte stream
  };
  std::deque<Inflight> inflight;
  std::uint64_t staged_end = 0;
  std::uint64_t written = 0;
  bool want_out = false;  // the last write hit EAGAIN
  DestCounts c;
  rs::Group group;
  std::string last_err;
  Clock::time_point last_err_log{};
  unsigned failures_in_row = 0;
};

Forwarder::Forwarder(const ForwarderOptions& opts, std::vector<Endpoint> endpoints,
                     std::function<void(const std::string&)> log, stats::Stats* stats)
    : opts_(opts), log_(std::move(log)) {
  if (endpoints.empty()) throw std::invalid_argument("no destination");
  for (auto& ep : endpoints) {
    auto d = std::make_unique<Dest>();
    d->ep = std::move(ep);
    d->backoff = opts_.backoff_min;
    if (stats) d->group = stats->add_group(ctr::kKind, d->ep.name, ctr::kDefs);
    dests_.push_back(std::move(d));
  }
  for (auto& d : dests_) publish(*d);
}

Forwarder::~Forwarder() {
  for (auto& d : dests_)
    if (d->fd >= 0) ::close(d->fd);
}

const Endpoint& Forwarder::endpoint(std::size_t i) const { return dests_.at(i)->ep; }
const DestCounts& Forwarder::counts(std::size_t i) const { return dests_.at(i)->c; }
bool Forwarder::connected(std::size_t i) const { return dests_.at(i)->st == Dest::State::up; }
std::chrono::milliseconds Forwarder::retry_wait(std::size_t i) const { return dests_.at(i)->retry_wait; }
std::uint64_t Forwarder::pending(std::size_t i) const {
  return front_ + q_.size() - std::min<std::uint64_t>(dests_.at(i)->unconfirmed, front_ + q_.size());
}

void Forwarder::push(std::string msg) {
  bytes_ += msg.size() + sizeof(std::string);
  q_.push_back(std::move(msg));
}

bool Forwarder::drained() const noexcept {
  const std::uint64_t end = front_ + q_.size();
  for (const auto& d : dests_)
    if (d->unconfirmed < end) return false;
  return true;
}

bool Forwarder::busy() const noexcept {
  const std::uint64_t end = front_ + q_.size();
  for (const auto& d : dests_) {
    if (d->st == Dest::State::connecting) return true;
    if (d->unconfirmed < end) return true;
  }
  return false;
}

std::uint64_t Forwarder::retain_from(const Dest& d) const noexcept {
  if (d.ep.proto == Proto::udp) return d.unconfirmed;
  std::uint64_t r = d.unconfirmed > opts_.replay ? d.unconfirmed - opts_.replay : 0;
  return std::max(r, front_);
}

void Forwarder::trim() {
  const std::uint64_t end = front_ + q_.size();
  std::uint64_t keep = end, strict = end;
  for (const auto& d : dests_) {
    keep = std::min(keep, retain_from(*d));
    strict = std::min(strict, std::max(d->unconfirmed, front_));
  }
  auto pop = [&] {
    bytes_ -= q_.front().size() + sizeof(std::string);
    q_.pop_front();
    ++front_;
  };
  while (front_ < keep) pop();
  // Messages kept only for --replay give way when the queue fills.
  while (front_ < strict && bytes_ > opts_.queue_bytes / 2) pop();
}

std::size_t Forwarder::drop_oldest(std::size_t target) {
  std::size_t n = 0;
  while (bytes_ > target && !q_.empty()) {
    const std::uint64_t seq = front_;
    for (auto& d : dests_) {
      if (d->next <= seq) {  // never staged: this destination loses it
        ++d->c.lost;
        if (d->group) d->group.add(ctr::lost);
        d->next = seq + 1;
        d->unconfirmed = std::max(d->unconfirmed, seq + 1);
        d->sent_hwm = std::max(d->sent_hwm, seq + 1);
      }
    }
    bytes_ -= q_.front().size() + sizeof(std::string);
    q_.pop_front();
    ++front_;
    ++n;
  }
  for (auto& d : dests_) publish(*d);
  return n;
}

std::uint64_t Forwarder::abandon() {
  std::uint64_t total = 0;
  const std::uint64_t end = front_ + q_.size();
  for (auto& d : dests_) {
    if (d->unconfirmed < end) {
      std::uint64_t n = end - d->unconfirmed;
      d->c.lost += n;
      if (d->group) d->group.add(ctr::lost, n);
      total += n;
      d->unconfirmed = end;
    }
    publish(*d);
  }
  return total;
}

void Forwarder::keep_counters() {
  // Reachable from a static, never destroyed: the groups stay until the process ends,
  // and the file keeps them after that.
  static auto* kept = new std::vector<rs::Group>;
  for (auto& d : dests_)
    if (d->group) kept->push_back(std::move(d->group));
}

void Forwarder::publish(Dest& d) {
  if (!d.group) return;
  d.group.set(ctr::queued, front_ + q_.size() - std::min<std::uint64_t>(d.unconfirmed, front_ + q_.size()));
  d.group.set(ctr::connected, d.st == Dest::State::up ? 1 : 0);
}

void Forwarder::fail_attempt(Dest& d, const std::string& why, Clock::time_point now) {
  if (d.fd >= 0) ::close(d.fd);
  d.fd = -1;
  d.st = Dest::State::down;
  ++d.c.failed;
  if (d.group) d.group.add(ctr::failed);
  // Jitter (0.8 to 1.2 times) so that many forwarders do not retry in step.
  static thread_local std::minstd_rand rng{std::random_device{}()};
  auto wait = std::chrono::milliseconds(
      static_cast<long long>(d.backoff.count() * (0.8 + 0.4 * (rng() % 1000) / 1000.0)));
  d.next_try = now + wait;
  d.retry_wait = wait;
  ++d.failures_in_row;
  // One line per new error, then at most one a minute while it lasts.
  if (why != d.last_err || now - d.last_err_log >= std::chrono::seconds(60) || d.failures_in_row == 1) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", std::chrono::duration<double>(wait).count());
    log_(d.ep.url + ": " + why + " (" + std::to_string(pending_count(d)) + " messages waiting); retrying in " +
         buf + " s");
    d.last_err = why;
    d.last_err_log = now;
  }
  d.backoff = std::min(d.backoff * 2, opts_.backoff_max);
}

std::uint64_t Forwarder::pending_count(const Dest& d) const noexcept {
  const std::uint64_t end = front_ + q_.size();
  return end - std::min(d.unconfirmed, end);
}

void Forwarder::connect(Dest& d, Clock::time_point now) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = d.ep.proto == Proto::tcp ? SOCK_STREAM : SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int g = ::getaddrinfo(d.ep.host.c_str(), d.ep.port.c_str(), &hints, &res);
  if (g != 0) {
    fail_attempt(d, std::string("cannot resolve ") + d.ep.host + ": " + ::gai_strerror(g), now);
    return;
  }
  int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, res->ai_protocol);
  if (fd < 0) {
    int e = errno;
    ::freeaddrinfo(res);
    fail_attempt(d, "socket: " + errno_text(e), now);
    return;
  }
  d.fd = fd;
  if (d.ep.proto == Proto::tcp) {
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    // Unacknowledged data for this long means the collector is gone: reconnect.
    unsigned timeout_ms = 30'000;
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof timeout_ms);
    if (opts_.sndbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opts_.sndbuf, sizeof opts_.sndbuf);
  }
  int r = ::connect(fd, res->ai_addr, res->ai_addrlen);
  int e = errno;
  ::freeaddrinfo(res);
  if (r == 0) {
    on_up(d, now);
  } else if (e == EINPROGRESS) {
    d.st = Dest::State::connecting;
  } else {
    fail_attempt(d, "connect: " + errno_text(e), now);
  }
}

void Forwarder::finish_connect(Dest& d, Clock::time_point now) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(d.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    fail_attempt(d, "connect: " + errno_text(err), now);
    return;
  }
  on_up(d, now);
}

void Forwarder::on_up(Dest& d, Clock::time_point now) {
  (void)now;
  d.st = Dest::State::up;
  d.want_out = false;
  if (d.ever_up) {
    ++d.c.reconnects;
    if (d.group) d.group.add(ctr::reconnects);
  }
  if (d.failures_in_row > 0 || d.ever_up)
    log_(d.ep.url + ": connected" + (d.ever_up ? " again" : "") + "; " + std::to_string(pending_count(d)) +
         " messages to deliver");
  d.ever_up = true;
  d.failures_in_row = 0;
  d.last_err.clear();
  publish(d);
}

void Forwarder::lose(Dest& d, const std::string& why, Clock::time_point now) {
  // What the collector acknowledged before the end is delivered; the rest goes again.
  if (d.fd >= 0 && d.ep.proto == Proto::tcp) confirm(d);
  std::uint64_t touched_end = d.unconfirmed;  // messages with at least one byte written
  for (const auto& f : d.inflight)
    if (f.start < d.written) touched_end = f.seq + 1;
  std::uint64_t unacked = touched_end - d.unconfirmed;
  std::uint64_t given_up = 0;
  if (d.unconfirmed < front_) {  // written, then dropped from the queue (drop-oldest): cannot resend
    given_up = front_ - d.unconfirmed;
    d.c.lost += given_up;
    if (d.group) d.group.add(ctr::lost, given_up);
  }
  std::uint64_t from = d.ep.proto == Proto::tcp ? retain_from(d) : d.unconfirmed;
  from = std::max(from, front_);
  std::uint64_t replayed = d.unconfirmed > from ? d.unconfirmed - from : 0;
  d.resend_until = std::max(d.resend_until, std::max(touched_end, from));
  d.next = from;
  d.unconfirmed = from;
  d.inflight.clear();
  d.sbuf.clear();
  d.soff = 0;
  d.staged_end = d.written = 0;
  std::string detail = why;
  if (d.ep.proto == Proto::tcp)
    detail += "; " + std::to_string(unacked) + " messages not acknowledged and " +
              std::to_string(replayed) + " replayed will be sent again";
  if (given_up) detail += "; " + std::to_string(given_up) + " given up by drop-oldest are lost";
  d.backoff = opts_.backoff_min;
  d.failures_in_row = 0;
  d.last_err.clear();
  fail_attempt(d, "connection lost: " + detail, now);
  publish(d);
}

void Forwarder::confirm(Dest& d) {
  int outq = 0;
  if (::ioctl(d.fd, SIOCOUTQ, &outq) != 0) return;
  std::uint64_t acked = d.written - std::min<std::uint64_t>(d.written, static_cast<std::uint64_t>(outq));
  bool progress = false;
  while (!d.inflight.empty() && d.inflight.front().end <= acked) {
    std::uint64_t seq = d.inflight.front().seq;
    d.inflight.pop_front();
    d.unconfirmed = seq + 1;
    if (seq >= d.sent_hwm) {
      ++d.c.sent;
      if (d.group) d.group.add(ctr::sent);
      d.sent_hwm = seq + 1;
    }
    progress = true;
  }
  if (progress) d.backoff = opts_.backoff_min;
}

void Forwarder::write_tcp(Dest& d, Clock::time_point now) {
  const std::uint64_t end = front_ + q_.size();
  for (;;) {
    // Stage more while there is room in the send buffer.
    if (d.soff > 0 && d.soff * 2 >= d.sbuf.size()) {
      d.sbuf.erase(0, d.soff);
      d.soff = 0;
    }
    while (d.next < end && d.sbuf.size() - d.soff < opts_.send_buffer) {
      std::size_t before = d.sbuf.size();
      append_frame(d.sbuf, opts_.framing, at(d.next));
      std::size_t len = d.sbuf.size() - before;
      d.inflight.push_back({d.next, d.staged_end, d.staged_end + len});
      d.staged_end += len;
      if (d.next < d.resend_until) {
        ++d.c.resent;
        if (d.group) d.group.add(ctr::resent);
      }
      ++d.next;
    }
    if (d.soff >= d.sbuf.size()) {
      d.want_out = false;
      return;
    }
    ssize_t r = ::send(d.fd, d.sbuf.data() + d.soff, d.sbuf.size() - d.soff, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        d.want_out = true;
        return;
      }
      if (errno == EINTR) continue;
      lose(d, "send: " + errno_text(errno), now);
      return;
    }
    d.soff += static_cast<std::size_t>(r);
    d.written += static_cast<std::uint64_t>(r);
    d.c.bytes += static_cast<std::uint64_t>(r);
    if (d.group) d.group.add(ctr::bytes, static_cast<std::uint64_t>(r));
  }
}

void Forwarder::write_udp(Dest& d, Clock::time_point now) {
  const std::uint64_t end = front_ + q_.size();
  while (d.next < end) {
    const std::string& m = at(d.next);
    std::size_t len = std::min(m.size(), std::min<std::size_t>(opts_.udp_max, 65507));
    ssize_t r = ::send(d.fd, m.data(), len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      int e = errno;
      if (e == EAGAIN || e == EWOULDBLOCK) {
        d.want_out = true;
        return;
      }
      if (e == EINTR) continue;
      if (e == ECONNREFUSED) {
        // An ICMP port unreachable for an earlier datagram: that one is lost, and the
        // collector is down: back off rather than send into the void.
        ++d.c.lost;
        if (d.group) d.group.add(ctr::lost);
      }
      ::close(d.fd);
      d.fd = -1;
      fail_attempt(d, "send: " + errno_text(e), now);
      publish(d);
      return;
    }
    d.want_out = false;
    ++d.c.sent;
    d.c.bytes += static_cast<std::uint64_t>(r);
    if (d.group) {
      d.group.add(ctr::sent);
      d.group.add(ctr::bytes, static_cast<std::uint64_t>(r));
    }
    ++d.next;
    d.unconfirmed = d.next;
    d.sent_hwm = d.next;
  }
}

void Forwarder::poll(std::chrono::milliseconds timeout) {
  auto now = Clock::now();
  // Start connections that are due.
  for (auto& dp : dests_) {
    Dest& d = *dp;
    if (d.st == Dest::State::down && now >= d.next_try) connect(d, now);
  }
  // Write what can be written without waiting.
  for (auto& dp : dests_) {
    Dest& d = *dp;
    if (d.st != Dest::State::up) continue;
    if (d.ep.proto == Proto::tcp) {
      write_tcp(d, now);
      if (d.st == Dest::State::up) confirm(d);
    } else {
      write_udp(d, now);
    }
  }
  trim();

  std::vector<pollfd> pfds;
  std::vector<Dest*> who;
  bool awaiting_acks = false;
  auto wait = timeout;
  for (auto& dp : dests_) {
    Dest& d = *dp;
    if (d.st == Dest::State::down) {
      auto until = std::chrono::duration_cast<std::chrono::milliseconds>(d.next_try - now) + std::chrono::milliseconds(1);
      wait = std::min(wait, std::max(until, std::chrono::milliseconds(0)));
      continue;
    }
    pollfd p{d.fd, 0, 0};
    if (d.st == Dest::State::connecting) {
      p.events = POLLOUT;
    } else if (d.ep.proto == Proto::tcp) {
      p.events = POLLIN | POLLRDHUP;
      if (d.want_out) p.events |= POLLOUT;
      if (!d.inflight.empty()) awaiting_acks = true;
    } else {
      p.events = d.want_out ? POLLOUT : 0;
    }
    pfds.push_back(p);
    who.push_back(&d);
  }
  // Acknowledgements raise no event: look again soon while some are awaited.
  if (awaiting_acks) wait = std::min(wait, std::chrono::milliseconds(5));
  int n = ::poll(pfds.data(), pfds.size(), static_cast<int>(wait.count()));
  now = Clock::now();
  for (std::size_t i = 0; n > 0 && i < pfds.size(); ++i) {
    Dest& d = *who[i];
    short ev = pfds[i].revents;
    if (!ev || d.fd != pfds[i].fd) continue;
    if (d.st == Dest::State::connecting) {
      finish_connect(d, now);
      continue;
    }
    if (d.ep.proto == Proto::tcp) {
      if (ev & (POLLERR | POLLHUP | POLLRDHUP | POLLIN)) {
        char scratch[4096];
        ssize_t r = ::recv(d.fd, scratch, sizeof scratch, MSG_DONTWAIT);
        if (r == 0 || (ev & (POLLHUP | POLLRDHUP))) {
          lose(d, "closed by the collector", now);
          continue;
        }
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          lose(d, "recv: " + errno_text(errno), now);
          continue;
        }
        // A collector has nothing to say on a syslog stream: ignore what it sends.
      }
      if (ev & POLLOUT) write_tcp(d, now);
      if (d.st == Dest::State::up) confirm(d);
    } else if (ev & (POLLOUT | POLLERR)) {
      write_udp(d, now);
    }
  }
  trim();
  // Every round, events or not: the gauges must follow pushes and failed attempts
  // while a destination is down, when they matter most.
  for (auto& dp : dests_) publish(*dp);
}

}  // namespace ringlog::forward
