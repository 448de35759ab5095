// A blind tunnel (HTTP CONNECT, Upgrade, Varnish-style pipe): moves bytes both ways
// between two connected non-blocking stream sockets, socket -> kernel pipe -> socket
// with splice(2), or by copying when splice is refused, the pipe pool is exhausted or
// splice is switched off. It never blocks, never owns a thread and never reads a byte
// it does not forward; the worker's epoll loop hosts it through TunnelHost.
//
// Hosting a tunnel (what the event loop does):
//   1. Construct it with the worker's TunnelEnv and call start(): the tunnel takes
//      ownership of both sockets and calls host->watch(fd, events, this) once per socket
//      (events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET: edge-triggered, so the host
//      adds the fd or, if it is already in its epoll set, modifies it to these events).
//   2. Deliver each epoll event of those fds to on_event(fd, events), on the loop's
//      thread. The tunnel moves bytes until the kernel says EAGAIN.
//   3. Call on_timer(now) at least every tick (say 100 ms..1 s), or at deadline().
//   4. When start(), on_event(), on_timer() or abort() returns State::done, the tunnel
//      has already called host->unwatch() and closed both sockets, given its pipes back
//      and ended its log transaction: the host may destroy it (after the call returns).
// The destructor of a still-running tunnel aborts it (closes both sockets).
// The process must ignore SIGPIPE: splice(2) into a socket has no MSG_NOSIGNAL.
//
// Splice discipline (pipes count page slots, not bytes, so EAGAIN cannot be predicted
// from a byte count): a direction splices into its pipe only when the pipe is empty and
// does not read its source again until the pipe has drained into the destination. So an
// EAGAIN from the source means the socket is drained, and one from the destination means
// the destination is full; either way the direction waits for the next epoll edge.
// SPLICE_F_MOVE | SPLICE_F_NONBLOCK always, never SPLICE_F_MORE (it delays small flows).
//
// Logging: one pipe transaction per tunnel: Begin "bereq <parent> pipe" (or the host's
// own transaction, passed in), Timestamp Pipe, Notice with the mode, and at the end
// PipeAcct "<client hdr> <backend hdr> <bytes from client> <bytes to client>",
// Timestamp PipeSess, Notice with the close reason, End.
// Counting: the tunnel reports to a TunnelStats sink its host provides (ringproxy's
// server maps it onto MAIN.pipe_*); the tunnel knows no counter group of its own.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ringlog/txn.hpp"
#include "ringproxy/tunnel/pipe_pool.hpp"

namespace ringlog {
class Log;
}  // namespace ringlog

namespace ringproxy::tunnel {

class Tunnel;

// What a tunnel needs from the event loop that hosts it.
class TunnelHost {
 public:
  virtual ~TunnelHost() = default;
  // Watch fd for `events` (add, or modify if already watched) and route its epoll events
  // to t->on_event(fd, events) on this loop's thread.
  virtual void watch(int fd, std::uint32_t events, Tunnel* t) = 0;
  // Stop watching fd; called before the tunnel closes it.
  virtual void unwatch(int fd) = 0;
};

// What a tunnel counts, reported to its host (called on the loop's thread): the host
// keeps the counters wherever it keeps its own.
class TunnelStats {
 public:
  virtual ~TunnelStats() = default;
  virtual void tunnel_started() noexcept = 0;      // a tunnel began moving bytes
  virtual void tunnel_ended() noexcept = 0;        // it ended (one per tunnel_started)
  virtual void tunnel_fell_back() noexcept = 0;    // splice wanted, a direction copies instead
  virtual void tunnel_idle_timeout() noexcept = 0; // ended by its idle timeout
  // Bytes moved since the previous report, spliced and copied.
  virtual void tunnel_bytes(std::uint64_t spliced, std::uint64_t copied) noexcept = 0;
};

using Clock = std::chrono::steady_clock;

struct TunnelOptions {
  bool splice = true;                               // false: always copy ("disabled by option")
  std::chrono::milliseconds idle_timeout{300'000};  // no byte either way this long: closed; 0 = never
  std::size_t copy_buffer = 64 * 1024;              // per direction, copy mode only
};

// The splice(2) the tunnel calls: a seam so that tests can make the kernel "refuse".
using SpliceFn = ssize_t (*)(int fd_in, loff_t* off_in, int fd_out, loff_t* off_out, std::size_t len,
                             unsigned int flags);

// Per worker thread; must outlive the tunnels made with it.
struct TunnelEnv {
  TunnelHost* host = nullptr;                      // required
  PipePool* pool = nullptr;                        // null: copy only
  ringlog::Log* log = nullptr;                     // null: no transaction (unless start() gets one)
  TunnelStats* stats = nullptr;                    // null: nothing counted
  TunnelOptions opts;
  SpliceFn splice_fn = nullptr;                    // null: ::splice
};

// Everything start() takes over.
struct TunnelStart {
  int client_fd = -1;   // connected, non-blocking stream sockets; owned by the tunnel from start()
  int backend_fd = -1;
  // Bytes to send before anything else: already read from the client for the backend
  // (bytes pipelined after a CONNECT, or the request head in pipe mode), and for the
  // client (a "200 Connection established", or bytes read past a 101 response). They
  // are copied (once) and count as piped bytes.
  std::string to_backend;
  std::string to_client;
  std::uint64_t client_hdr_bytes = 0;   // for PipeAcct: request header bytes the host read
  std::uint64_t backend_hdr_bytes = 0;  // and sent to the backend
  // The pipe transaction: an active one from the host (it may already hold Bereq*
  // records), or inactive: the tunnel begins "bereq <parent_vxid> pipe" on env.log.
  ringlog::Txn txn;
  std::uint64_t parent_vxid = 0;
};

enum class State : std::uint8_t { running, done };
enum class Mode : std::uint8_t { splice, copy };
// Why the tunnel ended: both sides closed in order (eof), a side reset or failed
// (error), nothing moved for idle_timeout (timeout), or the host ended it (abort).
enum class EndReason : std::uint8_t { none, eof, error, timeout, abort };
std::string_view to_string(EndReason r) noexcept;
std::string_view to_string(Mode m) noexcept;

class Tunnel {
 public:
  explicit Tunnel(TunnelEnv& env);
  ~Tunnel();
  Tunnel(const Tunnel&) = delete;
  Tunnel& operator=(const Tunnel&) = delete;

