/* tcp_relay: the floor of what a proxy costs, for bench_proxy.sh. A byte relay that
 * knows nothing of HTTP: each client connection gets a connection of its own to the
 * backend, and whatever one side sends is passed to the other, as HAProxy does in
 * `mode tcp` without its stream processing. Per keep-alive request that is one recv and
 * one send in each direction, the fewest system calls a proxy making one per read and
 * per write can make, with almost no work in user space; so its req/s is the most such a
 * proxy can reach on the machine it runs on.
 *
 * THREADS event loops (edge-triggered epoll), each with a listener of its own on the
 * same port (SO_REUSEPORT spreads the connections, as in ringproxy). A read shorter than
 * its buffer emptied the socket, so the next bytes raise a new event and the relay does
 * not recv() again only to be told EAGAIN. Where the other side cannot take more, the
 * bytes wait in a 16 KiB buffer and that side's EPOLLOUT resumes the copy.
 *
 * Two more modes say what batching system calls would buy a proxy here:
 *   --batch-sends  the same epoll loop, but the sends of a loop turn go to the kernel
 *                  together at its end, in one io_uring_enter (MSG_DONTWAIT: each one
 *                  completes at once, with its bytes or EAGAIN, as send() would);
 *   --uring        no epoll: a receive outstanding on each side, its bytes sent to the
 *                  other side when it completes, the receive re-armed once the send has
 *                  completed; every submission and completion of a loop turn in one
 *                  io_uring_enter (DEFER_TASKRUN where the kernel has it).
 *
 * Usage: tcp_relay [--batch-sends | --uring] PORT BACKEND_PORT [THREADS]
 * 127.0.0.1 only; it runs until killed (SIGTERM). Exit codes: 1 bad arguments, 2 a
 * socket or io_uring could not be set up. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kBuf = 16384, kEvents = 256, kQueue = 2 * kEvents };

struct end {
  void *p;  /* its struct pair (epoll) or struct upair (io_uring) */
  int side; /* 0: the client, 1: the backend */
};

static int listen_port, backend_port;

static struct sockaddr_in loopback(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

static int listen_socket(int flags) {
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  int one = 1;
  struct sockaddr_in a = loopback(listen_port);
  if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
      bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 1024) < 0) {
    perror("tcp_relay: listen");
    exit(2);
  }
  return lfd;
}

/* The backend connection of a new client connection c (blocking: on loopback the
 * connect completes at once), or -1 with c closed. */
static int connect_backend(int c) {
  int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = loopback(backend_port);
  if (b < 0 || connect(b, (struct sockaddr *)&a, sizeof a) < 0) {
    if (b >= 0) close(b);
    close(c);
    return -1;
  }
  int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return b;
}

static void init_ring(struct io_uring *ring, unsigned entries) {
  struct io_uring_params prm;
  memset(&prm, 0, sizeof prm);
  prm.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  if (io_uring_queue_init_params(entries, ring, &prm) == 0) return;
  memset(&prm, 0, sizeof prm); /* a kernel without DEFER_TASKRUN */
  int r = io_uring_queue_init_params(entries, ring, &prm);
  if (r < 0) {
    fprintf(stderr, "tcp_relay: io_uring: %s\n", strerror(-r));
    exit(2);
  }
}

/* ---- epoll (and --batch-sends) ---- */

struct pair {
  int fd[2];
  int readable[2];       /* fd[i] may have bytes to read */
  int hup[2];            /* fd[i] reported a hang-up: read on to its EOF, which raises no event */
  int queued[2];         /* --batch-sends: buf[i] waits in this turn's sends */
  int dead;              /* closed this turn: its fds and memory go at the turn's end */
  size_t off[2], len[2]; /* buf[i]: read from fd[i], not yet sent to fd[1 - i] */
  struct pair *next_dead;
  struct end e[2];
  char buf[2][kBuf];
};

/* One event loop's state. */
struct loop {
  int ep, lfd;
  struct end listener; /* the data of the listener's epoll events */
  struct pair *dead;   /* closed this turn */
  int batch;           /* --batch-sends */
  struct io_uring ring;
  struct pair *q[kQueue]; /* this turn's sends: buf[qs[i]] of q[i] */
  int qs[kQueue], nq;
};

static void kill_pair(struct loop *l, struct pair *p) {
  if (p->dead) return;
  p->dead = 1;
  p->next_dead = l->dead;
  l->dead = p;
}

static void free_dead(struct loop *l) {
  while (l->dead) {
    struct pair *p = l->dead;
    l->dead = p->next_dead;
    close(p->fd[0]); /* closing drops the fds from epoll */
    close(p->fd[1]);
    free(p);
  }
}

/* Moves bytes from fd[from] to fd[1 - from] until one of them would block (or, batching,
 * until bytes wait to be sent); kills the pair at EOF or on an error. */
