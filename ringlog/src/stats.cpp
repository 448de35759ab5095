// The stats writer: creates the stats file, hands each writer thread its own slab, and
// adds and removes groups under the directory seqlock. The hot path is in stats.hpp
// (Group::add); this file must never put a lock or a shared line on it.
//
// Ordered accesses (the directory seqlock; readers are in stats_reader.cpp). Labels: SW
// the stats writer, SR the stats reader; the table is in docs/FORMAT-stats.md. No
// fences: ThreadSanitizer does not model them, and on x86 release/acquire words are
// plain moves.
//   SW1: generation.store(odd, relaxed), sequenced before SW2.
//   SW2: entry and descriptor words stored with release (store_words) -- pairs with SR2
//        (reader loads them with acquire): a reader that saw any word written after SW1
//        also sees SW1, so its SR3 finds the generation changed and it retries.
//   SW3: generation.store(even, release) -- pairs with SR1 (reader loads generation,
//        acquire): a reader that sees the new even generation sees every word before SW3.
//   SW4: slabs_hwm / groups_hwm store release -- pairs with SR4 (the reader's acquire
//        loads): a slab or entry counted in the high-water mark has its header written.
//   SW5: zeroing a new group's slots (relaxed) is sequenced before SW1, so a reader that
//        sees the group (after SR1 of a later generation) sees the zeros or later sums.
// Increments themselves are relaxed single-word load+store by the slab's only writer.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>

#include "ring_impl.hpp"
#include "stats_impl.hpp"

