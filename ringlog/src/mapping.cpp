// Mapping ring files (their headers checked by repair.cpp), naming instances, and the small
// process utilities (liveness, clocks, back-off) that the ring and readers share.
// Validation must never trust the file: every size is checked before it is used.
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include <boost/interprocess/exceptions.hpp>

#include "ring_impl.hpp"

namespace ringlog {

namespace bip = boost::interprocess;

std::string instance_dir(std::string_view name) {
  const char* base = std::getenv("RINGLOG_DIR");
  std::string dir = (base && *base) ? base : "/dev/shm/ringlog";
  if (name.empty()) name = kDefaultInstance;
  return dir + "/" + std::string(name);
}

std::string resolve_ring_path(std::string_view arg) {
  if (arg.empty()) return instance_dir(kDefaultInstance) + "/" + std::string(kRingFileName);
  std::string s(arg);
  struct stat st {};
  if (s.find('/') != std::string::npos || (::stat(s.c_str(), &st) == 0 && S_ISREG(st.st_mode)))
    return s;
  return instance_dir(s) + "/" + std::string(kRingFileName);
}

std::uint64_t process_start_time(pid_t pid) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (!f) return 0;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // Field 2 (comm) may hold spaces and parentheses: skip to the last ')'.
  char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  // After ") " come fields 3..; starttime is field 22.
  int field = 2;
  for (++p; *p && field < 22; ++p)
    if (*p == ' ') ++field;
  if (field != 22) return 0;
  std::uint64_t v = std::strtoull(p, nullptr, 10);
  // A zombie still has its /proc entry; it is dead for our purposes.
  char* st = std::strrchr(buf, ')');
  if (st && st[1] == ' ' && (st[2] == 'Z' || st[2] == 'X')) return 0;
  return v ? v : 1;
}

bool process_alive(pid_t pid, std::uint64_t start_time) noexcept {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::uint64_t st = process_start_time(pid);
  if (st == 0) return false;
  return start_time == 0 || st == start_time;
}

namespace detail {

namespace {
// glibc no longer caches getpid(): it is a system call (~400 ns in a VM), and the
// write path needs the pid on every lock. Cache it; a forked child resets the cache.
std::atomic<std::uint64_t> g_self_start{0};
std::once_flag g_atfork_once;
void reset_self_after_fork() noexcept { g_self_pid.store(0, std::memory_order_relaxed); }
}  // namespace

std::atomic<std::uint32_t> g_self_pid{0};

std::uint32_t self_pid_slow() noexcept {
  std::call_once(g_atfork_once, [] { ::pthread_atfork(nullptr, nullptr, reset_self_after_fork); });
  auto pid = static_cast<std::uint32_t>(::getpid());
  g_self_start.store(process_start_time(static_cast<pid_t>(pid)), std::memory_order_relaxed);
  g_self_pid.store(pid, std::memory_order_relaxed);
  return pid;
}
std::uint64_t self_start_time() noexcept {
  self_pid();
  return g_self_start.load(std::memory_order_relaxed);
}
std::uint32_t self_tid() noexcept {
  static thread_local std::uint32_t tid = 0;
  static thread_local std::uint32_t tid_pid = 0;
  std::uint32_t pid = self_pid();
  if (tid_pid != pid) {
    tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
    tid_pid = pid;
  }
  return tid;
}

void Backoff::pause() noexcept {
  if (n < 8) {
    for (unsigned i = 0; i < (1u << n); ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield" ::: "memory");
#endif
    }
  } else if (n < 40) {
    sched_yield();
  } else {
    timespec ts{0, n < 100 ? 20000 : 200000};
    nanosleep(&ts, nullptr);
  }
  ++n;
}

void give_to_ring_group(int fd) noexcept {
  const char* env = std::getenv("RINGLOG_GROUP");
  const char* name = env ? env : kDefaultRingGroup;
  if (!*name) return;
  // getgrnam_r: the library may run in threaded servers. ERANGE: a group with many
  // members needs a larger buffer.
  std::vector<char> buf(4096);
  group gr{};
  group* found = nullptr;
  int rc;
  while ((rc = ::getgrnam_r(name, &gr, buf.data(), buf.size(), &found)) == ERANGE && buf.size() < (1u << 20))
    buf.resize(buf.size() * 2);
  if (rc != 0 || !found) return;  // no such group here: the file keeps the creator's group
  // Permitted to root and to members of the group; for anyone else the file keeps the
  // creator's group, as it would without this step.
  (void)::fchown(fd, static_cast<uid_t>(-1), found->gr_gid);
}

int size_file(int fd, std::uint64_t size) noexcept {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return errno;
  // glibc emulates posix_fallocate where the file system has no fallocate (one write per
  // block); EINTR is retried, as the call may be interrupted on a large file.
  int rc;
  while ((rc = ::posix_fallocate(fd, 0, static_cast<off_t>(size))) == EINTR) {
  }
  return rc;
}

void Mapping::copy_in_wrap(std::uint64_t pos, const void* src, std::size_t n) const noexcept {
  const auto* s = static_cast<const std::uint8_t*>(src);
  std::uint64_t o = off(pos);
  while (n) {
    std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n, size - o));
#ifdef RINGLOG_TSAN
    store_relaxed(area + o, s, chunk);
#else
    std::memcpy(area + o, s, chunk);
#endif
    s += chunk;
    n -= chunk;
    o = 0;
  }
}

