// Parameter table and parsing (see params.hpp).
#include "params.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "values.hpp"

namespace ringproxy {

const ParamDef kParamDefs[kParamCount] = {
#define RINGPROXY_PARAM(name, unit, def, min, max, desc) {#name, Unit::unit, def, min, max, desc},
#include "params.def"
#undef RINGPROXY_PARAM
};

const char* unit_name(Unit u) noexcept {
  switch (u) {
    case Unit::seconds: return "seconds";
    case Unit::bytes: return "bytes";
    case Unit::count: return "count";
  }
  return "?";
}

Params::Params() noexcept {
  for (unsigned i = 0; i < kParamCount; ++i) v_[i].store(kParamDefs[i].def, std::memory_order_relaxed);
}

int Params::find(std::string_view name) noexcept {
  for (unsigned i = 0; i < kParamCount; ++i)
    if (name == kParamDefs[i].name) return int(i);
  return -1;
}

std::string Params::set(ParamId id, double v) {
  const ParamDef& d = kParamDefs[id];
  if (!std::isfinite(v) || v < d.min || v > d.max) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s must be between %g and %g %s", d.name, d.min, d.max, unit_name(d.unit));
    return buf;
  }
  if (d.unit != Unit::seconds && v != std::floor(v)) return std::string(d.name) + " must be a whole number";
  v_[id].store(v, std::memory_order_relaxed);
  return {};
}

std::string Params::set(std::string_view name, std::string_view value) {
  int id = find(name);
  if (id < 0) return "unknown parameter '" + std::string(name) + "'";
  // Sizes are read by the rule of every ringlog program's sizes; durations may carry
  // an ms or s suffix.
  if (kParamDefs[id].unit == Unit::bytes) {
    std::optional<std::uint64_t> v = ringlog::tool::parse_size(value);
    if (!v) return "bad value '" + std::string(value) + "' for " + std::string(name);
    return set(ParamId(id), double(*v));
  }
  std::string s(value);
  double mult = 1;
  if (kParamDefs[id].unit == Unit::seconds) {
    if (s.size() > 2 && s.compare(s.size() - 2, 2, "ms") == 0) {
      mult = 0.001;
      s.resize(s.size() - 2);
    } else if (s.size() > 1 && s.back() == 's') {
      s.pop_back();
    }
  }
  char* end = nullptr;
  double v = s.empty() ? std::nan("") : std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v))
    return "bad value '" + std::string(value) + "' for " + std::string(name);
  return set(ParamId(id), v * mult);
}

std::string Params::show(std::string_view name) const {
  std::string out;
  for (unsigned i = 0; i < kParamCount; ++i) {
    const ParamDef& d = kParamDefs[i];
    if (!name.empty() && name != d.name) continue;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%-22s %-10g %-8s %s (default %g)\n", d.name, get(ParamId(i)),
                  unit_name(d.unit), d.description, d.def);
    out += buf;
  }
  return out;
}

}  // namespace ringproxy
