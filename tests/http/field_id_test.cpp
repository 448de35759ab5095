// Field ids: every fields.def name (in any letter case) gets its id, anything else -
// prefixes and extensions of a listed name, near misses, other bytes - is Other; the
// parser gives each field its id, and the filters built on ids (Connection-listed
// fields, verbatim runs) give what the name compares gave.
#include "http_test_util.hpp"

#include <cctype>

using namespace ringproxy::http;
using namespace ringproxy::http::test;

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}
std::string upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

TEST(FieldId, EveryListedNameInAnyCase) {
  for (std::size_t i = 1; i < kFieldIds; ++i) {
    const auto id = static_cast<FieldId>(i);
    const std::string_view n = field_name(id);
    ASSERT_FALSE(n.empty()) << i;
    EXPECT_EQ(field_id(n), id) << n;
    EXPECT_EQ(field_id(lower(n)), id) << n;
    EXPECT_EQ(field_id(upper(n)), id) << n;
    std::string mixed(n);
    for (std::size_t k = 0; k < mixed.size(); k += 2)
      mixed[k] = static_cast<char>(std::toupper(static_cast<unsigned char>(mixed[k])));
    EXPECT_EQ(field_id(mixed), id) << mixed;
  }
  EXPECT_EQ(field_name(FieldId::Other), "");
  EXPECT_EQ(field_id("x-forwarded-for"), FieldId::XForwardedFor);
  EXPECT_EQ(field_id("te"), FieldId::TE);
  EXPECT_EQ(field_id("IF-UNMODIFIED-SINCE"), FieldId::IfUnmodifiedSince);
}

TEST(FieldId, UnknownNamesAreOther) {
  for (const char* n : {"X-Custom", "Accept", "User-Agent", "Content-Type", "Cache-Control", "Date", "Server",
                        "Trailers", "Hosts", "Tee", "Age", "Vary", "ETag", "Set-Cookie"})
    EXPECT_EQ(field_id(n), FieldId::Other) << n;
  EXPECT_EQ(field_id(""), FieldId::Other);
  EXPECT_EQ(field_id(std::string(200, 'a')), FieldId::Other);
}

TEST(FieldId, PrefixesAndExtensionsOfListedNamesAreOther) {
  for (std::size_t i = 1; i < kFieldIds; ++i) {
    const std::string n(field_name(static_cast<FieldId>(i)));
    for (std::size_t len = 1; len < n.size(); ++len) {
      const FieldId got = field_id(std::string_view(n).substr(0, len));
      // (a prefix may be another listed name: "Connection" is not one of "Content-Length")
      EXPECT_TRUE(got == FieldId::Other || field_name(got).size() == len) << n << " prefix " << len;
      EXPECT_NE(got, static_cast<FieldId>(i)) << n << " prefix " << len;
    }
    EXPECT_EQ(field_id(n + "x"), FieldId::Other) << n;
    EXPECT_EQ(field_id(n + "-"), FieldId::Other) << n;
    EXPECT_EQ(field_id("x" + n), FieldId::Other) << n;
  }
  EXPECT_EQ(field_id("Hos"), FieldId::Other);
  EXPECT_EQ(field_id("Content-Len"), FieldId::Other);
  EXPECT_EQ(field_id("If-None"), FieldId::Other);
}

TEST(FieldId, NearMissesAreOther) {
  // One byte changed in each position of each listed name: never that name. Includes
  // the bytes a case fold could confuse ('-' ^ 0x20 is CR, '_' is '-' + 0x32).
  for (std::size_t i = 1; i < kFieldIds; ++i) {
    const auto id = static_cast<FieldId>(i);
    const std::string n(field_name(id));
    for (std::size_t k = 0; k < n.size(); ++k) {
      for (int b : {0x0d, int{'_'}, int{'.'}, int{'@'}, int{'`'}, int{'{'}, 0x80, 0xe5, 0}) {
        std::string m = n;
        if (static_cast<unsigned char>(m[k]) == b) continue;
        m[k] = static_cast<char>(b);
        EXPECT_NE(field_id(m), id) << n << " byte " << k << " = " << b;
      }
      std::string m = n;
      m[k] = static_cast<char>(m[k] ^ 0x20);  // a letter changes case; '-' becomes CR
      if (n[k] == '-') EXPECT_NE(field_id(m), id) << n << " byte " << k;
      else EXPECT_EQ(field_id(m), id) << n << " byte " << k;
    }
  }
}

