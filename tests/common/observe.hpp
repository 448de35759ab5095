// What the C++ tests wait on instead of sleeping: the one bounded poll loop
// (wait_until), and what a thread of this process is doing, read from /proc (its
// scheduler state, the system call it is blocked in and that call's first argument)
// and from getrusage (how often it gave up the CPU). Linux only.
#pragma once

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace ringlog::test {

// Polls pred() (observable state: a counter, a header field, a socket, /proc) until it
// holds; false if it still does not after timeout. The timeout only bounds a wait that
// would otherwise hang a broken build; it never decides a result on its own.
template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= end) return pred();
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // bounded poll on pred's state (above)
  }
  return true;
}

inline pid_t this_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// A thread id is also a /proc entry of its own, so these work for a thread of this
// process and for another process (its main thread: the pid) alike.
// The scheduler state letter of thread tid (R, S, D, T...), '?' if gone.
inline char thread_state(pid_t tid) {
  std::ifstream f("/proc/" + std::to_string(tid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto p = s.rfind(')');
  return p == std::string::npos || p + 2 >= s.size() ? '?' : s[p + 2];
}

// The system call thread tid is blocked in and its first argument, from
// /proc/TID/syscall; false while it runs in user space (or is gone).
struct BlockedCall {
  long nr = -1;
  unsigned long arg0 = 0;
};
inline bool blocked_call(pid_t tid, BlockedCall* out) {
  std::ifstream f("/proc/" + std::to_string(tid) + "/syscall");
  std::string first, arg0;
  if (!(f >> first) || first == "running" || first == "-1") return false;
  f >> arg0;
  out->nr = std::stol(first);
  out->arg0 = arg0.empty() ? 0 : std::stoul(arg0, nullptr, 16);
  return true;
}

// True once thread tid sleeps (state S) inside system call nr.
inline bool sleeping_in(pid_t tid, long nr) {
  BlockedCall c;
  return thread_state(tid) == 'S' && blocked_call(tid, &c) && c.nr == nr;
}

// Voluntary context switches of the calling thread so far: each time it blocked
// (a sleep, a futex wait, a blocking read). Unchanged across a call means the call
// never waited.
inline long voluntary_switches() {
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw;
}

}  // namespace ringlog::test
