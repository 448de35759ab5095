// ringlog stats: self-describing counters in a shared-memory file beside the ring
// (the Varnish VSC model, without its summing lock; docs/FORMAT-stats.md).
// The hot path (Group::add/sub) is one relaxed load and one relaxed store into the
// calling thread's own cache-line-aligned slab: no lock, no locked instruction, no
// shared cache line. It must never allocate, block or throw once the thread has a slab.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cassert>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringlog/ring.hpp"

namespace ringlog::stats {

enum class Type : std::uint8_t { counter = 0, gauge = 1, bitmap = 2 };
enum class Level : std::uint8_t { info = 0, diag = 1, debug = 2 };
enum class Format : std::uint8_t { integer = 0, bytes = 1, duration = 2 };  // duration: nanoseconds

const char* to_string(Type t) noexcept;
const char* to_string(Level l) noexcept;
const char* to_string(Format f) noexcept;

// One counter of a group, as listed in a .def file.
struct CounterDef {
  std::string_view name;
  Type type;
  Level level;
  Format format;
  std::string_view description;
};

struct StatsOptions {
  std::uint32_t max_groups = 256;     // groups alive at once (e.g. MAIN + one per backend)
  std::uint32_t max_counters = 4096;  // counter slots alive at once, over all groups
  std::uint32_t max_slabs = 256;      // writer threads alive at once (+1 direct slab)
  unsigned mode = 0640;
};

class Stats;

namespace detail {
struct StatsImpl;
// The calling thread's slab in the most recently used Stats (per thread).
struct TlsSlab {
  std::uint64_t key;        // StatsImpl::key, never reused in a process; 0: none
  std::uint64_t* values;    // that thread's slab values in the mapping
};
extern constinit thread_local TlsSlab t_slab;
std::uint64_t* slab_slow(StatsImpl* impl) noexcept;  // claims (or finds) a slab
}  // namespace detail

// The calling thread's slab part of one group, for hot loops: add() without the per-call
// slab lookup of Group::add (three instructions: load, add, store). Valid only on the
// thread that made it (Group::local()), and only while the group lives.
class LocalCounters {
 public:
  void add(std::uint32_t idx, std::uint64_t n = 1) const noexcept {
    std::atomic_ref<std::uint64_t> a(v_[idx]);
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void sub(std::uint32_t idx, std::uint64_t n = 1) const noexcept { add(idx, std::uint64_t(0) - n); }

 private:
  friend class Group;
  explicit LocalCounters(std::uint64_t* v) noexcept : v_(v) {}
  std::uint64_t* v_;
};

// A group of counters (GROUP[.ident].name), alive until the handle is destroyed or
// removed. Movable, not copyable. Increment from any thread: each thread adds into its
// own slab. Indexes are the group's .def enum (idx < size(), asserted in debug builds).
// An empty (default-constructed, moved-from or removed) Group must not be incremented,
// nor a Group in a child after fork() (the child would share its parent's slabs: it
// must create its own Stats).
class Group {
 public:
  Group() = default;
  Group(Group&&) noexcept;
  Group& operator=(Group&&) noexcept;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group();

  // Counters and gauges: adds into the calling thread's slab (relaxed load + store).
  void add(std::uint32_t idx, std::uint64_t n = 1) const noexcept {
    assert(idx < n_);
    std::uint64_t* v = slab();
    std::atomic_ref<std::uint64_t> a(v[base_ + idx]);
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // Gauges: a thread's part may go negative; the sum over slabs is right.
  void sub(std::uint32_t idx, std::uint64_t n = 1) const noexcept { add(idx, std::uint64_t(0) - n); }
  // This thread's part of the group, to keep in a worker's state for its hot loop.
  LocalCounters local() const noexcept { return LocalCounters(slab() + base_); }
  // Bitmaps and absolute gauges: stores into the shared direct slab (last store wins).
  // Do not mix set() and add() on one counter.
  void set(std::uint32_t idx, std::uint64_t v) const noexcept;

  explicit operator bool() const noexcept { return impl_ != nullptr; }
  std::uint32_t size() const noexcept { return n_; }
  const std::string& name() const noexcept { return name_; }  // "VBE.web1"
  void remove() noexcept;    // removes the group from the file now; readers notice

 private:
  friend class Stats;
  std::uint64_t* slab() const noexcept {
    return detail::t_slab.key == key_ ? detail::t_slab.values : detail::slab_slow(impl_.get());
  }
  std::shared_ptr<detail::StatsImpl> impl_;
  std::uint64_t key_ = ~std::uint64_t{0};
  std::uint32_t base_ = 0;
  std::uint32_t n_ = 0;
  std::uint32_t entry_ = 0;
  std::string name_;
};

// The writer side: one process creates and owns the stats file of an instance.
class Stats {
 public:
  // Creates (or atomically replaces) the stats file at path; readers attached to an
  // older file notice (stale()) and reattach. Creates the directory if needed.
  static Stats create(const std::string& path, const StatsOptions& opts = {});
  // Same, as the file "stats" in instance_dir(name).
  static Stats create_instance(std::string_view instance, const StatsOptions& opts = {});

