// libFuzzer target for the record reading path every tool runs on ring content it
// cannot trust: BatchDecoder, the Grouper (all modes, tiny limits, link cycles) and
// the printer. Input: byte 0 picks the grouping mode and limits; the rest is a
// sequence of messages, each behind a one-byte length.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ringlog/group.hpp"
#include "ringlog/printer.hpp"
#include "ringlog/record.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringlog;
  if (size == 0) return 0;

  // The whole input as one batch: every record must lie inside it.
  {
    std::span<const std::byte> all(reinterpret_cast<const std::byte*>(data), size);
    BatchDecoder d(all);
    Record r;
    std::size_t seen = 0;
    while (d.next(r)) {
      const char* lo = reinterpret_cast<const char*>(data);
      if (r.payload.data() < lo || r.payload.data() + r.payload.size() > lo + size) __builtin_trap();
      seen += r.payload.size();
      std::string line;
      print_raw(line, r);
    }
    if (seen > size) __builtin_trap();
  }

  std::uint8_t ctl = data[0];
  GroupOptions opts;
  opts.mode = static_cast<Grouping>(ctl & 3);
  opts.max_pending = 1 + ((ctl >> 2) & 7);
  opts.timeout = std::chrono::milliseconds(1 + (ctl >> 5));
  std::size_t printed = 0;
  Grouper g(opts, [&](const Group& grp) {
    std::string out;
    print_group(out, grp);
    printed += out.size();
  });
  auto now = Grouper::Clock::time_point{};
  std::size_t pos = 1;
  while (pos < size) {
    std::size_t len = data[pos++];
    if (len > size - pos) len = size - pos;
    std::vector<std::byte> msg(len);  // its own allocation, so ASan sees any overread
    for (std::size_t i = 0; i < len; ++i) msg[i] = std::byte(data[pos + i]);
    pos += len;
    if (len == 1 && msg[0] == std::byte(0xFF)) {
      g.lost(1234, now);
    } else {
      g.feed(msg, now);
    }
    now += std::chrono::milliseconds(1);
    g.tick(now);
    if (g.pending() > opts.max_pending) __builtin_trap();
  }
  g.flush();
  if (g.pending() != 0) __builtin_trap();
  return 0;
}
