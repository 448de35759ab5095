// Stats readers: map a stats file read-only, take consistent snapshots of its groups
// (retrying the directory seqlock), and join the RING group read from the ring beside it.
// A reader never writes to the file and never trusts it: every index is bounds-checked.
//
// Ordered accesses (pairings with the writer in stats.cpp; table in docs/FORMAT-stats.md):
//   SR1: generation.load(acquire) -- pairs with SW3: the entries of that generation are visible.
//   SR2: entries, descriptors and values loaded with acquire (load_words, load_value) --
//        pairs with SW2; keeps SR3 after them.
//   SR3: generation.load(relaxed) == SR1 value, else the snapshot is retried.
//   SR4: groups_hwm / slabs_hwm (acquire) -- pairs with SW4.
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "ring_impl.hpp"

// RING: read from the ring header, declared from counters_ring.def like any group.
#define RINGLOG_GROUP_NAMESPACE ringlog::stats::ring
#define RINGLOG_GROUP_KIND "RING"
#define RINGLOG_GROUP_LIST "counters_ring.def"
#include "ringlog/counter_group.hpp"
#include "stats_impl.hpp"

namespace ringlog::stats {

using detail::FileMap;

double CounterValue::value() const noexcept {
  if (type == Type::gauge) {
    double v = static_cast<double>(as_signed());
    return format == Format::duration ? v / 1e9 : v;
  }
  double v = static_cast<double>(raw);
  return format == Format::duration ? v / 1e9 : v;
}

double Snapshot::uptime_seconds() const noexcept {
  if (created_ns == 0 || timestamp_ns <= created_ns) return 0.0;
  return static_cast<double>(timestamp_ns - created_ns) / 1e9;
}

const CounterValue* Snapshot::find(std::string_view name) const noexcept {
  for (const auto& c : counters)
    if (c.name == name) return &c;
  return nullptr;
}

// ---- RING group ------------------------------------------------------------------------

std::span<const CounterDef> ring_counter_defs() noexcept { return {ring::kDefs, ring::kCount}; }

std::vector<std::uint64_t> ring_counter_values(const RingStats& rs) {
  // Each name in counters_ring.def must be a field of RingStats: this does not compile
  // otherwise, which keeps the list and the ring header in step.
  return {
#define RINGLOG_COUNTER(name, type, level, format, desc) static_cast<std::uint64_t>(rs.name),
#include "counters_ring.def"
#undef RINGLOG_COUNTER
  };
}

// ---- StatsReader -----------------------------------------------------------------------

struct StatsReader::Impl {
  FileMap m;
  const format::Header* hdr = nullptr;
  format::Header h{};  // the identity part, copied once (written before the rename)
  const std::uint8_t* base = nullptr;

  void read_groups(Snapshot& s) const;
};

StatsReader::StatsReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StatsReader::StatsReader(StatsReader&&) noexcept = default;
StatsReader& StatsReader::operator=(StatsReader&&) noexcept = default;
StatsReader::~StatsReader() = default;

StatsReader StatsReader::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->m.map(path, false);
  impl->base = static_cast<const std::uint8_t*>(impl->m.base);
  impl->hdr = static_cast<const format::Header*>(impl->m.base);
  // The identity and geometry (first 128 bytes) are written once before the file is
  // renamed into place; copy them so that later checks use one validated set of values.
  std::memcpy(static_cast<void*>(&impl->h), impl->m.base, 128);
  std::string bad = detail::validate_header(impl->h, impl->m.size);
  if (!bad.empty()) throw Error(Errc::bad_format, path + ": " + bad);
  return StatsReader(std::move(impl));
}

const std::string& StatsReader::path() const noexcept { return impl_->m.path; }
bool StatsReader::stale() const { return impl_->m.stale(); }
std::uint64_t StatsReader::generation() const noexcept {
  return impl_->hdr->generation.load(std::memory_order_acquire);  // SR1
}

