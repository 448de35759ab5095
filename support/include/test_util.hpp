// Helpers shared by the test suites: scratch ring paths that clean up after
// themselves, and payload builders with a checksum so torn copies are caught.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace ringlog::test {

// A unique file path under /dev/shm (or $TMPDIR), removed when it goes out of scope.
class ScratchPath {
 public:
  explicit ScratchPath(const std::string& tag = "ring") {
    static std::atomic<unsigned> n{0};
    std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    path_ = base + "/ringlog-test-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(n++);
  }
  ~ScratchPath() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::string& str() const { return path_; }
  operator const std::string&() const { return path_; }

 private:
  std::string path_;
};

// fork() for test children: a child dies with its parent, so that a failed or
// aborted test never leaves writers running behind it.
inline pid_t fork_child() {
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(99);
  }
  return pid;
}

inline std::uint32_t fnv1a(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  std::uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 16777619u;
  return h;
}

// Stress payload: writer id, sequence, length, filler, and a checksum of all of it.
struct StressMsg {
  std::uint32_t writer;
  std::uint64_t seq;
};

inline std::string make_stress(std::uint32_t writer, std::uint64_t seq, std::size_t len) {
  if (len < 20) len = 20;
  std::string s(len, '\0');
  std::memcpy(&s[0], &writer, 4);
  std::memcpy(&s[4], &seq, 8);
  for (std::size_t i = 12; i < len - 4; ++i) s[i] = static_cast<char>('a' + (writer * 7 + seq + i) % 26);
  std::uint32_t c = fnv1a(s.data(), len - 4);
  std::memcpy(&s[len - 4], &c, 4);
  return s;
}

// Returns false if the payload is torn or corrupted.
inline bool check_stress(const void* p, std::size_t len, StressMsg& out) {
  if (len < 20) return false;
  const auto* b = static_cast<const unsigned char*>(p);
  std::uint32_t c;
  std::memcpy(&c, b + len - 4, 4);
  if (c != fnv1a(b, len - 4)) return false;
  std::memcpy(&out.writer, b, 4);
  std::memcpy(&out.seq, b + 4, 8);
  return true;
}

// HAProxy's benchmark mix: per round of 20, 2 small and 3 each of 20..270 bytes,
// behind an ~82-byte prefix: about 213 bytes on average.
inline std::size_t mix_len(std::uint64_t i) {
  static constexpr std::size_t kSizes[20] = {1, 1, 20, 20, 20, 70, 70, 70, 120, 120, 120,
                                             170, 170, 170, 220, 220, 220, 270, 270, 270};
  return 82 + kSizes[i % 20];
}

}  // namespace ringlog::test
