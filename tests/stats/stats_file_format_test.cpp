// The stats file is self-describing and validated on open: the documented offsets hold,
// a damaged or foreign file is refused with a clear error, and damaged entries in a
// valid file are skipped without reading out of bounds (run under ASan).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "ringlog/stats.hpp"
#include "ringlog/stats_format.hpp"
#include "ringproxy/counters.hpp"
#include "stats_test_util.hpp"

namespace rs = ringlog::stats;
namespace pc = ringproxy::counters;  // MAIN and VBE, the proxy's groups
namespace fmt = ringlog::stats::format;

namespace {

void expect_open_error(const std::string& path, ringlog::Errc code, const char* words) {
  try {
    (void)rs::StatsReader::open(path);
    ADD_FAILURE() << "opened a bad file";
  } catch (const ringlog::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

// Maps the file read-write to damage it the way a crash or a stray write would.
struct Raw {
  void* p = nullptr;
  std::size_t n = 0;
  explicit Raw(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR);
    n = static_cast<std::size_t>(::lseek(fd, 0, SEEK_END));
    p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
  }
  ~Raw() { ::munmap(p, n); }
  fmt::Header& h() { return *static_cast<fmt::Header*>(p); }
};

TEST(StatsFileFormat, HeaderDescribesTheFile) {
  ringlog::test::ScratchDir dir;
  rs::StatsOptions o;
  o.max_groups = 10;
  o.max_counters = 100;
  o.max_slabs = 5;
  auto stats = rs::Stats::create(dir.file("stats"), o);
  Raw raw(dir.file("stats"));
  const fmt::Header& h = raw.h();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&h.magic), 8), "RLSTATS1");
  EXPECT_EQ(h.version, 1u);
  EXPECT_EQ(h.header_len, 4096u);
  EXPECT_EQ(h.file_size, raw.n);
  EXPECT_EQ(h.max_groups, 10u);
  EXPECT_EQ(h.max_counters, 100u);
  EXPECT_EQ(h.max_slabs, 5u);
  EXPECT_EQ(h.slab_stride % 64, 0u);
  EXPECT_EQ(h.slab_stride, 64u + 832u);  // 100 values rounded up to 13 lines
  EXPECT_EQ(h.groups_off, 4096u);
  EXPECT_EQ(h.creator_pid, static_cast<std::uint32_t>(::getpid()));
  EXPECT_EQ(h.generation.load(), 0u);
  auto g = stats.add_group("MAIN", "", pc::main::kDefs);
  EXPECT_EQ(h.generation.load(), 2u);
  stats.register_thread();  // claims slab 1 for this thread
  EXPECT_EQ(h.slabs_hwm.load(), 2u);
  g.add(pc::main::client_req);  // into that slab
  EXPECT_EQ(h.slabs_hwm.load(), 2u);
  std::thread([&] { g.add(pc::main::client_req); }).join();  // another thread, slab 2
  EXPECT_EQ(h.slabs_hwm.load(), 3u);
  std::thread([&] { g.add(pc::main::client_req); }).join();  // reuses the released slab 2
  EXPECT_EQ(h.slabs_hwm.load(), 3u);
  auto* slab2 = reinterpret_cast<const fmt::SlabHeader*>(static_cast<const std::uint8_t*>(raw.p) + h.slabs_off +
                                                        2 * h.slab_stride);
  EXPECT_EQ(slab2->claims.load(), 2u);
  EXPECT_EQ(slab2->owner_pid.load(), 0u);  // free again: its thread exited
  // Slab values are cache-line aligned.
  EXPECT_EQ((h.slabs_off + sizeof(fmt::SlabHeader)) % 64, 0u);
}