void StatsReader::Impl::read_groups(Snapshot& s) const {
  using namespace format;
  const auto* groups = reinterpret_cast<const GroupEntry*>(base + h.groups_off);
  const auto* descs = reinterpret_cast<const DescEntry*>(base + h.descs_off);
  const std::uint8_t* slabs = base + h.slabs_off;
  const std::uint32_t ngroups = std::min(hdr->groups_hwm.load(std::memory_order_acquire), h.max_groups);  // SR4
  const std::uint32_t nslabs = std::min(hdr->slabs_hwm.load(std::memory_order_acquire), h.max_slabs);     // SR4

  std::vector<GroupEntry> live;
  for (std::uint32_t i = 0; i < ngroups; ++i) {
    GroupEntry e;
    detail::load_words(&e, &groups[i], sizeof e);
    if (e.state != static_cast<std::uint32_t>(GroupState::live)) continue;
    if (e.n_counters == 0 || e.first_slot >= h.max_counters || e.n_counters > h.max_counters - e.first_slot)
      continue;  // damaged entry: skip it rather than read out of bounds
    live.push_back(e);
  }
  // Groups in the order they were added (MAIN first, backends as they came).
  std::sort(live.begin(), live.end(), [](const GroupEntry& a, const GroupEntry& b) { return a.serial < b.serial; });

  for (const GroupEntry& e : live) {
    std::string kind = detail::clean_string(e.kind, kKindLen);
    std::string ident = detail::clean_string(e.ident, kIdentLen);
    std::string prefix = ident.empty() ? kind : kind + "." + ident;
    std::size_t first_out = s.counters.size();
    for (std::uint32_t k = 0; k < e.n_counters; ++k) {
      DescEntry d;
      detail::load_words(&d, &descs[e.first_slot + k], sizeof d);
      CounterValue c;
      c.group = kind;
      c.ident = ident;
      c.field = detail::clean_string(d.field, kFieldLen);
      c.name = prefix + "." + c.field;
      c.type = d.type <= 2 ? static_cast<Type>(d.type) : Type::counter;
      c.level = d.level <= 2 ? static_cast<Level>(d.level) : Level::debug;
      c.format = d.format <= 2 ? static_cast<Format>(d.format) : Format::integer;
      c.description = detail::clean_string(d.description, kDescLen);
      s.counters.push_back(std::move(c));
    }
    // Sum slab by slab: each slab's run of values is contiguous.
    for (std::uint32_t sl = 0; sl < nslabs; ++sl) {
      const auto* v = reinterpret_cast<const std::uint64_t*>(slabs + sl * h.slab_stride + sizeof(SlabHeader));
      for (std::uint32_t k = 0; k < e.n_counters; ++k) {
        std::uint64_t x = detail::load_value(v[e.first_slot + k]);  // SR2
        CounterValue& c = s.counters[first_out + k];
        c.raw = c.type == Type::bitmap ? (c.raw | x) : c.raw + x;
      }
    }
  }
}

Snapshot StatsReader::snapshot() const {
  const format::Header* hdr = impl_->hdr;
  for (unsigned attempt = 0; attempt < 10000; ++attempt) {
    Snapshot s;
    std::uint64_t g1 = hdr->generation.load(std::memory_order_acquire);  // SR1
    if (g1 & 1) {
      if (attempt > 100) std::this_thread::sleep_for(std::chrono::microseconds(100));
      else sched_yield();
      continue;
    }
    impl_->read_groups(s);                                               // SR2
    if (hdr->generation.load(std::memory_order_relaxed) != g1) continue; // SR3
    s.timestamp_ns = ringlog::realtime_ns();
    s.created_ns = impl_->h.created_ns;
    s.generation = g1;
    s.instance_id = impl_->h.instance_id;
    s.writer_pid = static_cast<pid_t>(impl_->h.creator_pid);
    s.writer_alive = process_alive(s.writer_pid, impl_->h.creator_start);
    return s;
  }
  throw Error(Errc::busy, impl_->m.path + ": the stats directory stays mid-update (writer died while changing it?)");
}

// ---- InstanceReader --------------------------------------------------------------------

struct InstanceReader::Impl {
  std::string dir, stats_path, ring_path;
  std::optional<StatsReader> stats;
  std::optional<Reader> ring;
};