  Stats(Stats&&) noexcept;
  Stats& operator=(Stats&&) noexcept;
  ~Stats();  // the file stays for readers (like Varnish's), and keeps its last values

  // Adds a group: kind [A-Za-z0-9_]{1,15}, ident "" or [A-Za-z0-9_:-]{1,47}, counter
  // names [a-z0-9_]{1,31}. Throws Error(invalid_arg) on a bad name or a duplicate
  // group, Error(busy) when the file has no room left.
  Group add_group(std::string_view kind, std::string_view ident, std::span<const CounterDef> defs);

  // Gives the calling thread its slab now (worker start-up), rather than at its first
  // increment. Threads that never call it get one on first use; a slab is released
  // (its counts kept) when its thread exits. Never fails: past max_slabs threads share
  // the direct slab and their increments may race.
  void register_thread() noexcept;

  const std::string& path() const noexcept;
  std::uint64_t generation() const noexcept;  // bumped twice per group added or removed
  std::uint64_t instance_id() const noexcept;

 private:
  explicit Stats(std::shared_ptr<detail::StatsImpl> impl);
  std::shared_ptr<detail::StatsImpl> impl_;
};

// ---- reading -------------------------------------------------------------------------

struct CounterValue {
  std::string name;         // GROUP[.ident].field
  std::string group;        // kind: "MAIN", "VBE", "RING"
  std::string ident;        // "" or e.g. "web1"
  std::string field;        // "client_req"
  Type type = Type::counter;
  Level level = Level::info;
  Format format = Format::integer;
  std::string description;
  std::uint64_t raw = 0;    // sum over slabs (two's complement for gauges); OR for bitmaps

  std::int64_t as_signed() const noexcept { return static_cast<std::int64_t>(raw); }
  // The value in its display unit: gauges signed, durations in seconds.
  double value() const noexcept;
};

struct Snapshot {
  std::uint64_t timestamp_ns = 0;  // CLOCK_REALTIME when taken
  std::uint64_t created_ns = 0;    // when the stats file (or else the ring) was created
  std::uint64_t generation = 0;    // the stats directory generation
  std::uint64_t instance_id = 0;   // of the stats file, 0 without one
  pid_t writer_pid = 0;
  bool writer_alive = false;
  std::vector<CounterValue> counters;

  double uptime_seconds() const noexcept;
  const CounterValue* find(std::string_view name) const noexcept;
};

// A passive reader of one stats file: maps it read-only and writes nothing.
class StatsReader {
 public:
  static StatsReader open(const std::string& path);  // throws Error
  StatsReader(StatsReader&&) noexcept;
  StatsReader& operator=(StatsReader&&) noexcept;
  ~StatsReader();

  // A consistent view of the groups (retried while the writer changes the directory);
  // throws Error(busy) if the directory stays mid-update (a writer died while changing it).
  Snapshot snapshot() const;
  std::uint64_t generation() const noexcept;  // cheap: has the set of groups changed?
  bool stale() const;  // the file at the path was removed or replaced (writer restarted)
  const std::string& path() const noexcept;

  struct Impl;

 private:
  explicit StatsReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What a tool reads for an instance: its stats file and, from the ring file beside it,
// the RING group; plus STAT.uptime. Either file may be missing, not both.
class InstanceReader {
 public:
  // arg: an instance name (-n NAME, "" for the default), a directory, or the path of
  // the instance's stats file or ring file.
  static InstanceReader open(std::string_view arg);  // throws Error(not_found) and others
  InstanceReader(InstanceReader&&) noexcept;
  InstanceReader& operator=(InstanceReader&&) noexcept;
  ~InstanceReader();

  Snapshot snapshot() const;
  // A file was removed, replaced or has appeared since open: reopen to follow it.
  bool stale() const;
  const std::string& dir() const noexcept;
  bool has_stats() const noexcept;
  bool has_ring() const noexcept;

  struct Impl;

 private:
  explicit InstanceReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The definitions of the RING group (counters_ring.def) and its values from RingStats.
std::span<const CounterDef> ring_counter_defs() noexcept;
std::vector<std::uint64_t> ring_counter_values(const RingStats& rs);

}  // namespace ringlog::stats
