// ringproxy's run-time parameters (params.def): read lock-free by the workers on every
// request, changed by the command line, the config file or `adm param.set` while they
// run. A worker reads a parameter when it arms a timer or checks a limit, so a change
// applies to the next one without a restart. Never blocks, never allocates on reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringproxy {

enum class Unit : std::uint8_t { seconds, bytes, count };

struct ParamDef {
  const char* name;
  Unit unit;
  double def, min, max;
  const char* description;
};

enum ParamId : unsigned {
#define RINGPROXY_PARAM(name, unit, def, min, max, desc) name,
#include "params.def"
#undef RINGPROXY_PARAM
  kParamCount
};

extern const ParamDef kParamDefs[kParamCount];
const char* unit_name(Unit u) noexcept;

class Params {
 public:
  Params() noexcept;
  double get(ParamId id) const noexcept { return v_[id].load(std::memory_order_relaxed); }
  std::uint64_t ns(ParamId id) const noexcept { return std::uint64_t(get(id) * 1e9); }
  std::size_t count(ParamId id) const noexcept { return std::size_t(get(id)); }
  // Parses and range-checks value; returns "" or an error message (nothing changed).
  std::string set(std::string_view name, std::string_view value);
  std::string set(ParamId id, double value);
  // "name value unit  description" lines; one parameter when name is given.
  std::string show(std::string_view name = {}) const;
  static int find(std::string_view name) noexcept;  // -1 if unknown

 private:
  std::atomic<double> v_[kParamCount];
};

}  // namespace ringproxy
