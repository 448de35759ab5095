// libFuzzer target: ringlog-dump's parser and dumper over arbitrary ring files
// (truncated files, huge or inconsistent sizes, offsets past the end, loops in message
// chains). Parsing must refuse or accept with a reason, the walk must end, and every
// output (raw, records, JSON, --info) must be produced without touching memory
// outside the image.
// fuzz-link: ringlog_dump_core
#include <unistd.h>

#include <cstdint>
#include <optional>

#include "dump.hpp"
#include "fuzz_dump_shape.hpp"

namespace rd = ringlog::dump;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz_dump::Image img;
  fuzz_dump::shape(data, size, img);
  std::uint8_t opts = size > 1 ? data[size - 1] : 0;
  std::optional<rd::Layout> forced;
  if (opts & 0x10) forced = static_cast<rd::Layout>((opts >> 5) & 3);
  rd::Image ri;
  std::string why = rd::parse({img.data, img.size}, forced, opts & 0x80, ri);
  if (!why.empty()) return 0;
  ri.alive = fuzz_dump::alive;
  rd::WalkResult w = rd::walk(ri, {.scan = (opts & 1) != 0, .max_messages = 3000});
  (void)rd::format_info(ri, w, (opts & 4) != 0);
  // Every message goes through the same formatting: the first kFormatted exercise it.
  // The rest (a shaped area's unfilled zeros are thousands of empty messages) made
  // formatting nine tenths of the time per input.
  constexpr std::size_t kFormatted = 64;
  if (w.messages.size() > kFormatted) w.messages.resize(kFormatted);
  (void)rd::format_messages(ri, w, {.mode = rd::Mode::raw, .lf_remap = (opts & 2) != 0, .json = (opts & 4) != 0});
  (void)rd::format_messages(ri, w, {.mode = rd::Mode::records, .json = (opts & 8) != 0});
  return 0;
}