namespace ringlog::stats {

using detail::StatsImpl;

const char* to_string(Type t) noexcept {
  switch (t) {
    case Type::counter: return "counter";
    case Type::gauge: return "gauge";
    case Type::bitmap: return "bitmap";
  }
  return "?";
}
const char* to_string(Level l) noexcept {
  switch (l) {
    case Level::info: return "info";
    case Level::diag: return "diag";
    case Level::debug: return "debug";
  }
  return "?";
}
const char* to_string(Format f) noexcept {
  switch (f) {
    case Format::integer: return "integer";
    case Format::bytes: return "bytes";
    case Format::duration: return "duration";
  }
  return "?";
}

namespace detail {

namespace {
std::atomic<std::uint64_t> g_next_key{1};

[[noreturn]] void throw_errno(const std::string& what, const std::string& path, int err) {
  Errc c = err == ENOENT ? Errc::not_found : (err == EACCES || err == EPERM) ? Errc::permission : Errc::io;
  throw Error(c, what + " " + path + ": " + std::strerror(err));
}

bool valid_chars(std::string_view s, bool lower_only, bool ident) {
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              (!lower_only && c >= 'A' && c <= 'Z') || (ident && (c == '-' || c == ':'));
    if (!ok) return false;
  }
  return true;
}
}  // namespace

FileMap::~FileMap() {
  if (base) ::munmap(base, size);
}

void FileMap::map(const std::string& p, bool writable) {
  path = p;
  int fd = ::open(p.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open stats file", p, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw_errno("cannot stat stats file", p, e);
  }
  if (!S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(format::kHeaderLen)) {
    ::close(fd);
    throw Error(Errc::bad_format, "not a ringlog stats file (too small): " + p);
  }
  size = static_cast<std::uint64_t>(st.st_size);
  dev = st.st_dev;
  ino = st.st_ino;
  void* b = ::mmap(nullptr, size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (b == MAP_FAILED) throw_errno("cannot map stats file", p, e);
  base = b;
}

bool FileMap::stale() const {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return true;
  return st.st_dev != dev || st.st_ino != ino;
}

std::string validate_header(const format::Header& h, std::uint64_t file_size) {
  using namespace format;
  if (h.magic != kMagic) return "bad magic: not a ringlog stats file";
  if (h.byte_order != kByteOrderMark) return "byte order differs from this machine's";
  if (h.version != kVersion) return "unsupported stats format version " + std::to_string(h.version);
  if (h.word_size != sizeof(void*) || h.value_size != 8) return "word size differs from this machine's";
  if (h.header_len != kHeaderLen) return "bad header length";
  if (h.group_entry_size != sizeof(GroupEntry) || h.desc_entry_size != sizeof(DescEntry))
    return "bad entry sizes";
  if (h.file_size != file_size) return "file size does not match the header (truncated?)";
  if (h.max_groups == 0 || h.max_groups > kMaxGroupsLimit) return "bad group count";
  if (h.max_counters == 0 || h.max_counters > kMaxCountersLimit) return "bad counter count";
  if (h.max_slabs < 2 || h.max_slabs > kMaxSlabsLimit) return "bad slab count";
  if (h.slab_stride != slab_stride_for(h.max_counters)) return "bad slab stride";
  auto inside = [&](std::uint64_t off, std::uint64_t len) {
    return off % 64 == 0 && off >= kHeaderLen && off <= file_size && len <= file_size - off;
  };
  // Bounded counts above keep these products far from overflow.
  if (!inside(h.groups_off, std::uint64_t{h.max_groups} * sizeof(GroupEntry))) return "group table out of the file";
  if (!inside(h.descs_off, std::uint64_t{h.max_counters} * sizeof(DescEntry))) return "descriptor table out of the file";
  if (!inside(h.slabs_off, std::uint64_t{h.max_slabs} * h.slab_stride)) return "slabs out of the file";
  return "";
}

void load_words(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<std::uint64_t*>(dst);
  auto* s = static_cast<std::uint64_t*>(const_cast<void*>(src));
  for (std::size_t i = 0; i < n / 8; ++i) d[i] = std::atomic_ref<std::uint64_t>(s[i]).load(std::memory_order_acquire);  // SR2
}

void store_words(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<std::uint64_t*>(dst);
  const auto* s = static_cast<const std::uint64_t*>(src);
  for (std::size_t i = 0; i < n / 8; ++i) std::atomic_ref<std::uint64_t>(d[i]).store(s[i], std::memory_order_release);  // SW2
}

std::string clean_string(const char* p, std::size_t cap) {
  std::size_t n = ::strnlen(p, cap);
  std::string s(p, n);
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return s;
}

std::uint32_t StatsImpl::claim_slab() noexcept {
  std::uint32_t s;
  if (!free_slabs.empty()) {
    s = free_slabs.back();
    free_slabs.pop_back();
  } else if (next_slab < hdr->max_slabs) {
    s = next_slab++;
  } else {
    // Out of slabs: the thread shares the direct slab, and its increments may race.
    return format::kDirectSlab;
  }
  format::SlabHeader* sh = slab_header(s);
  sh->owner_tid = ringlog::detail::self_tid();
  sh->claims.fetch_add(1, std::memory_order_relaxed);
  sh->owner_pid.store(ringlog::detail::self_pid(), std::memory_order_relaxed);
  // SW4: the slab counts for readers from now on.
  if (s + 1 > hdr->slabs_hwm.load(std::memory_order_relaxed)) hdr->slabs_hwm.store(s + 1, std::memory_order_release);
  return s;
}

void StatsImpl::release_slab(std::uint32_t s) noexcept {
  if (s == format::kDirectSlab) return;
  std::lock_guard lk(mu);
  // Values stay: the next thread to take the slab keeps adding to them, so counts of
  // exited threads are never lost and never moved (a move would race with readers).
  slab_header(s)->owner_pid.store(0, std::memory_order_relaxed);
  free_slabs.push_back(s);
}

void StatsImpl::begin_change() noexcept {
  std::uint64_t g = hdr->generation.load(std::memory_order_relaxed);
  hdr->generation.store(g + 1, std::memory_order_relaxed);  // SW1
}

void StatsImpl::end_change() noexcept {
  std::uint64_t g = hdr->generation.load(std::memory_order_relaxed);
  hdr->generation.store(g + 1, std::memory_order_release);  // SW3
}

void StatsImpl::remove_group(std::uint32_t entry) noexcept {
  std::lock_guard lk(mu);
  format::GroupEntry e;
  load_words(&e, &groups[entry], sizeof e);
  if (group_names[entry].empty()) return;  // ours to remove: the private record says
  begin_change();
  e.state = static_cast<std::uint32_t>(format::GroupState::free);
  store_words(&groups[entry], &e, sizeof e);
  hdr->live_groups.fetch_sub(1, std::memory_order_relaxed);
  auto [first, n] = group_slots[entry];
  hdr->live_counters.fetch_sub(n, std::memory_order_relaxed);
  end_change();
  std::fill(slot_used.begin() + first, slot_used.begin() + first + n, 0);
  group_names[entry].clear();
  group_slots[entry] = {0, 0};
}

// ---- per-thread slabs ------------------------------------------------------------------

constinit thread_local TlsSlab t_slab{0, nullptr};

namespace {
// Every slab this thread holds, released when the thread exits.
struct ThreadSlabs {
  struct Entry {
    std::weak_ptr<StatsImpl> impl;
    std::uint64_t key;
    std::uint64_t* values;
    std::uint32_t slab;
  };
  std::vector<Entry> entries;
  ~ThreadSlabs() {
    t_slab = TlsSlab{0, nullptr};
    for (auto& e : entries)
      if (auto p = e.impl.lock()) p->release_slab(e.slab);
  }
};
thread_local ThreadSlabs t_slabs;
}  // namespace

std::uint64_t* slab_slow(StatsImpl* impl) noexcept {
  auto& v = t_slabs.entries;
  std::erase_if(v, [](const ThreadSlabs::Entry& e) { return e.impl.expired(); });
  for (auto& e : v) {
    if (e.key == impl->key) {
      t_slab = TlsSlab{e.key, e.values};
      return e.values;
    }
  }
  std::uint32_t s;
  {
    std::lock_guard lk(impl->mu);
    s = impl->claim_slab();
  }
  std::uint64_t* values = impl->slab_values(s);
  try {
    v.push_back({impl->weak_from_this(), impl->key, values, s});
  } catch (...) {
    // No memory for the bookkeeping: keep counting; the slab is just never released.
  }
  t_slab = TlsSlab{impl->key, values};
  return values;
}

}  // namespace detail

// ---- Group -----------------------------------------------------------------------------

Group::Group(Group&& o) noexcept
    : impl_(std::move(o.impl_)), key_(o.key_), base_(o.base_), n_(o.n_), entry_(o.entry_), name_(std::move(o.name_)) {
  o.key_ = ~std::uint64_t{0};
  o.n_ = 0;
}

Group& Group::operator=(Group&& o) noexcept {
  if (this != &o) {
    remove();
    impl_ = std::move(o.impl_);
    key_ = o.key_;
    base_ = o.base_;
    n_ = o.n_;
    entry_ = o.entry_;
    name_ = std::move(o.name_);
    o.key_ = ~std::uint64_t{0};
    o.n_ = 0;
  }
  return *this;
}

Group::~Group() { remove(); }

void Group::remove() noexcept {
  if (!impl_) return;
  impl_->remove_group(entry_);
  impl_.reset();
  key_ = ~std::uint64_t{0};
  n_ = 0;
}

void Group::set(std::uint32_t idx, std::uint64_t v) const noexcept {
  assert(idx < n_);
  std::uint64_t* d = impl_->slab_values(format::kDirectSlab);
  std::atomic_ref<std::uint64_t>(d[base_ + idx]).store(v, std::memory_order_relaxed);
}

// ---- Stats -----------------------------------------------------------------------------

Stats::Stats(std::shared_ptr<detail::StatsImpl> impl) : impl_(std::move(impl)) {}
Stats::Stats(Stats&&) noexcept = default;
Stats& Stats::operator=(Stats&&) noexcept = default;
Stats::~Stats() = default;

void Stats::register_thread() noexcept {
  if (detail::t_slab.key != impl_->key) (void)detail::slab_slow(impl_.get());
}

const std::string& Stats::path() const noexcept { return impl_->m.path; }
std::uint64_t Stats::generation() const noexcept {
  return impl_->hdr->generation.load(std::memory_order_acquire);  // SR1: as a reader's
}
std::uint64_t Stats::instance_id() const noexcept { return impl_->hdr->instance_id; }

Stats Stats::create_instance(std::string_view instance, const StatsOptions& opts) {
  return create(instance_dir(instance) + "/" + format::kFileName, opts);
}

Stats Stats::create(const std::string& path, const StatsOptions& opts) {
  using namespace format;
  if (opts.max_groups == 0 || opts.max_groups > kMaxGroupsLimit || opts.max_counters == 0 ||
      opts.max_counters > kMaxCountersLimit || opts.max_slabs < 2 || opts.max_slabs > kMaxSlabsLimit)
    throw Error(Errc::invalid_arg, "stats: max_groups, max_counters or max_slabs out of range");
  auto page = [](std::uint64_t n) { return (n + 4095) / 4096 * 4096; };
  const std::uint64_t stride = slab_stride_for(opts.max_counters);
  const std::uint64_t groups_off = kHeaderLen;
  const std::uint64_t descs_off = groups_off + page(std::uint64_t{opts.max_groups} * sizeof(GroupEntry));
  const std::uint64_t slabs_off = descs_off + page(std::uint64_t{opts.max_counters} * sizeof(DescEntry));
  const std::uint64_t file_size = page(slabs_off + std::uint64_t{opts.max_slabs} * stride);

  std::filesystem::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) throw Error(Errc::io, "cannot create directory " + p.parent_path().string() + ": " + ec.message());
  }
  static std::atomic<unsigned> tmp_n{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(tmp_n++);
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, opts.mode);
  if (fd < 0) detail::throw_errno("cannot create stats file", tmp, errno);
  auto fail = [&](const char* what) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    detail::throw_errno(what, tmp, e);
  };
  ringlog::detail::give_to_ring_group(fd);
  if (::fchmod(fd, opts.mode) != 0) fail("cannot chmod stats file");
  if (int e = ringlog::detail::size_file(fd, file_size)) {
    errno = e;
    fail("cannot allocate stats file");
  }
  void* b = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (b == MAP_FAILED) fail("cannot map stats file");
  ::close(fd);

  auto* h = static_cast<Header*>(b);
  h->magic = kMagic;
  h->version = kVersion;
  h->byte_order = kByteOrderMark;
  h->word_size = sizeof(void*);
  h->value_size = 8;
  h->header_len = kHeaderLen;
  h->file_size = file_size;
  h->created_ns = ringlog::realtime_ns();
  h->creator_pid = ringlog::detail::self_pid();
  h->flags = 0;
  h->creator_start = ringlog::detail::self_start_time();
  std::random_device rd;
  h->instance_id = (std::uint64_t{rd()} << 32 | rd()) ^ h->created_ns;
  h->max_groups = opts.max_groups;
  h->max_counters = opts.max_counters;
  h->max_slabs = opts.max_slabs;
  h->slab_stride = static_cast<std::uint32_t>(stride);
  h->groups_off = groups_off;
  h->descs_off = descs_off;
  h->slabs_off = slabs_off;
  h->group_entry_size = sizeof(GroupEntry);
  h->desc_entry_size = sizeof(DescEntry);
  h->slabs_hwm.store(1, std::memory_order_relaxed);  // the direct slab
  ::munmap(b, file_size);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    detail::throw_errno("cannot rename stats file into place", path, e);
  }

  auto impl = std::make_shared<StatsImpl>();
  impl->m.map(path, true);
  std::string bad = detail::validate_header(*static_cast<Header*>(impl->m.base), impl->m.size);
  if (!bad.empty()) throw Error(Errc::bad_format, path + ": " + bad);
  auto* base = static_cast<std::uint8_t*>(impl->m.base);
  impl->hdr = static_cast<Header*>(impl->m.base);
  impl->groups = reinterpret_cast<GroupEntry*>(base + groups_off);
  impl->descs = reinterpret_cast<DescEntry*>(base + descs_off);
  impl->slabs = base + slabs_off;
  impl->stride = stride;
  impl->key = detail::g_next_key.fetch_add(1, std::memory_order_relaxed);
  impl->slot_used.assign(opts.max_counters, 0);
  impl->group_names.assign(opts.max_groups, std::string());
  impl->group_slots.assign(opts.max_groups, {0, 0});
  return Stats(std::move(impl));
}

