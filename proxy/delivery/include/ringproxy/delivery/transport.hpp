// Transports: move a response (head bytes + body chain) to a socket without blocking.
// writev: one writev(2) per scatter array. io_uring: every send queued during a loop
// iteration, over all connections, goes to the kernel in one submission at flush();
// arrays of at least zc_threshold bytes use zero-copy send (IORING_OP_SEND_ZC /
// SENDMSG_ZC) and their leases go back only on the notification completion.
#pragma once
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringproxy/delivery/filters.hpp"

namespace ringlog { class Log; }

namespace ringproxy::delivery {

// One response on one connection. The owner keeps it alive while inflight() (io_uring
// holds pointers into it until the completion, and for zero-copy the notification,
// has been reaped), and keeps its Chain alive longer than the Sender.
class Sender {
 public:
  // ready: pump again now (io_uring: a send completed, more may go)
  enum class Status { wait_data, wait_write, inflight, ready, done, error };
  // body may be null (HEAD, 304, errors): the head alone is sent.
  Sender(int fd, std::string head, Chain* body, std::size_t iov_cap = 64);
  ~Sender();  // gives back what it still holds
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  int fd() const noexcept { return fd_; }
  bool inflight() const noexcept { return inflight_; }
  bool finished() const noexcept { return status_ == Status::done || status_ == Status::error; }
  Status status() const noexcept { return status_; }
  std::uint64_t bytes_sent() const noexcept { return sent_; }
  std::uint64_t body_bytes_sent() const noexcept { return sent_ > head_.size() ? sent_ - head_.size() : 0; }
  int error() const noexcept { return err_; }
  void* user = nullptr;  // the owner's connection
  // Zero-copy sends allowed (io_uring). Off towards loopback peers: the kernel copies
  // there anyway when the bytes reach the local socket, and each send then costs a
  // second completion and holds its leases until the peer has read the bytes.
  bool zerocopy = true;
  // io_uring: a second scatter array of the same capacity, filled from the chain while
  // the first one's send is in the kernel, and sent as it is when that send completes.
  // For chains whose filters read every byte (crc32, gzip): their work then overlaps
  // the transfer instead of alternating with it. Call before the first pump().
  void enable_prefill();
  // A send is queued but not yet submitted, and the next array waits to be filled: the
  // owner pumps again after the loop's next submission (the prefill runs then, so the
  // kernel sends while the filters work).
  bool prefill_pending() const noexcept { return prefill_pending_; }
  // Arrays sent that were filled while the one before them was in flight.
  std::uint64_t prefilled_arrays() const noexcept { return prefilled_; }

 private:
  friend class WritevTransport;
  friend class UringTransport;
  // Fills the array from the chain. Returns false (status set) when there is nothing to send.
  bool fill() noexcept;
  // Fills the next array (enable_prefill) while the current one is in flight.
  void prefill() noexcept;
  // Pulls from the chain into a until it is full, ends or the chain has nothing now
  // (at most 8 pulls). False: the chain failed.
  bool pull_into(ScatterArray& a) noexcept;
  void consume(std::size_t n) noexcept;  // n bytes went out: give back finished extents
  void fail(int err) noexcept;

