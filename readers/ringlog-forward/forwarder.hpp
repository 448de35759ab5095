// ringlog-forward's delivery side: a bounded queue of formatted syslog messages shared
// by every destination, and one non-blocking socket state machine per destination
// (connect, send, reconnect with exponential backoff). It never drops a message on its
// own: a message leaves the queue only once every destination has delivered it or
// has given it up under the drop-oldest stall policy (counted as lost).
// Delivery (TCP): a message counts as delivered when the collector's TCP stack has
// acknowledged its last byte (SIOCOUTQ). After a reconnect, every message not yet
// delivered is sent again, plus the last `replay` delivered ones: that is the
// at-least-once window. UDP is at-most-once (datagrams are never resent).
// Thread safety: a Forwarder belongs to one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "syslog.hpp"

namespace ringlog::stats {
class Stats;
class Group;
}  // namespace ringlog::stats

namespace ringlog::forward {

enum class Proto : std::uint8_t { tcp, udp };

struct Endpoint {
  Proto proto = Proto::tcp;
  std::string host;   // name or address ([v6] brackets removed)
  std::string port;
  std::string name;   // the counters' ident: NAME= given, or derived ("tcp:127_0_0_1:514")
  std::string url;    // as given, without NAME=
};
// "[NAME=]tcp://host:port" or "[NAME=]udp://host:port"; err says what is wrong.
std::optional<Endpoint> parse_endpoint(std::string_view spec, std::string& err);

struct ForwarderOptions {
  Framing framing = Framing::octet_counting;
  std::size_t queue_bytes = 8u << 20;        // --buffer: messages held for the destinations
  std::size_t send_buffer = 256u << 10;      // --send-buffer: framed bytes staged per destination
  std::size_t replay = 0;                    // --replay: delivered messages resent after a reconnect
  std::size_t udp_max = 8192;                // --udp-max: longer datagrams are cut to this
  std::chrono::milliseconds backoff_min{200};
  std::chrono::milliseconds backoff_max{30'000};
  int sndbuf = 0;                            // SO_SNDBUF for TCP sockets; 0: the kernel's
};

// Per destination counts (mirrored into FORWARD.<name>.* when a stats file is used).
struct DestCounts {
  std::uint64_t sent = 0, failed = 0, reconnects = 0, lost = 0, resent = 0, bytes = 0;
};

using Clock = std::chrono::steady_clock;

class Forwarder {
 public:
  // log: receives the messages for stderr (one line each, without the program name).
  Forwarder(const ForwarderOptions& opts, std::vector<Endpoint> endpoints,
            std::function<void(const std::string&)> log, stats::Stats* stats = nullptr);
  ~Forwarder();
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  // Adds one formatted message (RFC 5424, no framing) for every destination.
  void push(std::string msg);
  // The queue holds queue_bytes or more: stop taking messages from the ring.
  bool full() const noexcept { return bytes_ >= opts_.queue_bytes; }
  std::size_t queued_bytes() const noexcept { return bytes_; }
  std::size_t queued_messages() const noexcept { return q_.size(); }
  // Every message pushed so far is delivered (TCP: acknowledged) or given up.
  bool drained() const noexcept;
  // Some destination has work: bytes to write, a connection pending or a retry due.
  bool busy() const noexcept;

  // Runs the sockets: waits up to timeout for one to be ready (0: no wait), then
  // connects, writes, checks acknowledgements and detects lost connections.
  void poll(std::chrono::milliseconds timeout);

  // drop-oldest: gives up the oldest messages that hold the queue until it is below
  // `target` bytes; each destination that had not yet sent a given-up message counts
  // it as lost. Returns how many messages left the queue.
  std::size_t drop_oldest(std::size_t target);

  // At shutdown: counts every message not yet delivered as lost (and returns how many
  // destination-messages that was).
  std::uint64_t abandon();

  // At exit: keeps the FORWARD groups in the counters file with their last values (a
  // destroyed group leaves the file), for whoever reads them after the forwarder.
  void keep_counters();

  std::size_t size() const noexcept { return dests_.size(); }
  const Endpoint& endpoint(std::size_t i) const;
  const DestCounts& counts(std::size_t i) const;
  bool connected(std::size_t i) const;
  // How long the destination waits after its last failed attempt before the next one
  // (its back-off with the jitter applied); 0 before any failure.
  std::chrono::milliseconds retry_wait(std::size_t i) const;
  std::uint64_t pending(std::size_t i) const;  // messages this destination has not delivered

  struct Dest;

 private:
  void trim();
  void connect(Dest& d, Clock::time_point now);
  void finish_connect(Dest& d, Clock::time_point now);
  void on_up(Dest& d, Clock::time_point now);
  void lose(Dest& d, const std::string& why, Clock::time_point now);
  void fail_attempt(Dest& d, const std::string& why, Clock::time_point now);
  void write_tcp(Dest& d, Clock::time_point now);
  void write_udp(Dest& d, Clock::time_point now);
  void confirm(Dest& d);
  void publish(Dest& d);
  std::uint64_t retain_from(const Dest& d) const noexcept;
  std::uint64_t pending_count(const Dest& d) const noexcept;
  const std::string& at(std::uint64_t seq) const { return q_[static_cast<std::size_t>(seq - front_)]; }

  ForwarderOptions opts_;
  std::function<void(const std::string&)> log_;
  std::deque<std::string> q_;   // q_[i] has sequence number front_ + i
  std::uint64_t front_ = 0;
  std::size_t bytes_ = 0;
  std::vector<std::unique_ptr<Dest>> dests_;
};

}  // namespace ringlog::forward