TEST(FieldId, ParserGivesEachFieldItsId) {
  auto p = parse_req(
      "GET / HTTP/1.1\r\nhOsT: h\r\nAccept: */*\r\nx-forwarded-FOR: 10.0.0.1\r\nX-Forwarded-Fo: no\r\n"
      "Via: 1.0 a\r\nContent-Lengths: 1\r\n\r\n");
  ASSERT_TRUE(p.r.done());
  const HeaderList& hs = p.h.headers;
  ASSERT_EQ(hs.size(), 6u);
  for (const Header& h : hs) EXPECT_EQ(h.id, field_id(h.name)) << h.name;
  EXPECT_EQ(hs[0].id, FieldId::Host);
  EXPECT_EQ(hs[1].id, FieldId::Other);
  EXPECT_EQ(hs[2].id, FieldId::XForwardedFor);
  EXPECT_EQ(hs[3].id, FieldId::Other);
  EXPECT_EQ(hs[4].id, FieldId::Via);
  EXPECT_EQ(hs[5].id, FieldId::Other);
  EXPECT_TRUE(hs.has(FieldId::Via));
  EXPECT_FALSE(hs.has(FieldId::ContentLength));
  EXPECT_EQ(hs.find(FieldId::XForwardedFor), &hs[2]);
  EXPECT_EQ(hs.find(FieldId::Range), nullptr);
  // The list's set of ids is the message's: a reused list forgets the previous one's.
  RequestParser parser;
  RequestHead h;
  ASSERT_TRUE(parser.parse("GET / HTTP/1.1\r\nHost: h\r\nVia: 1.1 x\r\n\r\n", h).done());
  ASSERT_TRUE(parser.parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n", h).done());
  EXPECT_FALSE(h.headers.has(FieldId::Via));
  EXPECT_EQ(h.headers.find(FieldId::Via), nullptr);
}

TEST(FieldId, VerbatimOnlyForTheCanonicalLineShape) {
  auto p = parse_resp(
      "HTTP/1.1 200 OK\r\nA: 1\r\nB:2\r\nC:  3\r\nD: 4 \r\nE:\t5\r\nF: \r\nG:\r\nH: 8\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(p.r.done());
  std::vector<bool> v;
  for (const Header& h : p.h.headers) v.push_back(h.verbatim);
  EXPECT_EQ(v, (std::vector<bool>{true, false, false, false, false, true, false, true, true}));
  // Bare LF line ends (accepted from origins) are never verbatim: we send CRLF.
  auto lf = parse_resp("HTTP/1.1 200 OK\nA: 1\nContent-Length: 0\n\n");
  ASSERT_TRUE(lf.r.done());
  for (const Header& h : lf.h.headers) EXPECT_FALSE(h.verbatim) << h.name;
}

TEST(FieldId, ConnectionListedByIdAgreesWithNames) {
  auto p = parse_req(
      "GET / HTTP/1.1\r\nHost: h\r\nConnection: close, X-Secret , te\r\nConnection: content-LENGTH\r\n"
      "TE: trailers\r\nX-Secret: 1\r\nX-Other: 2\r\nContent-Length: 0\r\nClose: 3\r\nAccept: */*\r\n\r\n");
  ASSERT_TRUE(p.r.done());
  const ConnectionInfo& c = p.h.connection;
  EXPECT_TRUE(c.close);
  EXPECT_TRUE(c.lists_other);
  EXPECT_EQ(c.listed, field_set(FieldId::Close, FieldId::TE, FieldId::ContentLength));
  for (const Header& h : p.h.headers) EXPECT_EQ(c.lists(h), c.lists(h.name)) << h.name;
  for (const Header& h : p.h.headers) EXPECT_EQ(is_hop_by_hop(h, c), is_hop_by_hop(h.name, c)) << h.name;
  // Only listed fields.def names: no scan needed, and none happens for Other fields.
  auto q = parse_req("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nX-A: 1\r\n\r\n");
  ASSERT_TRUE(q.r.done());
  EXPECT_FALSE(q.h.connection.lists_other);
  EXPECT_TRUE(q.h.connection.keep_alive && q.h.connection.upgrade);
  for (const Header& h : q.h.headers) EXPECT_EQ(q.h.connection.lists(h), q.h.connection.lists(h.name)) << h.name;
}

TEST(FieldId, KeptRunsCopyAsFieldByField) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC:3\r\nD: 4\r\nVia: 1.0 x\r\nE: 5\r\nF:  6\r\nG: 7\r\n"
      "Content-Length: 0\r\n\r\n";
  auto p = parse_resp(wire);
  ASSERT_TRUE(p.r.done());
  for (int mask = 0; mask < 1 << 9; ++mask) {
    std::string runs, each;
    std::size_t k = 0;
    write_fields_if(runs, p.h.headers, [&](const Header&) { return (mask >> k++) & 1; });
    k = 0;
    for (const Header& h : p.h.headers)
      if ((mask >> k++) & 1) write_header(each, h.name, h.value);
    ASSERT_EQ(runs, each) << mask;
  }
}
