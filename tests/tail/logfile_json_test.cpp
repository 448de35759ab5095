// The pieces `ringlog -w/-r/-j` are built on: log files survive a round trip and
// damaged bytes end in a status, never a crash; JSON output stays valid whatever
// bytes the records hold.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringlog/json.hpp"
#include "ringlog/logfile.hpp"
#include "ringlog/ncsa.hpp"

namespace {

using ringlog::LogFileReader;
using ringlog::LogFileStatus;

std::string file_with(const std::vector<std::string>& msgs) {
  std::string f(ringlog::logfile::kMagic, 8);
  f += std::string("\x01\0\0\0\0\0\0\0", 8);
  for (const auto& m : msgs) {
    std::uint32_t n = std::uint32_t(m.size());
    f += char(n & 0xff);
    f += char((n >> 8) & 0xff);
    f += char((n >> 16) & 0xff);
    f += char((n >> 24) & 0xff);
    f += char(0);
    f += m;
  }
  return f;
}

std::vector<std::string> read_all(const std::string& bytes, LogFileStatus& end) {
  LogFileReader r = LogFileReader::from_memory(bytes);
  std::vector<std::string> out;
  std::vector<std::byte> buf;
  ringlog::format::MsgKind k{};
  for (;;) {
    end = r.next(buf, k);
    if (end != LogFileStatus::message) return out;
    out.emplace_back(reinterpret_cast<const char*>(buf.data()), buf.size());
  }
}

TEST(LogFile, ReadsEntriesAndRepeatedHeaders) {
  LogFileStatus st;
  auto a = file_with({"one", "", "three"});
  EXPECT_EQ(read_all(a, st), (std::vector<std::string>{"one", "", "three"}));
  EXPECT_EQ(st, LogFileStatus::end);
  EXPECT_EQ(read_all(a + file_with({"four"}), st).size(), 4u);  // concatenated files
  EXPECT_EQ(st, LogFileStatus::end);
}

TEST(LogFile, DamageEndsWithAStatus) {
  LogFileStatus st;
  auto a = file_with({"one", "two"});
  EXPECT_EQ(read_all(a.substr(0, a.size() - 1), st).size(), 1u);
  EXPECT_EQ(st, LogFileStatus::cut);
  EXPECT_EQ(read_all(a.substr(0, 18), st).size(), 0u);
  EXPECT_EQ(st, LogFileStatus::cut);
  EXPECT_TRUE(read_all("", st).empty());
  EXPECT_EQ(st, LogFileStatus::bad_magic);
  EXPECT_TRUE(read_all("hello world, not a log", st).empty());
  EXPECT_EQ(st, LogFileStatus::bad_magic);
  auto v2 = a;
  v2[8] = 2;
  EXPECT_TRUE(read_all(v2, st).empty());
  EXPECT_EQ(st, LogFileStatus::bad_version);
  auto big = a;
  big[16 + 3] = char(0x7f);  // first entry length > 64 MiB
  EXPECT_TRUE(read_all(big, st).empty());
  EXPECT_EQ(st, LogFileStatus::damaged);
  auto kind = a;
  kind[16 + 4] = 9;
  EXPECT_TRUE(read_all(kind, st).empty());
  EXPECT_EQ(st, LogFileStatus::damaged);
  // Every prefix of a valid file ends cleanly or with a status.
  for (std::size_t i = 0; i <= a.size(); ++i) read_all(a.substr(0, i), st);
}

TEST(LogFile, TransactionsEncodeAsBatches) {
  ringlog::Transaction t;
  t.vxid = 77;
  t.kind = ringlog::VxidKind::client;
  t.begun = t.ended = true;
  t.add(ringlog::Tag::Begin, "req 1 rxreq");
  t.add(ringlog::Tag::ReqURL, std::string(300, 'u'), true);
  std::string msg;
  ringlog::encode_transaction(msg, t);
  ringlog::BatchDecoder d(std::as_bytes(std::span(msg.data(), msg.size())));
  ASSERT_TRUE(d.valid());
  EXPECT_EQ(d.header().vxid, 77u);
  EXPECT_TRUE(d.header().first && d.header().last);
  ringlog::Record r;
  ASSERT_TRUE(d.next(r));
  EXPECT_EQ(r.payload, "req 1 rxreq");
  ASSERT_TRUE(d.next(r));
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.payload.size(), 300u);
  EXPECT_FALSE(d.next(r));
  EXPECT_EQ(d.status(), ringlog::DecodeStatus::ok);
}

// A minimal JSON checker: strings must be valid (escapes, no raw control bytes, UTF-8).
bool valid_json_string(const std::string& s, std::size_t& i) {
  if (s[i] != '"') return false;
  for (++i; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"') {
      ++i;
      return true;
    }
    if (c < 0x20) return false;
    if (c == '\\') {
      char e = s[++i];
      if (e == 'u') {
        for (int k = 0; k < 4; ++k)
          if (!std::isxdigit(static_cast<unsigned char>(s[++i]))) return false;
      } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
        return false;
      }
    }
  }
  return false;
}