  State start(TunnelStart&& s);
  State on_event(int fd, std::uint32_t events);
  State on_timer(Clock::time_point now);
  State abort(std::string_view why);  // e.g. the shutdown grace period is over
  Clock::time_point deadline() const noexcept;  // idle expiry; time_point::max() if none
  State state() const noexcept { return state_; }

  // Accounting, both ways, in bytes delivered to the destination socket.
  std::uint64_t bytes_to_backend() const noexcept { return dir_[kUp].delivered; }
  std::uint64_t bytes_to_client() const noexcept { return dir_[kDown].delivered; }
  std::uint64_t spliced_bytes() const noexcept { return dir_[kUp].spliced + dir_[kDown].spliced; }
  std::uint64_t copied_bytes() const noexcept { return dir_[kUp].copied + dir_[kDown].copied; }
  // Mode each direction ended in (kUp: client -> backend, kDown: backend -> client).
  Mode mode_up() const noexcept { return dir_[kUp].mode; }
  Mode mode_down() const noexcept { return dir_[kDown].mode; }
  bool fell_back() const noexcept { return fell_back_; }  // splice wanted but copied somewhere
  EndReason end_reason() const noexcept { return reason_; }
  const std::string& end_detail() const noexcept { return detail_; }  // e.g. "client: Connection reset by peer"
  std::size_t pipe_bytes_max() const noexcept { return pipe_max_; }  // most bytes ever held in one pipe

  static constexpr int kUp = 0;
  static constexpr int kDown = 1;

 private:
  struct Dir {
    int src = -1, dst = -1;
    const char* src_name = "";
    const char* dst_name = "";
    Mode mode = Mode::copy;
    Pipe pipe;
    std::size_t in_pipe = 0;       // bytes spliced in and not yet out
    std::string buf;               // copy buffer (or initial bytes)
    std::size_t off = 0, len = 0;  // unsent bytes: buf[off, len)
    bool src_ready = true;         // edge-triggered: ready until EAGAIN says otherwise
    bool dst_ready = true;
    bool eof = false;              // source said end of stream
    bool done = false;             // eof forwarded (destination shut for writing)
    std::uint64_t delivered = 0, spliced = 0, copied = 0;
  };
  enum class Step : std::uint8_t { wait, error };

  Step pump(Dir& d);
  Step to_copy(Dir& d, const char* why, int err);
  void fail(const Dir& d, bool reading, int err);
  State progress();
  State finish(EndReason r, std::string_view detail);
  void flush_counters() noexcept;
  ssize_t do_splice(int in, int out, std::size_t len) noexcept;

  TunnelEnv& env_;
  Dir dir_[2];
  int client_fd_ = -1, backend_fd_ = -1;
  State state_ = State::done;
  EndReason reason_ = EndReason::none;
  std::string detail_;
  bool fell_back_ = false;
  bool started_ = false;
  std::size_t pipe_max_ = 0;
  Clock::time_point last_io_{};
  std::uint64_t client_hdr_ = 0, backend_hdr_ = 0;
  std::uint64_t counted_spliced_ = 0, counted_copied_ = 0;  // already added to the counters
  int err_ = 0;
  const Dir* err_dir_ = nullptr;
  bool err_reading_ = false;
  ringlog::Txn txn_;
};

}  // namespace ringproxy::tunnel
