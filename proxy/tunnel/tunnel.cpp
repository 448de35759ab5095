// The tunnel's state machine: two directions, each either splicing through its own pipe
// or copying through its own buffer, driven by edge-triggered readiness. It must never
// splice into a non-empty pipe, never block, and never end without closing both sockets,
// giving its pipes back and ending its transaction.
#include "ringproxy/tunnel/tunnel.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ringlog/log.hpp"

namespace ringproxy::tunnel {

using ringlog::Tag;

std::string_view to_string(EndReason r) noexcept {
  switch (r) {
    case EndReason::none: return "none";
    case EndReason::eof: return "eof";
    case EndReason::error: return "error";
    case EndReason::timeout: return "timeout";
    case EndReason::abort: return "abort";
  }
  return "?";
}

std::string_view to_string(Mode m) noexcept { return m == Mode::splice ? "splice" : "copy"; }

namespace {
constexpr unsigned kSpliceFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;  // never SPLICE_F_MORE
constexpr std::uint32_t kEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;

bool refused(int e) noexcept { return e == EINVAL || e == ENOSYS; }
}  // namespace

Tunnel::Tunnel(TunnelEnv& env) : env_(env) {}

Tunnel::~Tunnel() {
  if (state_ == State::running) abort("destroyed");
}

ssize_t Tunnel::do_splice(int in, int out, std::size_t len) noexcept {
  return env_.splice_fn ? env_.splice_fn(in, nullptr, out, nullptr, len, kSpliceFlags)
                        : ::splice(in, nullptr, out, nullptr, len, kSpliceFlags);
}

State Tunnel::start(TunnelStart&& s) {
  client_fd_ = s.client_fd;
  backend_fd_ = s.backend_fd;
  state_ = State::running;
  started_ = true;
  client_hdr_ = s.client_hdr_bytes;
  backend_hdr_ = s.backend_hdr_bytes;

  Dir& up = dir_[kUp];
  Dir& down = dir_[kDown];
  up.src = client_fd_, up.dst = backend_fd_, up.src_name = "client", up.dst_name = "backend";
  down.src = backend_fd_, down.dst = client_fd_, down.src_name = "backend", down.dst_name = "client";
  up.buf = std::move(s.to_backend);
  up.len = up.buf.size();
  down.buf = std::move(s.to_client);
  down.len = down.buf.size();

  if (s.txn.active())
    txn_ = std::move(s.txn);
  else if (env_.log)
    txn_ = env_.log->begin(ringlog::TxnType::bereq, "pipe", s.parent_vxid);
  txn_.timestamp("Pipe");

  const char* why = nullptr;
  if (!env_.opts.splice || !env_.pool || env_.pool->options().max_pipes == 0) {
    why = "splice off";
  } else {
    auto a = env_.pool->acquire();
    auto b = a ? env_.pool->acquire() : std::nullopt;
    if (a && b) {
      up.pipe = *a, down.pipe = *b;
      up.mode = down.mode = Mode::splice;
    } else {
      if (a) env_.pool->release(*a, true);
      why = "pipe pool exhausted";
      fell_back_ = true;
      if (env_.stats) env_.stats->tunnel_fell_back();
    }
  }
  if (why)
    txn_.recordf(Tag::Notice, "tunnel copy (%s)", why);
  else
    txn_.recordf(Tag::Notice, "tunnel splice (pipe %zu bytes)", up.pipe.size);
  if (env_.stats) env_.stats->tunnel_started();

  last_io_ = Clock::now();
  env_.host->watch(client_fd_, kEvents, this);
  env_.host->watch(backend_fd_, kEvents, this);
  return progress();
}

State Tunnel::on_event(int fd, std::uint32_t events) {
  if (state_ != State::running) return state_;
  if (events & EPOLLERR) {
    int e = 0;
    socklen_t l = sizeof e;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) == 0 && e != 0) {
      fail(fd == client_fd_ ? dir_[kUp] : dir_[kDown], true, e);
      return finish(EndReason::error, "");
    }
  }
  for (Dir& d : dir_) {
    if (d.src == fd && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) d.src_ready = true;
    if (d.dst == fd && (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))) d.dst_ready = true;
  }
  return progress();
}