InstanceReader::InstanceReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InstanceReader::InstanceReader(InstanceReader&&) noexcept = default;
InstanceReader& InstanceReader::operator=(InstanceReader&&) noexcept = default;
InstanceReader::~InstanceReader() = default;

InstanceReader InstanceReader::open(std::string_view arg) {
  auto impl = std::make_unique<Impl>();
  std::string a(arg);
  struct stat st {};
  if (a.find('/') != std::string::npos) {
    if (::stat(a.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      // A file: the ring (by its magic) or else the stats file of the instance.
      std::uint64_t magic = 0;
      if (FILE* f = std::fopen(a.c_str(), "rbe")) {
        if (std::fread(&magic, sizeof magic, 1, f) != 1) magic = 0;
        std::fclose(f);
      }
      (magic == ringlog::format::kMagic ? impl->ring_path : impl->stats_path) = a;
      impl->dir = std::filesystem::path(a).parent_path().string();
    } else {
      impl->dir = a;
    }
  } else {
    impl->dir = instance_dir(a);
  }
  if (impl->dir.empty()) impl->dir = ".";
  if (impl->stats_path.empty()) impl->stats_path = impl->dir + "/" + format::kFileName;
  if (impl->ring_path.empty()) impl->ring_path = impl->dir + "/" + std::string(kRingFileName);

  try {
    impl->stats.emplace(StatsReader::open(impl->stats_path));
  } catch (const Error& e) {
    if (e.code() != Errc::not_found) throw;
  }
  try {
    impl->ring.emplace(Reader::open(impl->ring_path));
  } catch (const Error& e) {
    // A damaged ring must not hide the counters; without a stats file it is the error.
    if (e.code() != Errc::not_found && !impl->stats) throw;
  }
  if (!impl->stats && !impl->ring)
    throw Error(Errc::not_found, "no ringlog instance in " + impl->dir + " (neither " + impl->stats_path +
                                     " nor " + impl->ring_path + " exists)");
  return InstanceReader(std::move(impl));
}

const std::string& InstanceReader::dir() const noexcept { return impl_->dir; }
bool InstanceReader::has_stats() const noexcept { return impl_->stats.has_value(); }
bool InstanceReader::has_ring() const noexcept { return impl_->ring.has_value(); }

bool InstanceReader::stale() const {
  auto exists = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
  };
  if (impl_->stats ? impl_->stats->stale() : exists(impl_->stats_path)) return true;
  if (impl_->ring ? impl_->ring->stale() : exists(impl_->ring_path)) return true;
  return false;
}

Snapshot InstanceReader::snapshot() const {
  Snapshot s;
  if (impl_->stats) {
    s = impl_->stats->snapshot();
  } else {
    s.timestamp_ns = ringlog::realtime_ns();
    const auto& rh = impl_->ring->header();
    s.created_ns = rh.created_ns;
    s.writer_pid = static_cast<pid_t>(rh.creator_pid);
    s.writer_alive = process_alive(s.writer_pid, 0);
  }
  CounterValue up;
  up.name = "STAT.uptime";
  up.group = "STAT";
  up.field = "uptime";
  up.type = Type::counter;
  up.level = Level::info;
  up.format = Format::duration;
  up.description = "Time since the instance's stats file (or ring) was created";
  up.raw = s.timestamp_ns > s.created_ns && s.created_ns ? s.timestamp_ns - s.created_ns : 0;
  s.counters.insert(s.counters.begin(), std::move(up));
  if (impl_->ring) {
    RingStats rs = impl_->ring->stats();
    std::vector<std::uint64_t> vals = ring_counter_values(rs);
    auto defs = ring_counter_defs();
    for (std::size_t i = 0; i < defs.size(); ++i) {
      CounterValue c;
      c.group = std::string(ring::kKind);
      c.field = std::string(defs[i].name);
      c.name = c.group + "." + c.field;
      c.type = defs[i].type;
      c.level = defs[i].level;
      c.format = defs[i].format;
      c.description = std::string(defs[i].description);
      c.raw = vals[i];
      s.counters.push_back(std::move(c));
    }
  }
  return s;
}

}  // namespace ringlog::stats
