// writev and io_uring transports.
#include "ringproxy/delivery/transport.hpp"

#include <liburing.h>
#include <limits.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ringlog/log.hpp"

namespace ringproxy::delivery {

// ---------------------------------------------------------------- Sender
Sender::Sender(int fd, std::string head, Chain* body, std::size_t iov_cap)
    : fd_(fd), head_(std::move(head)), body_(body), sa_(std::max<std::size_t>(iov_cap, 2)) {
  if (!head_.empty()) sa_.add_noret(head_.data(), head_.size());
  if (!body_) sa_.set_end();
}

Sender::~Sender() {
  if (body_) {
    body_->give_all(sa_);
    if (nx_) body_->give_all(*nx_);
    body_->flush_returns();
  }
}

void Sender::enable_prefill() {
  if (body_ && !nx_) nx_ = std::make_unique<ScatterArray>(sa_.capacity());
}

void Sender::fail(int err) noexcept {
  err_ = err;
  status_ = Status::error;
}

bool Sender::fill() noexcept {
  if (status_ == Status::error || status_ == Status::done) return false;
  bool pull = true;
  if (nx_ && sa_.empty() && !sa_.end()) {
    if (!nx_->empty() || nx_->end()) {
      // The array filled during the last send goes now, as it is: what has come in
      // since is pulled (and read by the filters) while it is in flight.
      std::swap(sa_, *nx_);
      pull = false;
      ++prefilled_;
    } else if (nx_failed_) {
      fail(EIO);
      return false;
    }
  }
  if (pull && body_ && !pull_into(sa_)) {
    fail(EIO);
    return false;
  }
  if (sa_.empty()) {
    status_ = sa_.end() ? Status::done : Status::wait_data;
    return false;
  }
  return true;
}

void Sender::prefill() noexcept {
  prefill_pending_ = false;
  if (!nx_ || sa_.end() || nx_failed_) return;
  if (!pull_into(*nx_)) nx_failed_ = true;  // the bytes before it still go out; fill() fails after them
}

bool Sender::pull_into(ScatterArray& a) noexcept {
  for (int spins = 0; !a.end() && !a.full() && spins < 8; ++spins) {
    int r = body_->pull(a);
    if (r == kLeaseError) return false;
    if (r == kLeaseAgain || r == kLeaseReturnFirst) break;
  }
  return true;
}

void Sender::consume(std::size_t n) noexcept {
  sent_ += n;
  std::size_t k = 0;
  while (k < sa_.used()) {
    iovec& v = sa_.at(k);
    if (v.iov_len > n) {
      v.iov_base = static_cast<char*>(v.iov_base) + n;
      v.iov_len -= n;
      break;
    }
    n -= v.iov_len;
    if (body_) body_->give(sa_.lease(k));
    ++k;
  }
  sa_.drop_front(k);
  if (body_) body_->flush_returns();
  if (sa_.empty() && sa_.end()) status_ = Status::done;
}

// ---------------------------------------------------------------- writev
Sender::Status WritevTransport::pump(Sender& s) noexcept {
  while (true) {
    if (!s.fill()) return s.status_;
    int cnt = int(std::min<std::size_t>(s.sa_.used(), IOV_MAX));
    std::size_t want = 0;
    for (int i = 0; i < cnt; ++i) want += s.sa_.at(std::size_t(i)).iov_len;
    ssize_t n = ::writev(s.fd_, s.sa_.iov(), cnt);
    ++syscalls_;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return s.status_ = Sender::Status::wait_write;
      s.fail(errno);
      return s.status_;
    }
    s.consume(std::size_t(n));
    if (s.status_ == Sender::Status::done) return s.status_;
    if (std::size_t(n) < want) return s.status_ = Sender::Status::wait_write;  // socket buffer full
  }
}

// ---------------------------------------------------------------- io_uring
class UringTransport : public Transport {
 public:
  UringTransport(const TransportOptions& opt, ringlog::Log* log) : zc_threshold_(opt.zc_threshold), log_(log) {}
  ~UringTransport() override {
    if (inited_) io_uring_queue_exit(&ring_);
  }
  // 0 or -errno; *zc tells whether zero-copy send is there.
  int init(unsigned entries) {
    int r = io_uring_queue_init(entries, &ring_, 0);
    if (r < 0) return r;
    inited_ = true;
    io_uring_probe* p = io_uring_get_probe_ring(&ring_);
    if (!p) return -ENOSYS;
    bool ok = io_uring_opcode_supported(p, IORING_OP_SENDMSG);
    zc_ok_ = io_uring_opcode_supported(p, IORING_OP_SEND_ZC) && io_uring_opcode_supported(p, IORING_OP_SENDMSG_ZC);
    io_uring_free_probe(p);
    if (!ok) return -EOPNOTSUPP;
    return 0;
  }
  bool zc_ok() const noexcept { return zc_ok_; }
  const char* name() const noexcept override { return "io_uring"; }
  int completion_fd() const noexcept override { return ring_.ring_fd; }
  bool drives_loop() const noexcept override { return true; }

