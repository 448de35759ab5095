// The counter groups defined by the .def lists in ringlog/defs (one list per group):
// an enum of counter indexes and a CounterDef table for each, from the same X-macro.
//   auto main = stats.add_group(stats::main::kKind, "", stats::main::kDefs);
//   main.add(stats::main::client_req);
#pragma once

#include <iterator>

#include "ringlog/stats.hpp"

#define RINGLOG_STATS_ENUM_(name, type, level, format, desc) name,
#define RINGLOG_STATS_DEF_(name, type, level, format, desc) \
  ::ringlog::stats::CounterDef{#name, ::ringlog::stats::Type::type, ::ringlog::stats::Level::level, \
                               ::ringlog::stats::Format::format, desc},

namespace ringlog::stats::main {
inline constexpr std::string_view kKind = "MAIN";
enum Id : std::uint32_t {
#define RINGLOG_COUNTER RINGLOG_STATS_ENUM_
#include "counters_main.def"
#undef RINGLOG_COUNTER
  kCount
};
inline constexpr CounterDef kDefs[] = {
#define RINGLOG_COUNTER RINGLOG_STATS_DEF_
#include "counters_main.def"
#undef RINGLOG_COUNTER
};
static_assert(std::size(kDefs) == kCount);
}  // namespace ringlog::stats::main

namespace ringlog::stats::vbe {
inline constexpr std::string_view kKind = "VBE";  // ident: the backend's name
enum Id : std::uint32_t {
#define RINGLOG_COUNTER RINGLOG_STATS_ENUM_
#include "counters_vbe.def"
#undef RINGLOG_COUNTER
  kCount
};
inline constexpr CounterDef kDefs[] = {
#define RINGLOG_COUNTER RINGLOG_STATS_DEF_
#include "counters_vbe.def"
#undef RINGLOG_COUNTER
};
static_assert(std::size(kDefs) == kCount);
}  // namespace ringlog::stats::vbe

namespace ringlog::stats::ring {
inline constexpr std::string_view kKind = "RING";  // read from the ring header, not the stats file
enum Id : std::uint32_t {
#define RINGLOG_COUNTER RINGLOG_STATS_ENUM_
#include "counters_ring.def"
#undef RINGLOG_COUNTER
  kCount
};
inline constexpr CounterDef kDefs[] = {
#define RINGLOG_COUNTER RINGLOG_STATS_DEF_
#include "counters_ring.def"
#undef RINGLOG_COUNTER
};
static_assert(std::size(kDefs) == kCount);
}  // namespace ringlog::stats::ring

#undef RINGLOG_STATS_ENUM_
#undef RINGLOG_STATS_DEF_
