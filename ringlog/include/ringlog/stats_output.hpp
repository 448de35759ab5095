// Text forms of a stats snapshot, shared by ringlog-stat and any tool that prints counters:
// varnishstat -1 lines, varnishstat -j JSON, -l lists and the Prometheus text exposition.
// Pure functions of a Snapshot: they never touch the file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ringlog/stats.hpp"

namespace ringlog::stats {

// varnishstat -f: a counter is shown if no inclusion glob was given or it matches one,
// and it matches no exclusion glob (a glob starting with '^'). fnmatch(3) syntax,
// backslash escapes.
class Filter {
 public:
  Filter() = default;
  explicit Filter(std::vector<std::string> globs);
  bool match(std::string_view name) const;
  bool empty() const noexcept { return include_.empty() && exclude_.empty(); }

 private:
  std::vector<std::string> include_, exclude_;
};

// The one-letter codes of varnishstat -j.
char flag_letter(Type t) noexcept;                // c g b
char format_letter(Type t, Format f) noexcept;    // i B d, b for bitmaps

// One value as text: integers as they are, gauges signed, durations in seconds.
std::string value_text(const CounterValue& c);
// "D+HH:MM:SS", as varnishstat prints uptimes.
std::string dhms(double seconds);

// -1: "NAME VALUE RATE DESCRIPTION" per counter; RATE = value/uptime, "." for gauges/bitmaps.
std::string format_once(const Snapshot& s, const Filter& f);
// -j: {"version":1,"timestamp":"…","counters":{NAME:{description,flag,format,value}}}.
std::string format_json(const Snapshot& s, const Filter& f);
// -l: the field names with their descriptions.
std::string format_list(const Snapshot& s, const Filter& f);
// Prometheus text format 0.0.4: HELP/TYPE per family, counters as _total, bytes and
// durations with their base-unit suffix (_bytes unless the name ends in "bytes";
// _seconds), a group's ident as the label ident="…".
std::string format_prometheus(const Snapshot& s, const Filter& f);
std::string prometheus_family(const CounterValue& c);  // the metric family name

std::string json_escape(std::string_view s);

}  // namespace ringlog::stats