static void pump(struct loop *l, struct pair *p, int from) {
  int to = 1 - from;
  while (!p->dead) {
    if (p->len[from] && l->batch) {
      if (!p->queued[from]) { /* at most two per event: kQueue holds a turn's */
        p->queued[from] = 1;
        l->q[l->nq] = p;
        l->qs[l->nq++] = from;
      }
      return;
    }
    while (p->len[from]) {
      ssize_t n = send(p->fd[to], p->buf[from] + p->off[from], p->len[from], MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN) kill_pair(l, p);
        return; /* EAGAIN: the other side's EPOLLOUT resumes */
      }
      p->off[from] += (size_t)n;
      p->len[from] -= (size_t)n;
    }
    p->off[from] = 0;
    if (!p->readable[from]) return;
    ssize_t n = recv(p->fd[from], p->buf[from], kBuf, 0);
    if (n > 0) {
      p->len[from] = (size_t)n;
      if (n < kBuf && !p->hup[from]) p->readable[from] = 0; /* drained: new bytes raise an event */
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      kill_pair(l, p);
    } else if (errno == EAGAIN) {
      p->readable[from] = 0;
    }
  }
}

/* --batch-sends: this turn's sends, in one io_uring_enter; then what each one let
 * through goes on (more reads, more sends) until nothing is left to send this turn. */
static void flush_sends(struct loop *l) {
  struct pair *q[kQueue];
  int qs[kQueue];
  while (l->nq) {
    int m = l->nq;
    memcpy(q, l->q, sizeof q[0] * (size_t)m);
    memcpy(qs, l->qs, sizeof qs[0] * (size_t)m);
    l->nq = 0;
    int sent = 0;
    for (int i = 0; i < m; ++i) {
      struct pair *p = q[i];
      int f = qs[i];
      p->queued[f] = 0;
      if (p->dead) continue;
      struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring); /* the ring has kQueue entries */
      io_uring_prep_send(sqe, p->fd[1 - f], p->buf[f] + p->off[f], p->len[f], MSG_NOSIGNAL | MSG_DONTWAIT);
      io_uring_sqe_set_data64(sqe, (uint64_t)i);
      ++sent;
    }
    if (!sent) break;
    io_uring_submit_and_wait(&l->ring, (unsigned)sent);
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&l->ring, head, cqe) {
      ++seen;
      struct pair *p = q[cqe->user_data];
      int f = qs[cqe->user_data];
      if (cqe->res > 0) {
        p->off[f] += (size_t)cqe->res;
        p->len[f] -= (size_t)cqe->res;
      } else if (cqe->res != -EAGAIN) {
        kill_pair(l, p);
      }
    }
    io_uring_cq_advance(&l->ring, seen);
    /* Sent in full: read on (which may queue more). EAGAIN or a part: the other side's
     * EPOLLOUT resumes it. */
    for (int i = 0; i < m; ++i)
      if (!q[i]->dead && !q[i]->len[qs[i]] && !q[i]->queued[qs[i]]) pump(l, q[i], qs[i]);
  }
}

static void accept_all(struct loop *l) {
  for (;;) {
    int c = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return; /* EAGAIN (all taken) or a connection that went away */
    int b = connect_backend(c);
    if (b < 0) continue;
    struct pair *p = fcntl(b, F_SETFL, O_NONBLOCK) == 0 ? calloc(1, sizeof *p) : NULL;
    if (!p) {
      close(b);
      close(c);
      continue;
    }
    p->fd[0] = c;
    p->fd[1] = b;
    for (int i = 0; i < 2; ++i) {
      p->e[i].p = p;
      p->e[i].side = i;
      struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = &p->e[i]};
      epoll_ctl(l->ep, EPOLL_CTL_ADD, p->fd[i], &ev);
    }
  }
}

static void *epoll_loop(void *batch) {
  struct loop *l = calloc(1, sizeof *l);
  if (!l) exit(2);
  l->batch = batch != NULL;
  if (l->batch) init_ring(&l->ring, kQueue);
  l->lfd = listen_socket(SOCK_NONBLOCK);
  l->ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &l->listener};
  if (l->ep < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->lfd, &lev) < 0) {
    perror("tcp_relay: epoll");
    exit(2);
  }
  struct epoll_event evs[kEvents];
  for (;;) {
    int n = epoll_wait(l->ep, evs, kEvents, -1);
    for (int i = 0; i < n; ++i) {
      struct end *e = evs[i].data.ptr;
      if (e == &l->listener) {
        accept_all(l);
        continue;
      }
      struct pair *p = e->p;
      int s = e->side;
      if (p->dead) continue;
      if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) p->hup[s] = 1;
      if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) p->readable[s] = 1;
      pump(l, p, s);
      /* EPOLLOUT on s: what was read from the other side and waits for s. */
      if (evs[i].events & EPOLLOUT) pump(l, p, 1 - s);
    }
    if (l->batch) flush_sends(l);
    free_dead(l);
  }
  return NULL;
}

/* ---- --uring ---- */