Group Stats::add_group(std::string_view kind, std::string_view ident, std::span<const CounterDef> defs) {
  using namespace format;
  if (kind.empty() || kind.size() >= kKindLen || !detail::valid_chars(kind, false, false))
    throw Error(Errc::invalid_arg, "stats: bad group kind '" + std::string(kind) + "'");
  if (ident.size() >= kIdentLen || !detail::valid_chars(ident, false, true))
    throw Error(Errc::invalid_arg, "stats: bad group ident '" + std::string(ident) + "'");
  if (defs.empty()) throw Error(Errc::invalid_arg, "stats: a group needs counters");
  for (const auto& d : defs) {
    if (d.name.empty() || d.name.size() >= kFieldLen || !detail::valid_chars(d.name, true, false))
      throw Error(Errc::invalid_arg, "stats: bad counter name '" + std::string(d.name) + "'");
    for (const auto& o : defs)
      if (&o != &d && o.name == d.name) throw Error(Errc::invalid_arg, "stats: duplicate counter " + std::string(d.name));
  }
  std::string gname(kind);
  if (!ident.empty()) gname += "." + std::string(ident);

  auto& im = *impl_;
  std::lock_guard lk(im.mu);
  for (const auto& n : im.group_names)
    if (n == gname) throw Error(Errc::invalid_arg, "stats: group " + gname + " already exists");
  std::uint32_t entry = im.hdr->max_groups;
  for (std::uint32_t i = 0; i < im.hdr->max_groups; ++i)
    if (im.group_names[i].empty()) {
      entry = i;
      break;
    }
  if (entry == im.hdr->max_groups) throw Error(Errc::busy, "stats: no room for another group");
  const auto n = static_cast<std::uint32_t>(defs.size());
  std::uint32_t first = im.hdr->max_counters, run = 0;
  for (std::uint32_t i = 0; i < im.hdr->max_counters; ++i) {
    run = im.slot_used[i] ? 0 : run + 1;
    if (run == n) {
      first = i + 1 - n;
      break;
    }
  }
  if (first == im.hdr->max_counters) throw Error(Errc::busy, "stats: no room for " + std::to_string(n) + " more counters");

  // Slots of a removed group start again from zero in every slab (nobody may still add to
  // a removed group). Readers do not look at them until the entry is published below.
  // SR4: slabs_hwm (acquire) as a reader would, pairs with SW4 of a thread claiming a slab.
  const std::uint32_t hwm = std::min(im.hdr->slabs_hwm.load(std::memory_order_acquire), im.hdr->max_slabs);
  for (std::uint32_t s = 0; s < hwm; ++s) {
    std::uint64_t* v = im.slab_values(s);
    // SW5: zeros (relaxed), sequenced before SW1.
    for (std::uint32_t k = first; k < first + n; ++k) std::atomic_ref<std::uint64_t>(v[k]).store(0, std::memory_order_relaxed);
  }

  im.begin_change();
  for (std::uint32_t k = 0; k < n; ++k) {
    DescEntry d{};
    const CounterDef& cd = defs[k];
    std::memcpy(d.field, cd.name.data(), cd.name.size());
    d.type = static_cast<std::uint8_t>(cd.type);
    d.level = static_cast<std::uint8_t>(cd.level);
    d.format = static_cast<std::uint8_t>(cd.format);
    std::size_t dl = std::min(cd.description.size(), kDescLen - 1);
    std::memcpy(d.description, cd.description.data(), dl);
    detail::store_words(&im.descs[first + k], &d, sizeof d);
  }
  GroupEntry e{};
  e.state = static_cast<std::uint32_t>(GroupState::live);
  e.first_slot = first;
  e.n_counters = n;
  e.serial = im.next_serial++;
  std::memcpy(e.kind, kind.data(), kind.size());
  std::memcpy(e.ident, ident.data(), ident.size());
  detail::store_words(&im.groups[entry], &e, sizeof e);
  if (entry + 1 > im.hdr->groups_hwm.load(std::memory_order_relaxed))
    im.hdr->groups_hwm.store(entry + 1, std::memory_order_release);  // SW4
  im.hdr->live_groups.fetch_add(1, std::memory_order_relaxed);
  im.hdr->live_counters.fetch_add(n, std::memory_order_relaxed);
  im.end_change();

  std::fill(im.slot_used.begin() + first, im.slot_used.begin() + first + n, 1);
  im.group_names[entry] = gname;
  im.group_slots[entry] = {first, n};
  Group g;
  g.impl_ = impl_;
  g.key_ = im.key;
  g.base_ = first;
  g.n_ = n;
  g.entry_ = entry;
  g.name_ = std::move(gname);
  return g;
}

}  // namespace ringlog::stats
