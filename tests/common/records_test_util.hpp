// Helpers for the records tests: read every batch of a ring back, decoded and owned.
#pragma once

#include <string>
#include <vector>

#include "ringlog/group.hpp"
#include "ringlog/log.hpp"
#include "ringlog/printer.hpp"
#include "ringlog/record.hpp"
#include "ringlog/ring.hpp"

namespace ringlog::test {

struct OwnedRecord {
  Tag tag;
  bool truncated;
  std::string payload;
};

struct DecodedBatch {
  BatchHeader hdr;
  DecodeStatus status;
  std::vector<OwnedRecord> records;
};

inline DecodedBatch decode(std::span<const std::byte> msg) {
  BatchDecoder d(msg);
  DecodedBatch b{d.header(), DecodeStatus::ok, {}};
  Record r;
  while (d.next(r)) b.records.push_back({r.tag, r.truncated, std::string(r.payload)});
  b.status = d.status();
  return b;
}

// Every data message in the ring from the oldest, decoded.
inline std::vector<DecodedBatch> read_batches(const std::string& path) {
  Reader rd = Reader::open(path, {.kind = ReaderKind::passive, .start = StartAt::oldest});
  std::vector<DecodedBatch> out;
  std::vector<std::byte> buf;
  for (;;) {
    ReadResult r = rd.next(buf);
    if (r.status == ReadStatus::empty) break;
    if (r.status == ReadStatus::message && r.kind == format::MsgKind::data) out.push_back(decode(buf));
  }
  return out;
}

// Every group a grouper makes of the ring's content, printed.
inline std::string print_ring(const std::string& path, Grouping mode) {
  std::string out;
  Grouper g({.mode = mode}, [&](const Group& grp) { print_group(out, grp); });
  Reader rd = Reader::open(path, {.kind = ReaderKind::passive, .start = StartAt::oldest});
  std::vector<std::byte> buf;
  for (;;) {
    ReadResult r = rd.next(buf);
    if (r.status == ReadStatus::empty) break;
    if (r.status == ReadStatus::message && r.kind == format::MsgKind::data) g.feed(buf, Grouper::Clock::now());
  }
  g.flush();
  return out;
}

inline std::vector<std::string> payloads(const DecodedBatch& b, Tag t) {
  std::vector<std::string> v;
  for (auto& r : b.records)
    if (r.tag == t) v.push_back(r.payload);
  return v;
}

}  // namespace ringlog::test
