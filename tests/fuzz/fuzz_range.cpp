// fuzz-link: ringproxy_delivery
// libFuzzer target: Range header planning and the range filter. Input: 2 bytes of
// body length and segment size, the rest is the Range header. Any plan must be
// consistent (sorted, non-overlapping, inside the body), and the filter must produce
// exactly content_length bytes, equal to the body's bytes for a single range.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ringproxy/delivery/filters.hpp"

namespace d = ringproxy::delivery;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  std::size_t len = std::size_t(data[0]) * 37;  // 0 .. 9435
  std::size_t seg = 1 + data[1] % 64;
  std::string_view header(reinterpret_cast<const char*>(data + 2), size - 2);
  d::RangePlan p = d::plan_range(header, len, "text/plain");
  if (p.status == 200 || p.status == 416) {
    if (!p.ranges.empty() && p.status == 416) std::abort();
    return 0;
  }
  if (p.status != 206 || p.ranges.empty()) std::abort();
  for (std::size_t i = 0; i < p.ranges.size(); ++i) {
    if (p.ranges[i].lo >= p.ranges[i].hi || p.ranges[i].hi > len) std::abort();
    if (i && p.ranges[i].lo <= p.ranges[i - 1].hi) std::abort();  // coalesced
  }
  d::Store st({.capacity = 1 << 20, .segment_size = seg});
  std::string body(len, '\0');
  for (std::size_t i = 0; i < len; ++i) body[i] = char(i * 131);
  d::ObjRef o = st.new_object(false);
  if (o->append(body.data(), body.size()) != ssize_t(body.size())) return 0;
  o->finish();
  std::string out;
  {
    d::Chain c(o, nullptr);
    c.push(std::make_unique<d::RangeFilter>(p, 0, 3));
    d::ScatterArray sa(2 + data[1] % 5);
    for (int guard = 0; guard < 1000000; ++guard) {
      int r = c.pull(sa);
      if (r < 0) std::abort();
      for (std::size_t i = 0; i < sa.used(); ++i) out.append((const char*)sa.at(i).iov_base, sa.at(i).iov_len);
      bool end = sa.end();
      c.give_all(sa);
      c.flush_returns();
      if (end) break;
    }
    if (c.reader().outstanding() != 0) std::abort();
  }
  if (out.size() != p.content_length) std::abort();
  if (p.ranges.size() == 1 && out != body.substr(p.ranges[0].lo, p.ranges[0].hi - p.ranges[0].lo)) std::abort();
  return 0;
}
