// Keeps docs/FORMAT.md honest: parses its marked tables (header, writer-slot and
// reader-slot layouts, constants, message kinds, varint examples) and compares every
// number with the compiled code. It must fail when a documented offset is wrong.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ringlog/format.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

#ifndef RINGLOG_FORMAT_MD
#error "RINGLOG_FORMAT_MD must name docs/FORMAT.md"
#endif

using namespace ringlog;
using namespace ringlog::format;

namespace {

std::string trim(std::string s) {
  auto issp = [](char c) { return c == ' ' || c == '\t' || c == '`' || c == '\r'; };
  while (!s.empty() && issp(s.front())) s.erase(s.begin());
  while (!s.empty() && issp(s.back())) s.pop_back();
  return s;
}

// The cells of a markdown table row ("| a | b |" -> {"a", "b"}).
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cur += '|';
      ++i;
    } else if (line[i] == '|') {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += line[i];
    }
  }
  return out;
}

struct Row {
  int line;
  std::vector<std::string> cells;
};

// Tables that follow a marker line "<!-- NAME -->", keyed by NAME; header and
// separator rows removed.
std::map<std::string, std::vector<Row>> read_tables(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::map<std::string, std::vector<Row>> tables;
  std::string line, current;
  int n = 0, row_in_table = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string t = trim(line);
    if (t.rfind("<!--", 0) == 0 && t.size() > 7 && t.compare(t.size() - 3, 3, "-->") == 0) {
      current = trim(t.substr(4, t.size() - 7));
      EXPECT_EQ(tables.count(current), 0u) << path << ":" << n << ": table marker repeated: " << current;
      tables[current];
      row_in_table = 0;
      continue;
    }
    if (current.empty()) continue;
    if (t.empty() || t[0] != '|') {
      if (row_in_table > 0) current.clear();  // the table ended
      continue;
    }
    ++row_in_table;
    if (row_in_table == 1) continue;  // column names
    if (t.rfind("|---", 0) == 0 || t.rfind("| ---", 0) == 0) continue;
    tables[current].push_back({n, cells(t)});
  }
  return tables;
}

std::uint64_t number(const std::string& s, int line) {
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(s, &used, 0);
  } catch (...) {
    ADD_FAILURE() << "FORMAT.md:" << line << ": not a number: '" << s << "'";
    return ~0ull;
  }
  EXPECT_EQ(used, s.size()) << "FORMAT.md:" << line << ": not a number: '" << s << "'";
  return v;
}

struct Field {
  std::size_t offset, size;
};
using Layout = std::map<std::string, Field>;

#define RINGLOG_FIELD(S, f) {#f, Field{offsetof(S, f), sizeof(S::f)}}

const Layout& header_layout() {
  static const Layout l = {
      RINGLOG_FIELD(Header, magic),
      RINGLOG_FIELD(Header, version),
      RINGLOG_FIELD(Header, byte_order),
      RINGLOG_FIELD(Header, word_size),
      RINGLOG_FIELD(Header, pos_size),
      RINGLOG_FIELD(Header, writer_slots),
      RINGLOG_FIELD(Header, header_len),
      RINGLOG_FIELD(Header, area_size),
      RINGLOG_FIELD(Header, created_ns),
      RINGLOG_FIELD(Header, creator_pid),
      RINGLOG_FIELD(Header, flags),
      RINGLOG_FIELD(Header, reader_slots),
      RINGLOG_FIELD(Header, reserved0),
      RINGLOG_FIELD(Header, max_msg_len),
      RINGLOG_FIELD(Header, instance_id),
      RINGLOG_FIELD(Header, tail),
      RINGLOG_FIELD(Header, msgs_written),
      RINGLOG_FIELD(Header, bytes_written),
      RINGLOG_FIELD(Header, batches),
      RINGLOG_FIELD(Header, pending_drop_msgs),
      RINGLOG_FIELD(Header, pending_drop_bytes),
      RINGLOG_FIELD(Header, head),
      RINGLOG_FIELD(Header, owner),
      RINGLOG_FIELD(Header, owner_since_ns),
      RINGLOG_FIELD(Header, owner_saved_rc),
      RINGLOG_FIELD(Header, pinned),
      RINGLOG_FIELD(Header, futex),
      RINGLOG_FIELD(Header, waiters),
      RINGLOG_FIELD(Header, waking),
      RINGLOG_FIELD(Header, wake_again),
      RINGLOG_FIELD(Header, msgs_dropped),
      RINGLOG_FIELD(Header, bytes_dropped),
      RINGLOG_FIELD(Header, lock_waits),
      RINGLOG_FIELD(Header, msgs_truncated),
      RINGLOG_FIELD(Header, lock_recoveries),
      RINGLOG_FIELD(Header, torn_discarded),
      RINGLOG_FIELD(Header, readers_released),
      RINGLOG_FIELD(Header, msgs_refused),
      RINGLOG_FIELD(Header, writer_waits),
      RINGLOG_FIELD(Header, reserved_counters),
      RINGLOG_FIELD(Header, control),
      RINGLOG_FIELD(Header, reserved1),
      RINGLOG_FIELD(Header, writers),
      RINGLOG_FIELD(Header, readers),
  };
  return l;
}