  int fd_;
  std::string head_;
  Chain* body_;
  ScatterArray sa_;
  std::unique_ptr<ScatterArray> nx_;  // enable_prefill: the array filled while sa_ is in flight
  bool nx_failed_ = false;            // the chain failed during a prefill (reported after nx_)
  bool prefill_pending_ = false;
  std::uint64_t prefilled_ = 0;
  std::uint64_t queued_at_ = 0;       // io_uring: the transport's submission count at queueing
  Status status_ = Status::wait_data;
  std::uint64_t sent_ = 0;
  int err_ = 0;
  // io_uring state
  bool inflight_ = false;
  bool zc_ = false;
  bool have_res_ = false;
  bool notif_pending_ = false;
  int res_ = 0;
  msghdr msg_{};
};

// A receive through the transport (io_uring: submitted with the loop turn's sends, its
// completion reaped by the loop's wait, no readiness event and no recv(2) of its own).
// The owner keeps it, and the buffer, alive while inflight.
struct RecvOp {
  void* user = nullptr;  // the owner's session; null once orphaned (reaped, then freed)
  int res = 0;           // bytes received, 0 at end of stream, or -errno
  bool inflight = false;
  bool done = false;     // res holds a result not yet taken
  // batch_us > 0: the receive waits until len bytes are in or batch_us has passed since
  // it was submitted, whichever is first (fewer, larger completions from a fast peer; a
  // slow peer's bytes still come out within batch_us). 0: whatever has arrived.
  unsigned batch_us = 0;
  static constexpr std::size_t kMaxSpans = 8;
  iovec iov[kMaxSpans]{};  // where the bytes go (the owner fills them before recv())
  std::size_t niov = 0;
  msghdr msg_{};           // the kernel reads these while the receive is queued
  long long ts_[2] = {0, 0};  // the kernel's timespec for the batch timeout
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const noexcept = 0;
  // Sends (writev) or queues (io_uring) as much as possible. Returns the new status:
  // wait_data (a notification is armed), wait_write (poll EPOLLOUT, then pump again),
  // inflight (io_uring: wait for reap), done, error.
  virtual Sender::Status pump(Sender& s) noexcept = 0;
  // End of a loop iteration: io_uring submits what was queued (one system call).
  virtual void flush() noexcept {}
  // io_uring: poll this fd for reading; then reap() appends senders whose send completed.
  virtual int completion_fd() const noexcept { return -1; }
  virtual void reap(std::vector<Sender*>& changed) noexcept { (void)changed; }
  // io_uring: the event loop may wait here instead of in epoll_wait. The epoll fd is
  // polled through the ring, so one system call submits the turn's sends and waits for
  // a completion, epoll readiness or the timeout.
  virtual bool drives_loop() const noexcept { return false; }
  // Submits what is queued, waits up to timeout_ms (0: only looks) for a completion or
  // for the watched epoll fd to become readable, and appends senders whose send
  // completed to changed. Returns true when the epoll fd has events to collect.
  virtual bool wait(int epoll_fd, int timeout_ms, std::vector<Sender*>& changed) noexcept {
    (void)epoll_fd, (void)timeout_ms, (void)changed;
    return true;
  }
  // Queues a receive into op.iov[0..niov) (io_uring only; false: not offered, the
  // caller reads the socket itself). Its completion comes out of take_recvs().
  virtual bool recv(int fd, RecvOp& op) noexcept {
    (void)fd, (void)op;
    return false;
  }
  // Appends the receives completed by the last wait()/reap() to done.
  virtual void take_recvs(std::vector<RecvOp*>& done) noexcept { (void)done; }
  // Most extents one send can carry (a Sender's scatter array need not be larger).
  virtual std::size_t max_iov() const noexcept { return 64; }
  // System calls made for sending (writev calls or io_uring_enter submissions).
  std::uint64_t syscalls() const noexcept { return syscalls_; }
  // Zero-copy sends completed (io_uring), not counting those the kernel refused.
  std::uint64_t zc_sends() const noexcept { return zc_sends_; }

 protected:
  std::uint64_t syscalls_ = 0;
  std::uint64_t zc_sends_ = 0;
};

class WritevTransport : public Transport {
 public:
  const char* name() const noexcept override { return "writev"; }
  Sender::Status pump(Sender& s) noexcept override;
};

struct TransportOptions {
  std::string kind = "writev";           // "writev" | "io_uring"
  unsigned ring_entries = 256;
  std::size_t zc_threshold = 64 << 10;   // 0 disables zero-copy
};

// kind "io_uring" falls back to writev when the kernel refuses io_uring; the reason
// goes to *notice (and to log as a Notice record when log is given).
std::unique_ptr<Transport> make_transport(const TransportOptions& opt, ringlog::Log* log = nullptr,
                                          std::string* notice = nullptr);

}  // namespace ringproxy::delivery
