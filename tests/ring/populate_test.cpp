// OpenOptions::populate: a writer whose mapping was populated at open writes its first
// lap of the ring without a page fault per page; one that was not takes about one per
// 4 KiB page. Page faults are counted (getrusage, this thread), never timed.
#include <sys/mman.h>
#include <sys/resource.h>

#include <string>

#include <gtest/gtest.h>

#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;
using ringlog::test::ScratchPath;

namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

constexpr std::uint64_t kArea = 4u << 20;

long minor_faults() {
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// The minor faults taken while one lap of the ring (kArea bytes of messages) is written.
long faults_of_a_lap(bool populate) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = kArea}, {.populate = populate});
  const std::string msg(1000, 'x');
  EXPECT_EQ(r.write(msg), WriteStatus::ok);  // the writer slot and the first page
  long before = minor_faults();
  for (std::uint64_t n = 0; n < kArea / msg.size(); ++n) r.write(msg);
  return minor_faults() - before;
}

bool kernel_populates() {
  void* m = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  bool ok = ::madvise(m, 4096, MADV_POPULATE_WRITE) == 0;
  ::munmap(m, 4096);
  return ok;
}

}  // namespace

TEST(Populate, APopulatedWriterTakesNoFaultPerPage) {
  if (!kernel_populates()) GTEST_SKIP() << "the kernel has no MADV_POPULATE_WRITE (Linux 5.14)";
  const long pages = long(kArea / 4096);
  long plain = faults_of_a_lap(false);
  long populated = faults_of_a_lap(true);
  // A plain mapping faults on (nearly) every page; a populated one on hardly any (a
  // sanitizer's shadow pages may add some: a fraction of the pages, far below them).
  EXPECT_GE(plain, pages / 2) << "the writes did not fault: the test measures nothing";
  EXPECT_LT(populated, pages / 4) << "plain " << plain << " faults";
}

TEST(Populate, APopulatedRingReadsBackWhatWasWritten) {
  ScratchPath p;
  Ring r = Ring::create(p, {.area_size = 8192}, {.populate = true});
  Reader rd = Reader::open(p, {.start = StartAt::oldest});
  EXPECT_EQ(r.write("hello"), WriteStatus::ok);
  // A second writer opening the same ring populated changes no byte of it.
  Ring again = Ring::open(p, {.populate = true});
  EXPECT_EQ(again.write("world"), WriteStatus::ok);
  std::vector<std::byte> buf;
  ReadResult a = rd.next(buf);
  ASSERT_EQ(a.status, ReadStatus::message);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(buf.data()), buf.size()), "hello");
  ReadResult b = rd.next(buf);
  ASSERT_EQ(b.status, ReadStatus::message);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(buf.data()), buf.size()), "world");
}
