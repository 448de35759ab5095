// Test helper for the tunnel end-to-end tests: every transaction of a ring (passive
// Reader from the oldest message, Grouper in vxid mode) as one JSON object per line; or
// with --stats, an instance's counters as "name value" lines.
// Usage: tunnel_log_reader RING_PATH | --stats INSTANCE_DIR
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ringlog/group.hpp"
#include "ringlog/ring.hpp"
#include "ringlog/stats.hpp"
#include "ringlog/tags.hpp"

namespace {

std::string json_str(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += char(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += char(c);
    }
  }
  return o + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string(argv[1]) == "--stats") {
      auto snap = ringlog::stats::InstanceReader::open(argv[2]).snapshot();
      for (const auto& c : snap.counters)
        std::printf("%s %lld\n", c.name.c_str(),
                    c.type == ringlog::stats::Type::gauge ? (long long)c.as_signed() : (long long)c.raw);
      return 0;
    }
    if (argc != 2) {
      std::fprintf(stderr, "usage: tunnel_log_reader RING_PATH | --stats INSTANCE_DIR\n");
      return 2;
    }
    auto rd = ringlog::Reader::open(argv[1], {ringlog::ReaderKind::passive, ringlog::StartAt::oldest});
    ringlog::Grouper g({ringlog::Grouping::vxid, std::chrono::milliseconds(120000), 1000000},
                       [](const ringlog::Group& grp) {
                         for (const ringlog::Transaction* t : grp.txns) {
                           std::string o = "{\"vxid\":" + std::to_string(t->vxid) + ",\"type\":" +
                                           json_str(ringlog::type_name(t->type)) +
                                           ",\"parent\":" + std::to_string(t->parent) +
                                           ",\"reason\":" + json_str(t->reason) +
                                           ",\"ended\":" + (t->ended ? "true" : "false") + ",\"records\":[";
                           for (std::size_t i = 0; i < t->records.size(); ++i) {
                             if (i) o += ',';
                             o += "[" + json_str(ringlog::tag_name(t->records[i].tag)) + "," +
                                  json_str(t->records[i].payload) + "]";
                           }
                           o += "]}\n";
                           std::fputs(o.c_str(), stdout);
                         }
                       });
    std::vector<std::byte> buf;
    for (;;) {
      auto r = rd.next(buf);
      auto now = ringlog::Grouper::Clock::now();
      if (r.status == ringlog::ReadStatus::empty) break;
      if (r.status == ringlog::ReadStatus::lost) {
        g.lost(r.lost, now);
        continue;
      }
      if (r.kind == ringlog::format::MsgKind::data) g.feed(buf, now);
    }
    g.flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tunnel_log_reader: %s\n", e.what());
    return 1;
  }
  return 0;
}
