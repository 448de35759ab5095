// Test helper: reads every transaction of a ringlog instance's ring through the
// library's reader API (passive Reader from the oldest message, Grouper in vxid
// mode) and prints one JSON object per transaction, for the ringproxy end-to-end
// tests to assert on; with --stats, the instance's counters (StatsReader snapshot) as
// "name value" lines. Usage: proxy_log_reader RING_PATH | --stats INSTANCE_DIR
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ringlog/group.hpp"
#include "ringlog/json.hpp"
#include "ringlog/ring.hpp"
#include "ringlog/stats.hpp"
#include "ringlog/tags.hpp"

namespace {

std::string json_str(std::string_view s) {
  std::string o;
  ringlog::append_json_string(o, s);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--stats") {
    try {
      auto snap = ringlog::stats::InstanceReader::open(argv[2]).snapshot();
      for (const auto& c : snap.counters)
        std::printf("%s %lld\n", c.name.c_str(),
                    c.type == ringlog::stats::Type::gauge ? (long long)c.as_signed() : (long long)c.raw);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "proxy_log_reader: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: proxy_log_reader RING_PATH | --stats INSTANCE_DIR\n");
    return 2;
  }
  try {
    auto rd = ringlog::Reader::open(argv[1], {ringlog::ReaderKind::passive, ringlog::StartAt::oldest});
    ringlog::Grouper g({ringlog::Grouping::vxid, std::chrono::milliseconds(120000), 1000000}, [](const ringlog::Group& grp) {
      for (const ringlog::Transaction* t : grp.txns) {
        std::string o = "{\"vxid\":" + std::to_string(t->vxid) + ",\"type\":" +
                        json_str(ringlog::type_name(t->type)) + ",\"parent\":" + std::to_string(t->parent) +
                        ",\"reason\":" + json_str(t->reason) + ",\"ended\":" + (t->ended ? "true" : "false") +
                        ",\"records\":[";
        for (std::size_t i = 0; i < t->records.size(); ++i) {
          if (i) o += ',';
          o += "[" + json_str(ringlog::tag_name(t->records[i].tag)) + "," + json_str(t->payload(i)) + "]";
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
    std::fprintf(stderr, "proxy_log_reader: %s\n", e.what());
    return 1;
  }
  return 0;
}