TEST(StatsFileFormat, RefusesForeignAndDamagedFiles) {
  ringlog::test::ScratchDir dir;
  {
    std::ofstream(dir.file("small")) << "hello";
    expect_open_error(dir.file("small"), ringlog::Errc::bad_format, "too small");
    std::ofstream f(dir.file("zeros"));
    f << std::string(8192, '\0');
  }
  expect_open_error(dir.file("zeros"), ringlog::Errc::bad_format, "bad magic");
  expect_open_error(dir.file("missing"), ringlog::Errc::not_found, "cannot open");

  auto stats = rs::Stats::create(dir.file("stats"));
  auto damage = [&](auto&& fn, const char* words) {
    {
      Raw raw(dir.file("stats"));
      fmt::Header saved;
      std::memcpy(static_cast<void*>(&saved), raw.p, 128);
      fn(raw.h());
      expect_open_error(dir.file("stats"), ringlog::Errc::bad_format, words);
      std::memcpy(raw.p, &saved, 128);
    }
    EXPECT_NO_THROW((void)rs::StatsReader::open(dir.file("stats")));
  };
  damage([](fmt::Header& h) { h.version = 99; }, "version 99");
  damage([](fmt::Header& h) { h.byte_order = 0x04030201; }, "byte order");
  damage([](fmt::Header& h) { h.file_size += 4096; }, "file size");
  damage([](fmt::Header& h) { h.max_counters = 0; }, "counter count");
  damage([](fmt::Header& h) { h.max_slabs = 1u << 30; }, "slab count");
  damage([](fmt::Header& h) { h.slab_stride = 8; }, "stride");
  damage([](fmt::Header& h) { h.slabs_off = h.file_size - 64; }, "slabs out of the file");
  damage([](fmt::Header& h) { h.descs_off = ~std::uint64_t{0} - 63; }, "descriptor table");
}

TEST(StatsFileFormat, DamagedEntriesAreSkippedSafely) {
  ringlog::test::ScratchDir dir;
  rs::StatsOptions o;
  o.max_groups = 8;
  o.max_counters = 128;  // MAIN and one VBE group, with room to grow
  o.max_slabs = 4;
  auto stats = rs::Stats::create(dir.file("stats"), o);
  auto g = stats.add_group("MAIN", "", pc::main::kDefs);
  auto b = stats.add_group("VBE", "web1", pc::vbe::kDefs);
  g.add(pc::main::client_req, 3);
  auto reader = rs::StatsReader::open(dir.file("stats"));
  Raw raw(dir.file("stats"));
  auto* base = static_cast<std::uint8_t*>(raw.p);
  auto* groups = reinterpret_cast<fmt::GroupEntry*>(base + raw.h().groups_off);
  auto* descs = reinterpret_cast<fmt::DescEntry*>(base + raw.h().descs_off);

  // Unterminated, unprintable names and descriptions come out bounded and printable.
  std::memset(descs[0].field, 'A', sizeof descs[0].field);
  std::memset(descs[0].description, 0x07, sizeof descs[0].description);
  descs[1].type = 200;
  rs::Snapshot s = reader.snapshot();
  ASSERT_GE(s.counters.size(), 2u);
  EXPECT_EQ(s.counters[0].field, std::string(fmt::kFieldLen, 'A'));
  EXPECT_EQ(s.counters[0].description, std::string(fmt::kDescLen, '?'));
  EXPECT_EQ(s.counters[1].type, rs::Type::counter);

  // An entry pointing past the slots is skipped; the rest is still read.
  groups[1].first_slot = 120;  // 120 + 14 counters > 128 slots
  s = reader.snapshot();
  EXPECT_EQ(s.find("VBE.web1.req"), nullptr);
  EXPECT_NE(s.find("MAIN.client_req"), nullptr);
  groups[1].first_slot = 0;
  groups[1].n_counters = 0xffffffffu;
  EXPECT_EQ(reader.snapshot().find("VBE.web1.req"), nullptr);
  raw.h().groups_hwm.store(0xffffffffu);
  raw.h().slabs_hwm.store(0xffffffffu);
  EXPECT_EQ(reader.snapshot().find("MAIN.client_req")->raw, 3u);

  // Random damage anywhere in the tables never crashes a reader.
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::size_t off = raw.h().groups_off + rng() % (raw.n - raw.h().groups_off);
    base[off] = static_cast<std::uint8_t>(rng());
    try {
      (void)reader.snapshot();
    } catch (const ringlog::Error&) {
    }
  }
}

TEST(StatsFileFormat, DeadWriterMidUpdateIsBusyNotAHang) {
  ringlog::test::ScratchDir dir;
  auto stats = rs::Stats::create(dir.file("stats"));
  auto reader = rs::StatsReader::open(dir.file("stats"));
  Raw raw(dir.file("stats"));
  raw.h().generation.store(7);  // odd: a writer died while changing the directory
  try {
    (void)reader.snapshot();
    ADD_FAILURE() << "no error";
  } catch (const ringlog::Error& e) {
    EXPECT_EQ(e.code(), ringlog::Errc::busy);
  }
  raw.h().generation.store(8);
}

}  // namespace
