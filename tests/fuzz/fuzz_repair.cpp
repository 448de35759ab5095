// libFuzzer target: ringlog-dump --repair over arbitrary ring files. A repair either
// refuses with a reason or leaves a ring that reads cleanly from head to tail (the
// repair checks this itself and says "internal" when it does not: a bug, so abort);
// repairing the result again must find nothing to fix.
// fuzz-link: ringlog_dump_core
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "dump.hpp"
#include "fuzz_dump_shape.hpp"

namespace rd = ringlog::dump;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz_dump::Image img;
  fuzz_dump::shape(data, size, img);
  rd::Image ri;
  if (!rd::parse({img.data, img.size}, std::nullopt, true, ri).empty()) return 0;
  ri.alive = fuzz_dump::alive;  // no kill(2) or /proc per named process (README "Speed")
  rd::RepairReport rep;
  std::string err;
  rd::RepairStatus st = rd::repair(ri, {}, rep, err);
  if (st == rd::RepairStatus::unrecoverable && err.rfind("internal", 0) == 0) {
    std::fprintf(stderr, "repair left a ring that does not read cleanly: %s\n", err.c_str());
    std::abort();
  }
  (void)rd::format_report(rep, true);
  if (st != rd::RepairStatus::clean && st != rd::RepairStatus::repaired) return 0;
  rd::Image again;
  if (!rd::parse({img.data, img.size}, std::nullopt, true, again).empty()) {
    std::fprintf(stderr, "the repaired ring no longer parses\n");
    std::abort();
  }
  again.alive = fuzz_dump::alive;
  rd::WalkResult w = rd::walk(again, {.live_recheck = false});
  if (!w.complete || !w.skipped.empty()) {
    std::fprintf(stderr, "the repaired ring does not read cleanly: %s\n", w.stop_reason.c_str());
    std::abort();
  }
  rd::RepairReport rep2;
  if (rd::repair(again, {}, rep2, err) != rd::RepairStatus::clean) {
    for (auto& f : rep2.fixed) std::fprintf(stderr, "second repair: %s\n", f.c_str());
    std::abort();
  }
  return 0;
}
