// A bounded pool of kernel pipes for splice(2) tunnels, one pool per worker thread.
// Each pipe costs two file descriptors and its page slots count against the user's
// pipe-user-pages-soft limit, so the pool caps how many exist at once and keeps only a
// few idle ones. Not thread-safe: it belongs to the event loop that owns its tunnels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace ringproxy::tunnel {

struct PipePoolOptions {
  // Asked with F_SETPIPE_SZ; 0 keeps the kernel default (64 KiB). Bigger pipes mean
  // fewer splice calls per MB (bench_tunnel: tunnel CPU per GB about halves from 64 KiB
  // to 256 KiB) but count against pipe-user-pages-soft (16384 pages by default, per
  // user): past it the kernel refuses to grow pipes and they keep their default size.
  std::size_t pipe_size = 256 * 1024;
  std::size_t max_pipes = 256;        // pipes alive at once (in use + idle); 0 = splice off
  std::size_t max_idle = 32;          // empty pipes kept for the next tunnels
};

// Both ends of one pipe, non-blocking and close-on-exec. size: its capacity in bytes as
// the kernel reports it (F_GETPIPE_SZ), which may differ from what was asked.
struct Pipe {
  int rd = -1;
  int wr = -1;
  std::size_t size = 0;
  explicit operator bool() const noexcept { return rd >= 0; }
};

class PipePool {
 public:
  explicit PipePool(const PipePoolOptions& opts = {});
  ~PipePool();  // closes the idle pipes; pipes still handed out are the holder's to give back
  PipePool(const PipePool&) = delete;
  PipePool& operator=(const PipePool&) = delete;

  // An empty pipe, reused or new; nullopt when max_pipes are out or the kernel refuses
  // a new one (EMFILE, ENFILE): the caller copies instead.
  std::optional<Pipe> acquire();
  // Gives a pipe back. Only a pipe known to be empty is kept for reuse (data left in a
  // pipe would leak into the next tunnel); any other is closed.
  void release(Pipe p, bool empty) noexcept;
  // Closes every idle pipe (e.g. when the loop goes idle or stops).
  void trim() noexcept;

  const PipePoolOptions& options() const noexcept { return opts_; }
  std::size_t in_use() const noexcept { return in_use_; }
  std::size_t idle() const noexcept { return idle_.size(); }
  std::uint64_t created() const noexcept { return created_; }
  std::uint64_t reused() const noexcept { return reused_; }
  std::uint64_t refused() const noexcept { return refused_; }       // acquire() returned nullopt
  std::uint64_t resize_failed() const noexcept { return resize_failed_; }  // F_SETPIPE_SZ refused

 private:
  PipePoolOptions opts_;
  std::vector<Pipe> idle_;
  std::size_t in_use_ = 0;
  std::uint64_t created_ = 0;
  std::uint64_t reused_ = 0;
  std::uint64_t refused_ = 0;
  std::uint64_t resize_failed_ = 0;
};

}  // namespace ringproxy::tunnel
