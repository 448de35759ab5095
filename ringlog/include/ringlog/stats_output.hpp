// Text forms of a stats snapshot, shared by ringlog-stat and any tool that prints counters:
// varnishstat -1 lines, varnishstat -j JSON, -l lists and the Prometheus text exposition.
// Pure functions of a Snapshot: they never touch the file.
#pragma once

#include <span>
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
// _seconds), a group's ident as the label ident="…". One instance, no instance label:
// for a program that exposes its own counters.
std::string format_prometheus(const Snapshot& s, const Filter& f);
std::string prometheus_family(const CounterValue& c);  // the metric family name

// The label that names the instance in a multi-instance exposition. Not "instance":
// Prometheus gives every scraped sample its own label instance="HOST:PORT" (the
// target), and would rename ours to exported_instance; with another name one
// Prometheus scraping many hosts keeps both (host in instance, ring in this).
inline constexpr std::string_view kPrometheusInstanceLabel = "ringlog_instance";

// One instance of a multi-instance exposition.
struct PrometheusInstance {
  std::string_view name;               // the value of the label ringlog_instance
  const Snapshot* snapshot = nullptr;  // nullptr: could not be read now (down)
};

// What ringlog-stat --prometheus prints and --listen serves: per instance the gauges
// ringlog_up (1 when its files could be read, 0 when absent or unreadable) and
// ringlog_writer_running (1 while the process that created them runs), then the
// counters of the instances that are up, every sample labelled
// ringlog_instance="NAME" (first, before ident). HELP and TYPE once per family across
// instances; a sample whose type differs from its family's (two writer versions)
// is left out rather than make the exposition invalid. f selects counters, not the
// two gauges.
std::string format_prometheus(std::span<const PrometheusInstance> instances, const Filter& f);

}  // namespace ringlog::stats