State Tunnel::on_timer(Clock::time_point now) {
  if (state_ != State::running) return state_;
  if (now >= deadline()) {
    if (env_.stats) env_.stats->tunnel_idle_timeout();
    return finish(EndReason::timeout, "idle");
  }
  return state_;
}

State Tunnel::abort(std::string_view why) {
  if (state_ != State::running) return state_;
  return finish(EndReason::abort, why);
}

Clock::time_point Tunnel::deadline() const noexcept {
  if (env_.opts.idle_timeout.count() <= 0) return Clock::time_point::max();
  return last_io_ + env_.opts.idle_timeout;
}

State Tunnel::progress() {
  // Activity (for the idle timeout): bytes delivered, or an end of stream seen now.
  auto activity = [this] { return dir_[kUp].delivered + dir_[kDown].delivered + dir_[kUp].eof + dir_[kDown].eof; };
  std::uint64_t before = activity();
  for (Dir& d : dir_) {
    if (d.done) continue;
    if (pump(d) == Step::error) return finish(EndReason::error, "");
  }
  if (activity() != before) last_io_ = Clock::now();
  if (dir_[kUp].done && dir_[kDown].done) return finish(EndReason::eof, "both sides closed");
  flush_counters();
  return State::running;
}

// Moves bytes src -> dst until the kernel says EAGAIN on the side we need next.
Tunnel::Step Tunnel::pump(Dir& d) {
  for (;;) {
    // 1. Bytes in the user-space buffer (copy mode, or initial bytes) go first.
    if (d.off < d.len) {
      if (!d.dst_ready) return Step::wait;
      ssize_t n = ::send(d.dst, d.buf.data() + d.off, d.len - d.off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          d.dst_ready = false;
          return Step::wait;
        }
        fail(d, false, errno);
        return Step::error;
      }
      d.off += std::size_t(n);
      d.delivered += std::uint64_t(n);
      d.copied += std::uint64_t(n);
      if (d.off == d.len) d.off = d.len = 0;
      continue;
    }
    // 2. Bytes in the pipe drain into the destination before the source is read again.
    if (d.in_pipe) {
      if (!d.dst_ready) return Step::wait;
      ssize_t n = do_splice(d.pipe.rd, d.dst, d.in_pipe);
      if (n < 0) {
        int e = errno;
        if (e == EINTR) continue;
        if (e == EAGAIN) {
          d.dst_ready = false;
          return Step::wait;
        }
        if (refused(e)) {
          if (to_copy(d, "splice to socket refused", e) == Step::error) return Step::error;
          continue;
        }
        fail(d, false, e);
        return Step::error;
      }
      d.in_pipe -= std::size_t(n);
      d.delivered += std::uint64_t(n);
      d.spliced += std::uint64_t(n);
      continue;
    }
    // 3. Nothing held: forward an end of stream, or read more.
    if (d.eof) {
      // The peer may already be gone (ENOTCONN): the direction is over either way.
      ::shutdown(d.dst, SHUT_WR);
      d.done = true;
      if (d.mode == Mode::splice) {
        env_.pool->release(d.pipe, true);  // empty: reusable at once
        d.pipe = Pipe{};
      }
      return Step::wait;
    }
    if (!d.src_ready) return Step::wait;
    if (d.mode == Mode::splice) {
      ssize_t n = do_splice(d.src, d.pipe.wr, d.pipe.size);
      if (n > 0) {
        d.in_pipe = std::size_t(n);
        if (d.in_pipe > pipe_max_) pipe_max_ = d.in_pipe;
        continue;
      }
      if (n == 0) {
        d.eof = true;
        continue;
      }
      int e = errno;
      if (e == EINTR) continue;
      if (e == EAGAIN) {  // the pipe is empty, so it is the socket that is drained
        d.src_ready = false;
        return Step::wait;
      }
      if (refused(e)) {
        if (to_copy(d, "splice from socket refused", e) == Step::error) return Step::error;
        continue;
      }
      fail(d, true, e);
      return Step::error;
    }
    if (d.buf.size() < env_.opts.copy_buffer) d.buf.resize(env_.opts.copy_buffer ? env_.opts.copy_buffer : 16384);
    ssize_t n = ::recv(d.src, d.buf.data(), d.buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      d.off = 0;
      d.len = std::size_t(n);
      continue;
    }
    if (n == 0) {
      d.eof = true;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      d.src_ready = false;
      return Step::wait;
    }
    fail(d, true, errno);
    return Step::error;
  }
}