  bool recv(int fd, RecvOp& op) noexcept override {
    if (op.inflight) return true;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {
      flush();
      sqe = io_uring_get_sqe(&ring_);
      if (!sqe) return false;
    }
    io_uring_sqe* tsqe = nullptr;
    if (op.batch_us && io_uring_sq_space_left(&ring_) >= 1) tsqe = sqe;
    if (tsqe) {
      // MSG_WAITALL, cut by a linked timeout: a receive cancelled after some bytes
      // completes with those bytes, so a slow backend's data is handed on (and resets
      // the between-bytes timer) within batch_us, and a fast one's in large pieces.
      prep(sqe, fd, op, MSG_WAITALL);
      sqe->flags |= IOSQE_IO_LINK;
      io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(&op) | 1);
      auto* ts = reinterpret_cast<__kernel_timespec*>(op.ts_);
      ts->tv_sec = op.batch_us / 1'000'000;
      ts->tv_nsec = (op.batch_us % 1'000'000) * 1000LL;
      tsqe = io_uring_get_sqe(&ring_);
      io_uring_prep_link_timeout(tsqe, ts, 0);
      io_uring_sqe_set_data64(tsqe, kTimeoutTag);
      ++queued_;
    } else {
      prep(sqe, fd, op, 0);
      io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(&op) | 1);
    }
    op.inflight = true;
    op.done = false;
    ++queued_;
    return true;
  }
  static void prep(io_uring_sqe* sqe, int fd, RecvOp& op, int flags) noexcept {
    if (op.niov == 1) {
      io_uring_prep_recv(sqe, fd, op.iov[0].iov_base, op.iov[0].iov_len, flags);
    } else {
      op.msg_ = msghdr{};
      op.msg_.msg_iov = op.iov;
      op.msg_.msg_iovlen = op.niov;
      io_uring_prep_recvmsg(sqe, fd, &op.msg_, unsigned(flags));
    }
  }
  void take_recvs(std::vector<RecvOp*>& done) noexcept override {
    done.insert(done.end(), recvs_.begin(), recvs_.end());
    recvs_.clear();
  }
  std::size_t max_iov() const noexcept override { return IOV_MAX; }

  bool wait(int epoll_fd, int timeout_ms, std::vector<Sender*>& changed) noexcept override {
    if (poll_fd_ != epoll_fd) {  // (re)arm the multishot poll of the loop's epoll fd
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (!sqe) {
        flush();
        sqe = io_uring_get_sqe(&ring_);
      }
      if (sqe) {
        io_uring_prep_poll_multishot(sqe, epoll_fd, POLLIN);
        io_uring_sqe_set_data64(sqe, kPollTag);
        poll_fd_ = epoll_fd;
        ++queued_;
      } else {
        epoll_ready_ = true;  // cannot arm now: have the loop look at epoll itself
      }
    }
    if (timeout_ms > 0 && !epoll_ready_ && !io_uring_cq_ready(&ring_)) {
      __kernel_timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000LL};
      io_uring_cqe* cqe = nullptr;
      if (queued_) ++syscalls_, ++submits_;  // the submission rides on the wait
      queued_ = 0;
      int r;
      do r = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
      while (r == -EINTR);
    } else {
      flush();
    }
    reap(changed);
    bool ev = epoll_ready_;
    epoll_ready_ = false;
    return ev;
  }

  Sender::Status pump(Sender& s) noexcept override {
    if (s.inflight_) {
      // The next array is filled only once the kernel has the current one: the
      // filters' work then overlaps the transfer.
      if (s.nx_ && submits_ != s.queued_at_) s.prefill();
      return Sender::Status::inflight;
    }
    if (!s.fill()) return s.status_;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {  // the submission queue is full: send this batch now
      flush();
      sqe = io_uring_get_sqe(&ring_);
      if (!sqe) return s.status_ = Sender::Status::ready;
    }
    std::size_t cnt = std::min<std::size_t>(s.sa_.used(), IOV_MAX);
    std::size_t total = 0;
    for (std::size_t i = 0; i < cnt; ++i) total += s.sa_.at(i).iov_len;
    s.msg_ = msghdr{};
    s.msg_.msg_iov = s.sa_.iov();
    s.msg_.msg_iovlen = cnt;
    bool zc = zc_ok_ && s.zerocopy && zc_threshold_ && total >= zc_threshold_;
    // MSG_WAITALL: the kernel retries a short send itself (no system call of ours),
    // so one submission moves a whole scatter array however small the socket buffer.
    const int fl = MSG_NOSIGNAL | MSG_WAITALL;
    if (zc && cnt == 1)
      io_uring_prep_send_zc(sqe, s.fd_, s.sa_.at(0).iov_base, s.sa_.at(0).iov_len, fl, 0);
    else if (zc)
      io_uring_prep_sendmsg_zc(sqe, s.fd_, &s.msg_, fl);
    else
      io_uring_prep_sendmsg(sqe, s.fd_, &s.msg_, fl);
    io_uring_sqe_set_data(sqe, &s);
    s.queued_at_ = submits_;
    // Nothing to fill the next array with yet (a pass whose window is all in this
    // send): the object's notification brings the owner back when bytes come in.
    s.prefill_pending_ = s.nx_ && !s.sa_.end() && !s.nx_->end() && !s.nx_failed_ && s.body_->reader().readable();
    s.inflight_ = true;
    s.zc_ = zc;
    s.have_res_ = false;
    s.notif_pending_ = false;
    ++queued_;
    return s.status_ = Sender::Status::inflight;
  }

  void flush() noexcept override {
    if (!queued_) return;
    int r;
    do {
      r = io_uring_submit(&ring_);
    } while (r == -EINTR);
    ++syscalls_;
    ++submits_;
    queued_ = 0;
  }

  void reap(std::vector<Sender*>& changed) noexcept override {
    io_uring_cqe* cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++n;
      if (cqe->user_data == kTimeoutTag) continue;  // a receive's batch timeout
      if (cqe->user_data == kPollTag) {  // the loop's epoll fd has events
        epoll_ready_ = true;
        if (!(cqe->flags & IORING_CQE_F_MORE)) poll_fd_ = -1;  // the poll ended: re-arm
        continue;
      }
      if (cqe->user_data & 1) {  // a receive (tagged pointer)
        auto* op = reinterpret_cast<RecvOp*>(cqe->user_data & ~std::uint64_t(1));
        op->res = cqe->res;
        op->inflight = false;
        op->done = true;
        recvs_.push_back(op);
        continue;
      }
      auto* s = static_cast<Sender*>(io_uring_cqe_get_data(cqe));
      if (cqe->flags & IORING_CQE_F_NOTIF) {
        s->notif_pending_ = false;  // the kernel is done with the pages: leases may go back
      } else {
        s->res_ = cqe->res;
        s->have_res_ = true;
        s->notif_pending_ = (cqe->flags & IORING_CQE_F_MORE) != 0;
      }
      if (s->have_res_ && !s->notif_pending_) complete(*s, changed);
    }
    io_uring_cq_advance(&ring_, n);
  }

 private:
  void complete(Sender& s, std::vector<Sender*>& changed) noexcept {
    s.inflight_ = false;
    s.have_res_ = false;
    int res = s.res_;
    if (res >= 0) {
      if (s.zc_) ++zc_sends_;  // counted once it went through: a refused one is no zero-copy send
      s.consume(std::size_t(res));
      if (s.status_ != Sender::Status::done) s.status_ = Sender::Status::ready;
    } else if (res == -EAGAIN || res == -EWOULDBLOCK) {
      s.status_ = Sender::Status::wait_write;
    } else if (res == -EINTR) {
      s.status_ = Sender::Status::ready;
    } else if (s.zc_ && (res == -EOPNOTSUPP || res == -EINVAL)) {
      zc_ok_ = false;  // e.g. a socket family without zero-copy: plain sends from now on
      if (log_) log_->record(ringlog::Tag::Notice, "io_uring: zero-copy send refused, using plain sendmsg");
      s.status_ = Sender::Status::ready;
    } else {
      s.fail(-res);
    }
    changed.push_back(&s);
  }

  // user_data: a Sender*, a RecvOp* with the low bit set, or this (no object is at 2)
  static constexpr std::uint64_t kPollTag = 2;
  static constexpr std::uint64_t kTimeoutTag = 4;
  std::vector<RecvOp*> recvs_;
  io_uring ring_{};
  int poll_fd_ = -1;
  bool epoll_ready_ = false;
  bool inited_ = false;
  bool zc_ok_ = false;
  std::size_t zc_threshold_;
  unsigned queued_ = 0;
  std::uint64_t submits_ = 0;  // submissions so far (a Sender queued before the last one is in the kernel)
  ringlog::Log* log_;
};

std::unique_ptr<Transport> make_transport(const TransportOptions& opt, ringlog::Log* log, std::string* notice) {
  if (opt.kind == "io_uring") {
    auto t = std::make_unique<UringTransport>(opt, log);
    int r = t->init(opt.ring_entries);
    if (r == 0) return t;
    std::string why = std::string("io_uring refused by the kernel (") + std::strerror(-r) + "), using writev";
    if (log) log->record(ringlog::Tag::Notice, why);
    if (notice) *notice = why;
  }
  return std::make_unique<WritevTransport>();
}

}  // namespace ringproxy::delivery
