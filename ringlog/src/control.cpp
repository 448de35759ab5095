// Tag mask and vxid allocation over the ring's shared control area. Writers only ever
// load the mask (relaxed: a record racing a mask change may go either way); changes are
// single atomic read-modify-writes so concurrent changers never lose each other's bits.
#include "ringlog/control.hpp"

#include <vector>

#include "ringlog/ring.hpp"

namespace ringlog {

namespace {

bool maskable(Tag t) noexcept {
  if (!is_valid_tag(t)) return false;
  return (builtin_tag_flags(t) & (kTagStructural | kTagReaderOnly)) == 0;
}

bool default_on(Tag t) noexcept {
  unsigned i = std::uint8_t(t);
  return ((kDefaultTagMask[i >> 6] >> (i & 63)) & 1) != 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool RecordsControl::set_enabled(Tag t, bool on) noexcept {
  if (!maskable(t)) return false;
  unsigned i = std::uint8_t(t);
  std::uint64_t bit = 1ULL << (i & 63);
  if (on != default_on(t))
    mask_flip[i >> 6].fetch_or(bit, std::memory_order_relaxed);
  else
    mask_flip[i >> 6].fetch_and(~bit, std::memory_order_relaxed);
  mask_generation.fetch_add(1, std::memory_order_release);
  return true;
}

void RecordsControl::reset_mask() noexcept {
  for (auto& w : mask_flip) w.store(0, std::memory_order_relaxed);
  mask_generation.fetch_add(1, std::memory_order_release);
}

void RecordsControl::apply_mask(std::string_view spec) {
  // Parse everything first so that a bad spec changes nothing.
  struct Op {
    enum { set, reset, all, none } what;
    Tag tag;
    bool on;
  };
  std::vector<Op> ops;
  while (!spec.empty()) {
    std::size_t comma = spec.find(',');
    std::string_view item = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (item.empty()) continue;
    if (item == "default") {
      ops.push_back({Op::reset, Tag::invalid, false});
      continue;
    }
    if (item == "all" || item == "none") {
      ops.push_back({item == "all" ? Op::all : Op::none, Tag::invalid, false});
      continue;
    }
    bool on = true;
    if (item.front() == '+' || item.front() == '-') {
      on = item.front() == '+';
      item.remove_prefix(1);
    }
    auto t = tag_by_name(trim(item));
    if (!t) throw Error(Errc::invalid_arg, "unknown tag in mask: " + std::string(item));
    if (!maskable(*t)) throw Error(Errc::invalid_arg, "tag cannot be masked: " + std::string(item));
    ops.push_back({Op::set, *t, on});
  }
  for (const Op& op : ops) {
    switch (op.what) {
      case Op::set: set_enabled(op.tag, op.on); break;
      case Op::reset: reset_mask(); break;
      case Op::all:
      case Op::none:
        for (unsigned i = 1; i < 255; ++i)
          if (maskable(static_cast<Tag>(i))) set_enabled(static_cast<Tag>(i), op.what == Op::all);
        break;
    }
  }
}

std::string RecordsControl::mask_spec() const {
  std::string out;
  for (unsigned i = 1; i < 255; ++i) {
    Tag t = static_cast<Tag>(i);
    if (!is_valid_tag(t)) continue;
    bool on = enabled(t);
    if (on == default_on(t)) continue;
    if (!out.empty()) out += ',';
    out += on ? '+' : '-';
    out += tag_name(t);
  }
  return out.empty() ? "default" : out;
}

std::uint64_t RecordsControl::allocate_vxids(std::uint64_t n) noexcept {
  std::uint64_t first = next_vxid.fetch_add(n, std::memory_order_relaxed);
  if (first == 0) {
    // The very first chunk would hold vxid 0 ("no transaction"): skip that chunk.
    next_vxid.fetch_add(1, std::memory_order_relaxed);
    return allocate_vxids(n);
  }
  return first;
}

RecordsControl& records_control(Ring& ring) noexcept {
  return *reinterpret_cast<RecordsControl*>(ring.control());
}

const RecordsControl& records_control(const Reader& reader) noexcept {
  return *reinterpret_cast<const RecordsControl*>(reader.header().control);
}

}  // namespace ringlog