TEST(Json, EveryByteValueStaysValidJson) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += char(c);
  all += "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xed\xa0\x80 \xc0\xaf";  // valid and invalid UTF-8
  std::string out;
  ringlog::append_json_string(out, all);
  std::size_t i = 0;
  ASSERT_TRUE(valid_json_string(out, i)) << out;
  EXPECT_EQ(i, out.size());
  EXPECT_NE(out.find("\xc3\xa9"), std::string::npos);       // valid UTF-8 kept as is
  EXPECT_NE(out.find("\\u00ed\\u00a0\\u0080"), std::string::npos);  // surrogate bytes escaped
  EXPECT_NE(out.find("\\u0000"), std::string::npos);
}

// The documented rule of ringlog/json.hpp, byte class by byte class.
TEST(Json, EscapesByTheDocumentedRule) {
  auto esc = [](std::string_view in) {
    std::string out;
    ringlog::append_json_escaped(out, in);
    return out;
  };
  EXPECT_EQ(esc("plain /text/ 123"), "plain /text/ 123");
  EXPECT_EQ(esc("\"\\\n\r\t"), "\\\"\\\\\\n\\r\\t");
  EXPECT_EQ(esc(std::string("\x00\x01\x1f\x7f", 4)), "\\u0000\\u0001\\u001f\\u007f");
  EXPECT_EQ(esc("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");  // é € 😀 kept
  EXPECT_EQ(esc("\xef\xbf\xbd"), "\xef\xbf\xbd");             // U+FFFD itself is valid UTF-8
  EXPECT_EQ(esc("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf");     // U+10FFFF, the last code point
  EXPECT_EQ(esc("\x80"), "\\u0080");                          // stray continuation byte
  EXPECT_EQ(esc("\xff\xfe"), "\\u00ff\\u00fe");               // never in UTF-8
  EXPECT_EQ(esc("\xc0\xaf"), "\\u00c0\\u00af");               // overlong '/'
  EXPECT_EQ(esc("\xe0\x80\xaf"), "\\u00e0\\u0080\\u00af");    // overlong, three bytes
  EXPECT_EQ(esc("\xed\xa0\x80"), "\\u00ed\\u00a0\\u0080");    // a surrogate
  EXPECT_EQ(esc("\xf4\x90\x80\x80"), "\\u00f4\\u0090\\u0080\\u0080");  // above U+10FFFF
  EXPECT_EQ(esc("a\xc3"), "a\\u00c3");                        // cut short at the end
  EXPECT_EQ(esc("\xe2\x82z"), "\\u00e2\\u0082z");             // cut short before ASCII
  std::string quoted;
  ringlog::append_json_string(quoted, "x\"");
  EXPECT_EQ(quoted, "\"x\\\"\"");
}

// ringlog-ncsa -j values go through the same escaper; without -j they are C-style.
TEST(Json, NcsaJsonValuesUseTheSameEscaper) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += char(c);
  all += "\xc3\xa9 \xe2\x82\xac \xed\xa0\x80 \xc0\xaf \xf0\x9f\x98";
  std::string json, ncsa;
  ringlog::append_json_escaped(json, all);
  ringlog::ncsa_escape(ncsa, all, true);
  EXPECT_EQ(ncsa, json);
  std::string c_style;
  ringlog::ncsa_escape(c_style, "\"\xc3\xa9\x01", false);
  EXPECT_EQ(c_style, "\\\"\\xc3\\xa9\\x01");
}

TEST(Json, GroupShapeAndFilters) {
  ringlog::Transaction t;
  t.vxid = 5;
  t.type = ringlog::TxnType::req;
  t.kind = ringlog::VxidKind::client;
  t.parent = 4;
  t.reason = "rxreq";
  t.begun = true;
  t.add(ringlog::Tag::ReqURL, "/a");
  t.add(ringlog::Tag::Hash, std::string("\x01\xff", 2));
  t.add(ringlog::Tag::VSL, "timeout", false, true);
  ringlog::Group g{ringlog::Grouping::vxid, {&t}};
  std::string out;
  ringlog::append_json(out, g);
  EXPECT_EQ(out,
            "{\"group\":\"vxid\",\"vxid\":5,\"transactions\":[{\"vxid\":5,\"level\":1,\"type\":\"req\",\"side\":\"c\","
            "\"parent\":4,\"reason\":\"rxreq\",\"complete\":false,\"records\":[{\"tag\":\"ReqURL\",\"value\":\"/a\"},"
            "{\"tag\":\"Hash\",\"value\":\"01ff\"},{\"tag\":\"VSL\",\"value\":\"timeout\",\"synthetic\":true}]}]}\n");
  ringlog::JsonFilter f;
  f.record_filter = [](const ringlog::Transaction&, const ringlog::Record& r) { return r.tag == ringlog::Tag::ReqURL; };
  out.clear();
  ringlog::append_json(out, g, f);
  EXPECT_NE(out.find("\"records\":[{\"tag\":\"ReqURL\",\"value\":\"/a\"}]"), std::string::npos) << out;
}

}  // namespace