const Layout& writer_slot_layout() {
  static const Layout l = {
      RINGLOG_FIELD(WriterSlot, pid),          RINGLOG_FIELD(WriterSlot, tid),
      RINGLOG_FIELD(WriterSlot, start_time),   RINGLOG_FIELD(WriterSlot, inflight_pos),
      RINGLOG_FIELD(WriterSlot, inflight_end), RINGLOG_FIELD(WriterSlot, saved_rc),
      RINGLOG_FIELD(WriterSlot, reserved0),    RINGLOG_FIELD(WriterSlot, batches),
      RINGLOG_FIELD(WriterSlot, reserved1),
  };
  return l;
}

const Layout& reader_slot_layout() {
  static const Layout l = {
      RINGLOG_FIELD(ReaderSlot, pid),       RINGLOG_FIELD(ReaderSlot, mode),
      RINGLOG_FIELD(ReaderSlot, start_time), RINGLOG_FIELD(ReaderSlot, pos),
      RINGLOG_FIELD(ReaderSlot, last_active_ns), RINGLOG_FIELD(ReaderSlot, msgs_read),
      RINGLOG_FIELD(ReaderSlot, bytes_read), RINGLOG_FIELD(ReaderSlot, next_pos),
      RINGLOG_FIELD(ReaderSlot, reserved),
  };
  return l;
}

#undef RINGLOG_FIELD

const std::map<std::string, std::vector<Row>>& doc() {
  static const auto tables = read_tables(RINGLOG_FORMAT_MD);
  return tables;
}

// Every field of the struct is documented once at its offset with its size, and the
// documented rows (fields and "(padding)") tile the struct from 0 to its size.
void check_layout(const std::string& name, const Layout& code, std::size_t struct_size) {
  auto it = doc().find("offsets: " + name);
  ASSERT_NE(it, doc().end()) << "FORMAT.md has no table marked <!-- offsets: " << name << " -->";
  const auto& rows = it->second;
  ASSERT_FALSE(rows.empty()) << "the " << name << " table in FORMAT.md is empty";
  std::map<std::string, int> seen;
  std::uint64_t expect_off = 0;
  for (const Row& r : rows) {
    ASSERT_GE(r.cells.size(), 3u) << "FORMAT.md:" << r.line << ": a layout row needs offset, size, field";
    std::uint64_t off = number(r.cells[0], r.line), size = number(r.cells[1], r.line);
    const std::string& field = r.cells[2];
    EXPECT_EQ(off, expect_off) << "FORMAT.md:" << r.line << ": " << name << " row '" << field
                               << "' does not start where the previous row ends (gap or overlap)";
    expect_off = off + size;
    if (field == "(padding)") continue;
    auto f = code.find(field);
    if (f == code.end()) {
      ADD_FAILURE() << "FORMAT.md:" << r.line << ": " << name << " has no field '" << field << "'";
      continue;
    }
    if (seen.count(field)) ADD_FAILURE() << "FORMAT.md:" << r.line << ": " << field << " documented twice";
    seen[field] = r.line;
    EXPECT_EQ(off, f->second.offset) << "FORMAT.md:" << r.line << ": offset of " << name << "::" << field;
    EXPECT_EQ(size, f->second.size) << "FORMAT.md:" << r.line << ": size of " << name << "::" << field;
  }
  EXPECT_EQ(expect_off, struct_size) << "the " << name << " table must end at sizeof(" << name << ")";
  for (auto& [field, f] : code)
    EXPECT_TRUE(seen.count(field)) << name << "::" << field << " (offset " << f.offset
                                   << ") is missing from FORMAT.md";
}

}  // namespace

TEST(FormatDoc, HeaderTableMatchesStruct) { check_layout("Header", header_layout(), sizeof(Header)); }

TEST(FormatDoc, WriterSlotTableMatchesStruct) {
  check_layout("WriterSlot", writer_slot_layout(), sizeof(WriterSlot));
}

TEST(FormatDoc, ReaderSlotTableMatchesStruct) {
  check_layout("ReaderSlot", reader_slot_layout(), sizeof(ReaderSlot));
}

