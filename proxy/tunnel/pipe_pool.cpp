// The pipe pool: creates pipes up to a bound, sizes them once, and recycles only empty
// ones. It never blocks and never throws; running out means "copy instead".
#include "ringproxy/tunnel/pipe_pool.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace ringproxy::tunnel {

PipePool::PipePool(const PipePoolOptions& opts) : opts_(opts) {
  if (opts_.max_idle > opts_.max_pipes) opts_.max_idle = opts_.max_pipes;
  idle_.reserve(opts_.max_idle);
}

PipePool::~PipePool() { trim(); }

std::optional<Pipe> PipePool::acquire() {
  if (!idle_.empty()) {
    Pipe p = idle_.back();
    idle_.pop_back();
    ++in_use_;
    ++reused_;
    return p;
  }
  if (in_use_ >= opts_.max_pipes) {
    ++refused_;
    return std::nullopt;
  }
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    ++refused_;
    return std::nullopt;
  }
  Pipe p{fds[0], fds[1], 0};
  // Past pipe-user-pages-soft the kernel refuses to grow a pipe (EPERM): the pipe
  // still works at its current size, so keep it and say so in resize_failed().
  if (opts_.pipe_size && ::fcntl(p.wr, F_SETPIPE_SZ, int(opts_.pipe_size)) < 0) ++resize_failed_;
  int sz = ::fcntl(p.wr, F_GETPIPE_SZ);
  p.size = sz > 0 ? std::size_t(sz) : 4096;
  ++created_;
  ++in_use_;
  return p;
}

void PipePool::release(Pipe p, bool empty) noexcept {
  if (!p) return;
  if (in_use_) --in_use_;
  if (empty && idle_.size() < opts_.max_idle) {
    idle_.push_back(p);
    return;
  }
  ::close(p.rd);
  ::close(p.wr);
}

void PipePool::trim() noexcept {
  for (Pipe& p : idle_) {
    ::close(p.rd);
    ::close(p.wr);
  }
  idle_.clear();
}

}  // namespace ringproxy::tunnel
