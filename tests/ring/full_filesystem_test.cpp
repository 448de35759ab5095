// Ring and stats files on a file system that fills up, as /dev/shm does when other rings
// or programs take its space: a file is allocated whole when it is created, so creating
// one that does not fit fails with a clear error, and a ring that was created keeps
// accepting writes (wrapping over its whole area) after the file system is full, where a
// sparse file would take a SIGBUS in the writer at its first unallocated page.
//
// Each case runs in a child process with a mount namespace of its own (and a user
// namespace when not root) holding a 1 MiB tmpfs; where namespaces or mounting are not
// permitted the case reports itself skipped.
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "ringlog/ring.hpp"
#include "ringlog/stats.hpp"

using namespace ringlog;

namespace {

constexpr int kNoNamespace = 77;  // the child could not set up its tmpfs
constexpr const char* kMount = "/tmp";  // mounted over in the child's namespace only

bool write_file(const char* path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return bool(f.flush());
}

// In a fresh child: a private mount namespace with a 1 MiB tmpfs at kMount.
bool enter_small_tmpfs() {
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  int flags = CLONE_NEWNS | (uid == 0 ? 0 : CLONE_NEWUSER);
  if (::unshare(flags) != 0) return false;
  if (uid != 0) {
    if (!write_file("/proc/self/setgroups", "deny") ||
        !write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"))
      return false;
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  return ::mount("ringlog-test", kMount, "tmpfs", 0, "size=1m") == 0;
}

// Fills the file system holding dir until it has no space left; returns the bytes taken.
std::size_t fill_up(const std::string& dir) {
  std::string path = dir + "/filler";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return 0;
  std::setvbuf(f, nullptr, _IONBF, 0);
  static char block[4096];
  std::size_t n = 0;
  while (std::fwrite(block, 1, sizeof block, f) == sizeof block) n += sizeof block;
  std::fclose(f);
  return n;
}

// Runs body in a child inside a 1 MiB tmpfs; body returns the child's exit code (0: the
// checks held). A signal in the child (a SIGBUS) fails the case with its name.
void in_small_tmpfs(const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t p = ::fork();
  ASSERT_GE(p, 0) << std::strerror(errno);
  if (p == 0) {
    if (!enter_small_tmpfs()) ::_exit(kNoNamespace);
    int rc;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "unexpected exception: %s\n", e.what());
      rc = 90;
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(p, &st, 0), p);
  if (WIFEXITED(st) && WEXITSTATUS(st) == kNoNamespace)
    GTEST_SKIP() << "no mount namespace with a tmpfs here (unshare/mount not permitted)";
  ASSERT_FALSE(WIFSIGNALED(st)) << "the child died of " << ::strsignal(WTERMSIG(st));
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "a check failed in the child (see its messages above)";
}

#define CHILD_CHECK(cond)                                                  \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                            \
    }                                                                      \
  } while (0)

}  // namespace

TEST(FullFileSystem, RingThatDoesNotFitIsRefusedAtCreation) {
  in_small_tmpfs([] {
    std::string path = std::string(kMount) + "/big/ring";
    try {
      Ring::create(path, {.area_size = 4u << 20});
      std::fprintf(stderr, "a 4 MiB ring was created on a 1 MiB tmpfs\n");
      return 1;
    } catch (const Error& e) {
      std::string what = e.what();
      CHILD_CHECK(e.code() == Errc::io);
      CHILD_CHECK(what.find("cannot allocate") != std::string::npos);
      CHILD_CHECK(what.find(std::strerror(ENOSPC)) != std::string::npos);
    }
    // Neither the ring nor its temporary file is left behind, and the space is free.
    CHILD_CHECK(::access(path.c_str(), F_OK) != 0);
    CHILD_CHECK(fill_up(kMount) > 900u * 1024);
    return 0;
  });
}

TEST(FullFileSystem, RingKeepsWritingAfterTheFileSystemFills) {
  in_small_tmpfs([] {
    std::string path = std::string(kMount) + "/ring";
    Ring r = Ring::create(path, {.area_size = 256u << 10});
    CHILD_CHECK(fill_up(kMount) > 0);
    // Four times round the area: every page of it is written, none was allocated lazily.
    std::string msg(200, 'm');
    std::uint64_t written = 0;
    for (int i = 0; written < 4 * r.area_size(); ++i) {
      CHILD_CHECK(r.write(msg) == WriteStatus::ok);
      written += msg.size();
    }
    CHILD_CHECK(r.area_size() == 256u << 10);
    return 0;
  });
}

TEST(FullFileSystem, StatsFileThatDoesNotFitIsRefusedAtCreation) {
  in_small_tmpfs([] {
    CHILD_CHECK(fill_up(kMount) > 0);
    std::string path = std::string(kMount) + "/stats";
    try {
      stats::Stats::create(path, {});
      std::fprintf(stderr, "a stats file was created on a full tmpfs\n");
      return 1;
    } catch (const Error& e) {
      CHILD_CHECK(e.code() == Errc::io);
      CHILD_CHECK(std::string(e.what()).find(std::strerror(ENOSPC)) != std::string::npos);
    }
    CHILD_CHECK(::access(path.c_str(), F_OK) != 0);
    return 0;
  });
}
