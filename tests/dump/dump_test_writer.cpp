// Test writer for the ringlog-dump scripted tests: creates a ring and writes lines.
//   dump_test_writer PATH AREA_SIZE [--records] LINE...
// With --records each line becomes a one-record batch (ReqURL) of vxid 1000 + index.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ringlog/record.hpp"
#include "ringlog/ring.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: dump_test_writer PATH AREA_SIZE [--records] LINE...\n");
    return 2;
  }
  try {
    ringlog::Ring r = ringlog::Ring::create(argv[1], {.area_size = std::strtoull(argv[2], nullptr, 10)});
    bool records = argc > 3 && std::strcmp(argv[3], "--records") == 0;
    for (int i = records ? 4 : 3; i < argc; ++i) {
      std::string line = argv[i];
      if (records) {
        std::uint8_t hdr[ringlog::kBatchHeaderMax], rec[ringlog::kRecordHeaderMax];
        std::string msg(reinterpret_cast<char*>(hdr),
                        ringlog::encode_batch_header(hdr, 1000u + static_cast<unsigned>(i), ringlog::VxidKind::client,
                                                     ringlog::kBatchFirst | ringlog::kBatchLast));
        msg.append(reinterpret_cast<char*>(rec), ringlog::encode_record_header(rec, ringlog::Tag::ReqURL, line.size(), false));
        msg += line;
        line = msg;
      }
      if (r.write(line) != ringlog::WriteStatus::ok) return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dump_test_writer: %s\n", e.what());
    return 1;
  }
  return 0;
}