/* The operation of a completion is in the low bits of its user data. */
enum { kOpRecv = 0, kOpSend = 1, kOpAccept = 2 };
struct upair {
  int fd[2];
  unsigned len[2], off[2]; /* buf[i]: received from fd[i], being sent to fd[1 - i] */
  int inflight;            /* operations the kernel holds: the pair is freed at 0 */
  int dead;
  struct end e[2];
  char buf[2][kBuf];
};

static struct io_uring_sqe *sqe_of(struct io_uring *ring) {
  struct io_uring_sqe *q = io_uring_get_sqe(ring);
  while (!q) { /* the queue is full: hand it to the kernel and take a free entry */
    io_uring_submit(ring);
    q = io_uring_get_sqe(ring);
  }
  return q;
}
static void arm_recv(struct io_uring *ring, struct upair *p, int s) {
  struct io_uring_sqe *q = sqe_of(ring);
  io_uring_prep_recv(q, p->fd[s], p->buf[s], kBuf, 0);
  io_uring_sqe_set_data64(q, (uint64_t)(uintptr_t)&p->e[s] | kOpRecv);
  p->inflight++;
}
static void arm_send(struct io_uring *ring, struct upair *p, int s) {
  struct io_uring_sqe *q = sqe_of(ring);
  io_uring_prep_send(q, p->fd[1 - s], p->buf[s] + p->off[s], p->len[s], MSG_NOSIGNAL);
  io_uring_sqe_set_data64(q, (uint64_t)(uintptr_t)&p->e[s] | kOpSend);
  p->inflight++;
}
static void arm_accept(struct io_uring *ring, int lfd) {
  struct io_uring_sqe *q = sqe_of(ring);
  io_uring_prep_accept(q, lfd, NULL, NULL, SOCK_CLOEXEC);
  io_uring_sqe_set_data64(q, kOpAccept);
}
static void kill_upair(struct upair *p) {
  if (p->dead) return;
  p->dead = 1;
  shutdown(p->fd[0], SHUT_RDWR); /* what the kernel still holds completes */
  shutdown(p->fd[1], SHUT_RDWR);
}

static void *uring_loop(void *arg) {
  (void)arg;
  int lfd = listen_socket(0);
  struct io_uring ring;
  init_ring(&ring, 512);
  arm_accept(&ring, lfd);
  for (;;) {
    io_uring_submit_and_wait(&ring, 1);
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      uint64_t d = cqe->user_data;
      int res = cqe->res;
      if (d == kOpAccept) {
        arm_accept(&ring, lfd);
        if (res < 0) continue;
        int b = connect_backend(res);
        if (b < 0) continue;
        struct upair *p = calloc(1, sizeof *p);
        if (!p) {
          close(b);
          close(res);
          continue;
        }
        p->fd[0] = res;
        p->fd[1] = b;
        for (int i = 0; i < 2; ++i) {
          p->e[i].p = p;
          p->e[i].side = i;
          arm_recv(&ring, p, i);
        }
        continue;
      }
      struct end *e = (struct end *)(uintptr_t)(d & ~(uint64_t)3);
      struct upair *p = e->p;
      int s = e->side;
      p->inflight--;
      if (p->dead) {
        /* only waits for the rest of its operations */
      } else if ((d & 3) == kOpRecv) {
        if (res <= 0) {
          kill_upair(p);
        } else {
          p->len[s] = (unsigned)res;
          p->off[s] = 0;
          arm_send(&ring, p, s);
        }
      } else if (res < 0) {
        kill_upair(p);
      } else {
        p->off[s] += (unsigned)res;
        p->len[s] -= (unsigned)res;
        if (p->len[s])
          arm_send(&ring, p, s);
        else
          arm_recv(&ring, p, s);
      }
      if (p->dead && p->inflight == 0) {
        close(p->fd[0]);
        close(p->fd[1]);
        free(p);
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
  return NULL;
}

int main(int argc, char **argv) {
  void *(*run)(void *) = epoll_loop;
  void *arg = NULL;
  if (argc > 1 && strcmp(argv[1], "--uring") == 0) {
    run = uring_loop;
    --argc, ++argv;
  } else if (argc > 1 && strcmp(argv[1], "--batch-sends") == 0) {
    arg = &listen_port; /* any non-null pointer: batch */
    --argc, ++argv;
  }
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: tcp_relay [--batch-sends | --uring] PORT BACKEND_PORT [THREADS]\n");
    return 1;
  }
  listen_port = atoi(argv[1]);
  backend_port = atoi(argv[2]);
  int threads = argc == 4 ? atoi(argv[3]) : 1;
  if (listen_port <= 0 || listen_port > 65535 || backend_port <= 0 || backend_port > 65535 || threads < 1 ||
      threads > 64) {
    fprintf(stderr, "tcp_relay: bad port or thread count\n");
    return 1;
  }
  pthread_t t;
  for (int i = 1; i < threads; ++i)
    if (pthread_create(&t, NULL, run, arg) != 0) {
      fprintf(stderr, "tcp_relay: cannot start a thread\n");
      return 2;
    }
  run(arg);
  return 0;
}