// splice(2) refused this pair of files: move what the pipe holds into the buffer and
// copy from now on. The buffer is empty here (it is always sent before the pipe).
Tunnel::Step Tunnel::to_copy(Dir& d, const char* why, int err) {
  if (d.in_pipe) {
    d.buf.resize(std::max(env_.opts.copy_buffer, d.in_pipe));
    std::size_t got = 0;
    while (got < d.in_pipe) {
      ssize_t n = ::read(d.pipe.rd, d.buf.data() + got, d.in_pipe - got);
      if (n > 0) {
        got += std::size_t(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      fail(d, true, n < 0 ? errno : EIO);
      return Step::error;
    }
    d.off = 0;
    d.len = got;
    d.in_pipe = 0;
  }
  env_.pool->release(d.pipe, true);
  d.pipe = Pipe{};
  d.mode = Mode::copy;
  if (!fell_back_) {
    fell_back_ = true;
    if (env_.stats) env_.stats->tunnel_fell_back();
  }
  txn_.recordf(Tag::Notice, "tunnel copy %s->%s (%s: %s)", d.src_name, d.dst_name, why, std::strerror(err));
  return Step::wait;
}

void Tunnel::fail(const Dir& d, bool reading, int err) {
  err_ = err;
  err_dir_ = &d;
  err_reading_ = reading;
}

State Tunnel::finish(EndReason r, std::string_view detail) {
  state_ = State::done;
  reason_ = r;
  detail_.assign(detail);
  if (r == EndReason::error && err_dir_) {
    detail_ = std::string(err_reading_ ? err_dir_->src_name : err_dir_->dst_name) + ": " +
              (err_reading_ ? "read: " : "write: ") + std::strerror(err_);
  }
  // A failed side makes the other one see a reset, not a clean end of stream it could
  // mistake for a complete transfer.
  if (r == EndReason::error) {
    linger lg{1, 0};
    ::setsockopt(client_fd_, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    ::setsockopt(backend_fd_, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  for (int fd : {client_fd_, backend_fd_}) {
    if (fd < 0) continue;
    if (started_) env_.host->unwatch(fd);
    ::close(fd);
  }
  client_fd_ = backend_fd_ = -1;
  for (Dir& d : dir_) {
    if (d.pipe) env_.pool->release(d.pipe, d.in_pipe == 0);
    d.pipe = Pipe{};
    d.src = d.dst = -1;
  }
  flush_counters();
  if (env_.stats) env_.stats->tunnel_ended();
  txn_.recordf(Tag::PipeAcct, "%llu %llu %llu %llu", (unsigned long long)client_hdr_,
               (unsigned long long)backend_hdr_, (unsigned long long)dir_[kUp].delivered,
               (unsigned long long)dir_[kDown].delivered);
  txn_.timestamp("PipeSess");
  txn_.recordf(Tag::Notice, "tunnel end %.*s: %s", int(to_string(r).size()), to_string(r).data(), detail_.c_str());
  txn_.end();
  return state_;
}

void Tunnel::flush_counters() noexcept {
  if (!env_.stats) return;
  std::uint64_t s = spliced_bytes(), c = copied_bytes();
  if (s != counted_spliced_ || c != counted_copied_) env_.stats->tunnel_bytes(s - counted_spliced_, c - counted_copied_);
  counted_spliced_ = s;
  counted_copied_ = c;
}

}  // namespace ringproxy::tunnel
