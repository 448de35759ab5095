// Declares a counter group from a .def list: the one way to declare one, for the ring's
// own group and for every program's (Varnish's .vsc files, as an X-macro). A program
// keeps its list beside its code; this header turns it into what Stats::add_group takes.
// Define the three parameters, then include this header; once per group (it may be
// included any number of times: it has no include guard, and #undefs its parameters):
//
//   #define RINGLOG_GROUP_NAMESPACE myapp::counters   // where the declarations go
//   #define RINGLOG_GROUP_KIND "MYAPP"                // the group kind in the stats file
//   #define RINGLOG_GROUP_LIST "myapp/counters.def"   // the list, found on the include path
//   #include "ringlog/counter_group.hpp"
//
// The list holds one line per counter, in slot order (add new ones at the end, so that
// readers of an older list stay right):
//   RINGLOG_COUNTER(name, type, level, format, "description")
//     name    [a-z0-9_]{1,31}, unique in the group
//     type    counter (only grows) | gauge (goes up and down) | bitmap
//     level   info | diag | debug            (ringlog-stat shows info by default)
//     format  integer | bytes | duration     (duration: nanoseconds)
// In RINGLOG_GROUP_NAMESPACE it declares
//   kKind   the group kind (std::string_view)
//   Id      an enum with one enumerator per counter, in list order, then kCount
//   kDefs   the CounterDef table (kCount entries) for Stats::add_group
// so that a program writes
//   ringlog::stats::Group g = stats.add_group(myapp::counters::kKind, "", myapp::counters::kDefs);
//   g.add(myapp::counters::requests);
// Errors: a missing parameter stops the compilation with #error (all three missing:
// nothing is declared); a list line with an unknown type, level or format does not
// compile (they are enumerators of stats.hpp); names are checked when the group is
// added (Stats::add_group throws Error(invalid_arg)).
// Thread safety: declarations only (constexpr data).
#include <cstdint>
#include <iterator>
#include <string_view>

#include "ringlog/stats.hpp"

// Included without any parameter (as a check of all public headers does), it declares
// nothing; with some but not all of them, it stops the compilation.
#if defined(RINGLOG_GROUP_NAMESPACE) || defined(RINGLOG_GROUP_KIND) || defined(RINGLOG_GROUP_LIST)
#ifndef RINGLOG_GROUP_NAMESPACE
#error "define RINGLOG_GROUP_NAMESPACE (e.g. myapp::counters) before including ringlog/counter_group.hpp"
#endif
#ifndef RINGLOG_GROUP_KIND
#error "define RINGLOG_GROUP_KIND (e.g. \"MYAPP\") before including ringlog/counter_group.hpp"
#endif
#ifndef RINGLOG_GROUP_LIST
#error "define RINGLOG_GROUP_LIST (the .def file, e.g. \"myapp/counters.def\") before including ringlog/counter_group.hpp"
#endif

namespace RINGLOG_GROUP_NAMESPACE {

inline constexpr std::string_view kKind = RINGLOG_GROUP_KIND;

enum Id : std::uint32_t {
#define RINGLOG_COUNTER(name, type, level, format, desc) name,
#include RINGLOG_GROUP_LIST
#undef RINGLOG_COUNTER
  kCount
};

inline constexpr ::ringlog::stats::CounterDef kDefs[] = {
#define RINGLOG_COUNTER(name, type, level, format, desc)                                                     \
  ::ringlog::stats::CounterDef{#name, ::ringlog::stats::Type::type, ::ringlog::stats::Level::level, \
                               ::ringlog::stats::Format::format, desc},
#include RINGLOG_GROUP_LIST
#undef RINGLOG_COUNTER
};
static_assert(std::size(kDefs) == kCount, "one CounterDef per enumerator");

}  // namespace RINGLOG_GROUP_NAMESPACE

#undef RINGLOG_GROUP_NAMESPACE
#undef RINGLOG_GROUP_KIND
#undef RINGLOG_GROUP_LIST
#endif  // the parameters are defined