TEST(FormatDoc, ConstantsMatchCode) {
  const std::map<std::string, std::uint64_t> code = {
      {"kMagic", kMagic},
      {"kVersion", kVersion},
      {"kByteOrderMark", kByteOrderMark},
      {"kHeaderLen", kHeaderLen},
      {"kWriterSlots", kWriterSlots},
      {"kReaderSlots", kReaderSlots},
      {"kControlSize", kControlSize},
      {"kMinAreaSize", kMinAreaSize},
      {"kMaxAreaSize", kMaxAreaSize},
      {"kTailLock", kTailLock},
      {"kRcWriting", kRcWriting},
      {"kRcMaxReaders", kRcMaxReaders},
      {"kVarintMax", kVarintMax},
  };
  auto it = doc().find("constants");
  ASSERT_NE(it, doc().end()) << "FORMAT.md has no table marked <!-- constants -->";
  std::map<std::string, int> seen;
  for (const Row& r : it->second) {
    ASSERT_GE(r.cells.size(), 2u);
    auto c = code.find(r.cells[0]);
    if (c == code.end()) {
      ADD_FAILURE() << "FORMAT.md:" << r.line << ": unknown constant " << r.cells[0];
      continue;
    }
    seen[r.cells[0]] = r.line;
    EXPECT_EQ(number(r.cells[1], r.line), c->second) << "FORMAT.md:" << r.line << ": value of " << r.cells[0];
  }
  for (auto& [name, v] : code) EXPECT_TRUE(seen.count(name)) << name << " is missing from FORMAT.md";
  // The magic is the ASCII text the document says it is.
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&kMagic), 8), "RINGLOG1");
}

TEST(FormatDoc, MessageKindsMatchCode) {
  const std::map<std::string, MsgKind> code = {
      {"data", MsgKind::data}, {"notice", MsgKind::notice}, {"pad", MsgKind::pad}};
  auto it = doc().find("kinds");
  ASSERT_NE(it, doc().end()) << "FORMAT.md has no table marked <!-- kinds -->";
  std::size_t matched = 0;
  for (const Row& r : it->second) {
    ASSERT_GE(r.cells.size(), 2u);
    if (!r.cells[0].empty() && r.cells[0][0] == '(') continue;  // reserved values
    auto c = code.find(r.cells[0]);
    ASSERT_NE(c, code.end()) << "FORMAT.md:" << r.line << ": unknown kind " << r.cells[0];
    EXPECT_EQ(number(r.cells[1], r.line), std::uint64_t(c->second)) << "FORMAT.md:" << r.line;
    ++matched;
  }
  EXPECT_EQ(matched, code.size());
}

TEST(FormatDoc, VarintExamplesMatchEncoder) {
  auto it = doc().find("varint-examples");
  ASSERT_NE(it, doc().end()) << "FORMAT.md has no table marked <!-- varint-examples -->";
  ASSERT_GE(it->second.size(), 5u);
  for (const Row& r : it->second) {
    ASSERT_GE(r.cells.size(), 2u);
    std::uint64_t v = number(r.cells[0], r.line);
    std::vector<std::uint8_t> documented;
    std::istringstream bytes(r.cells[1]);
    std::string b;
    while (bytes >> b) documented.push_back(static_cast<std::uint8_t>(std::stoul(b, nullptr, 16)));
    std::uint8_t enc[kVarintMax];
    std::size_t n = varint_encode(v, enc);
    EXPECT_EQ(std::vector<std::uint8_t>(enc, enc + n), documented) << "FORMAT.md:" << r.line << ": varint of " << v;
    std::uint64_t back = 0;
    EXPECT_EQ(varint_decode([&](std::size_t i) { return documented.at(i); }, documented.size(), back),
              documented.size());
    EXPECT_EQ(back, v) << "FORMAT.md:" << r.line;
  }
}

// The in-band drop notice has the documented text and counts.
TEST(FormatDoc, DropNoticeTextAsDocumented) {
  ringlog::test::ScratchPath path("docs-notice");
  CreateOptions co;
  co.area_size = kMinAreaSize;
  Ring ring = Ring::create(path, co);
  ReaderOptions ro;
  ro.kind = ReaderKind::pinned;
  ro.start = StartAt::oldest;
  Reader reader = Reader::attach(ring, ro);  // pins position 0: nothing can be reclaimed
  std::string msg(100, 'x');
  std::uint64_t ok = 0, dropped = 0;
  while (dropped < 3) {
    WriteStatus s = ring.write(msg);
    (s == WriteStatus::ok ? ok : dropped) += 1;
  }
  std::vector<std::byte> out;
  for (std::uint64_t i = 0; i < ok; ++i) ASSERT_EQ(reader.next(out).status, ReadStatus::message);
  ASSERT_EQ(ring.write("after"), WriteStatus::ok);
  ReadResult r = reader.next(out);
  ASSERT_EQ(r.status, ReadStatus::message);
  ASSERT_EQ(r.kind, MsgKind::notice);
  std::string text(reinterpret_cast<const char*>(out.data()), out.size());
  std::smatch m;
  ASSERT_TRUE(std::regex_match(text, m, std::regex(R"(ringlog: (\d+) messages \((\d+) bytes\) dropped)"))) << text;
  EXPECT_EQ(std::stoull(m[1]), dropped);
  // Bytes are framed bytes: RC + varint + payload of each dropped message.
  std::uint64_t framed = 1 + varint_size(msg.size() << kKindBits) + msg.size();
  EXPECT_EQ(std::stoull(m[2]), dropped * framed);
  r = reader.next(out);
  ASSERT_EQ(r.status, ReadStatus::message);
  EXPECT_EQ(r.kind, MsgKind::data);
}