void Mapping::copy_out(std::uint64_t pos, void* dst, std::size_t n) const noexcept {
  auto* d = static_cast<std::uint8_t*>(dst);
  std::uint64_t o = off(pos);
  while (n) {
    std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n, size - o));
#ifdef RINGLOG_TSAN
    for (std::size_t i = 0; i < chunk; ++i)
      d[i] = std::atomic_ref<std::uint8_t>(area[o + i]).load(std::memory_order_relaxed);
#else
    std::memcpy(d, area + o, chunk);
#endif
    d += chunk;
    n -= chunk;
    o = 0;
  }
}

void Mapping::map(const std::string& p, bool writable) {
  path = p;
  int fd = ::open(p.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not hang us
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) throw Error(Errc::not_found, "ring " + p + ": no such file");
    if (e == EACCES || e == EPERM)
      throw Error(Errc::permission, "ring " + p + ": permission denied" +
                                        (writable ? " (writers and pinned readers need write access)" : ""));
    throw Error(Errc::io, "ring " + p + ": " + std::strerror(e));
  }
  ::close(fd);  // opened only to tell the errors apart; Boost maps by path
  struct stat st {};
  try {
    auto mode = writable ? bip::read_write : bip::read_only;
    file = bip::file_mapping(p.c_str(), mode);
    // The size and inode of what Boost opened, not of what the path names now.
    if (::fstat(file.get_mapping_handle().handle, &st) != 0 || !S_ISREG(st.st_mode))
      throw Error(Errc::bad_format, "ring " + p + ": not a regular file");
    if (static_cast<std::uint64_t>(st.st_size) < sizeof(Header))
      throw Error(Errc::bad_format,
                  "ring " + p + ": " + validate_header(nullptr, static_cast<std::uint64_t>(st.st_size)));
    region = bip::mapped_region(file, mode, 0, static_cast<std::size_t>(st.st_size));
  } catch (const bip::interprocess_exception& ex) {
    throw Error(Errc::io, "ring " + p + ": cannot map: " + ex.what());
  }
  dev = st.st_dev;
  ino = st.st_ino;
  auto fsize = static_cast<std::uint64_t>(st.st_size);
  if (region.get_size() != fsize) throw Error(Errc::io, "ring " + p + ": short mapping");
  can_write = writable;
  use(region.get_address(), fsize);
}

// MADV_POPULATE_WRITE (Linux 5.14) by its number where the C library's headers are older.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int Mapping::populate() const noexcept {
  if (!can_write || in_memory || !hdr) return 0;
  // Prefaults without changing a byte: safe while other processes write the ring.
  int rc;
  while ((rc = ::madvise(hdr, static_cast<std::size_t>(region.get_size()), MADV_POPULATE_WRITE)) != 0 &&
         errno == EINTR) {
  }
  return rc == 0 ? 0 : errno;
}

void Mapping::over(std::span<std::byte> image, bool writable) {
  path = "(memory)";
  if (reinterpret_cast<std::uintptr_t>(image.data()) % alignof(Header) != 0)
    throw Error(Errc::invalid_arg, "ring (memory): the image must be aligned to " +
                                       std::to_string(alignof(Header)) + " bytes");
  if (image.size() < sizeof(Header))
    throw Error(Errc::bad_format, "ring (memory): " + validate_header(nullptr, image.size()));
  can_write = writable;
  in_memory = true;
  use(image.data(), image.size());
}

void Mapping::use(void* base, std::uint64_t bytes) {
  hdr = static_cast<Header*>(base);
  std::string why = validate_header(hdr, bytes);
  if (!why.empty()) throw Error(Errc::bad_format, "ring " + path + ": " + why);
  area = static_cast<std::uint8_t*>(base) + hdr->header_len;
  size = hdr->area_size;
  mask = (size & (size - 1)) == 0 ? size - 1 : 0;
  prefetch_ahead = std::min<std::uint64_t>(kPrefetchAhead, size / 2);
}

bool Mapping::stale() const {
  if (in_memory) return false;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return true;
  return st.st_dev != dev || st.st_ino != ino;
}

}  // namespace detail
}  // namespace ringlog
