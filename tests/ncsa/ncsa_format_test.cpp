// The NCSA formatter over constructed transactions: varnishncsa's default line byte
// for byte, every formatter, which record each one reads (first or last occurrence,
// header unsets), '-' / null for missing values, client vs backend side, escaping (C
// style and JSON), and format errors with their position. TZ is UTC for the dates.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <string>
#include <algorithm>
#include <vector>

#include "ringlog/group.hpp"
#include "ringlog/log.hpp"
#include "ringlog/ncsa.hpp"
#include "ringlog/ring.hpp"
#include "test_util.hpp"

using namespace ringlog;

namespace {

Transaction txn(std::uint64_t vxid, TxnType type, std::vector<std::pair<Tag, std::string>> recs) {
  Transaction t;
  t.vxid = vxid;
  t.type = type;
  t.kind = kind_of(type);
  for (auto& [tag, s] : recs) t.add(tag, s);
  return t;
}

// Adds records before the transaction's End (VCL-style edits).
void add_before_end(Transaction& t, std::vector<std::pair<Tag, std::string>> recs) {
  const std::size_t end = t.records.size() - 1;
  for (auto& [tag, str] : recs) t.add(tag, str);
  std::rotate(t.records.begin() + std::ptrdiff_t(end), t.records.begin() + std::ptrdiff_t(end) + 1, t.records.end());
}

// A client request the way ringproxy (and Varnish) logs it.
Transaction client_request() {
  return txn(32770, TxnType::req,
             {{Tag::Begin, "req 32769 rxreq"},
              {Tag::Timestamp, "Start: 1795990488.752601 0.000000 0.000000"},
              {Tag::Timestamp, "Req: 1795990488.752601 0.000000 0.000000"},
              {Tag::ReqStart, "192.0.2.10 51234 a0"},
              {Tag::ReqMethod, "GET"},
              {Tag::ReqURL, "/index.html?x=1&y=2"},
              {Tag::ReqProtocol, "HTTP/1.1"},
              {Tag::ReqHeader, "Host: www.example.com"},
              {Tag::ReqHeader, "User-Agent: curl/7.88.1"},
              {Tag::ReqHeader, "Referer: http://example.com/start"},
              {Tag::ReqHeader, "Authorization: Basic YWxpY2U6c2VjcmV0"},
              {Tag::Link, "bereq 32771 fetch"},
              {Tag::Timestamp, "Fetch: 1795990488.753000 0.000399 0.000399"},
              {Tag::RespProtocol, "HTTP/1.1"},
              {Tag::RespStatus, "200"},
              {Tag::RespReason, "OK"},
              {Tag::RespHeader, "Content-Type: text/html"},
              {Tag::RespHeader, "Content-Length: 6962"},
              {Tag::Timestamp, "Process: 1795990488.753100 0.000499 0.000100"},
              {Tag::Timestamp, "Resp: 1795990490.754723 2.002122 2.001623"},
              {Tag::ReqAcct, "82 0 82 304 6962 7266"},
              {Tag::End, ""}});
}

Transaction backend_fetch() {
  return txn(32771, TxnType::bereq,
             {{Tag::Begin, "bereq 32770 fetch"},
              {Tag::Timestamp, "Start: 1795990488.752700 0.000000 0.000000"},
              {Tag::BereqMethod, "GET"},
              {Tag::BereqURL, "/index.html?x=1&y=2"},
              {Tag::BereqProtocol, "HTTP/1.1"},
              {Tag::BereqHeader, "Host: origin.internal"},
              {Tag::BereqHeader, "X-Forwarded-For: 192.0.2.10"},
              {Tag::BackendOpen, "17 web1 198.51.100.7 8080 127.0.0.1 40000 connect"},
              {Tag::Timestamp, "Bereq: 1795990488.752800 0.000100 0.000100"},
              {Tag::Timestamp, "Beresp: 1795990488.753900 0.001200 0.001100"},
              {Tag::BerespProtocol, "HTTP/1.1"},
              {Tag::BerespStatus, "200"},
              {Tag::BerespHeader, "Content-Length: 6962"},
              {Tag::Timestamp, "BerespBody: 1795990488.754700 0.002000 0.000800"},
              {Tag::BereqAcct, "120 0 120 200 6962 7162"},
              {Tag::End, ""}});
}

std::string line(std::string_view fmt, const Transaction& t, bool json = false) {
  NcsaFormatter f = NcsaFormatter::compile(fmt, {.json = json});
  std::string out;
  f.format(t, out);
  EXPECT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  if (!out.empty()) out.pop_back();
  return out;
}

class Ncsa : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
};

}  // namespace

TEST_F(Ncsa, DefaultFormatIsVarnishncsaCombined) {
  EXPECT_EQ(line(kNcsaDefaultFormat, client_request()),
            "192.0.2.10 - alice [29/Nov/2026:22:14:48 +0000] "
            "\"GET http://www.example.com/index.html?x=1&y=2 HTTP/1.1\" 200 6962 "
            "\"http://example.com/start\" \"curl/7.88.1\"");
}

TEST_F(Ncsa, EveryFormatterOnTheClientSide) {
  Transaction t = client_request();
  EXPECT_EQ(line("%b|%D|%H|%h|%I|%l|%m|%O|%q|%s|%T|%U|%u", t),
            "6962|2002122|HTTP/1.1|192.0.2.10|82|-|GET|7266|?x=1&y=2|200|2|/index.html|alice");
  EXPECT_EQ(line("%{Content-Type}o %{content-length}o %{HOST}i", t), "text/html 6962 www.example.com");
  EXPECT_EQ(line("%{%Y-%m-%dT%H:%M:%S}t|%{sec}t|%{msec}t|%{usec}t|%{msec_frac}t|%{usec_frac}t", t),
            "2026-11-29T22:14:48|1795990488|1795990488752|1795990488752601|752|752601");
  EXPECT_EQ(line("%{s}T %{ms}T %{us}T", t), "2 2002 2002122");
  EXPECT_EQ(line("%{ringlog:time_firstbyte}x %{ringlog:hitmiss}x %{ringlog:handling}x "
                 "%{ringlog:side}x %{ringlog:vxid}x",
                 t),
            "0.000499 miss miss c 32770");
  // Varnish's spelling works too, for formats carried over from varnishncsa.
  EXPECT_EQ(line("%{Varnish:side}x %{Varnish:vxid}x", t), "c 32770");
  EXPECT_EQ(line("%{ringlog:default_format}x", t), line(kNcsaDefaultFormat, t));
}

TEST_F(Ncsa, LiteralsEscapesAndPercent) {
  Transaction t = client_request();
  EXPECT_EQ(line("a\\tb\\nc\\\\d 100%% %s", t), "a\tb\nc\\d 100% 200");
  EXPECT_EQ(line("", t), "");
  EXPECT_EQ(line("plain text", t), "plain text");
}

TEST_F(Ncsa, BackendSideReadsTheFetch) {
  Transaction t = backend_fetch();
  EXPECT_EQ(line(kNcsaDefaultFormat, t),
            "198.51.100.7 - - [29/Nov/2026:22:14:48 +0000] "
            "\"GET http://origin.internal/index.html?x=1&y=2 HTTP/1.1\" 200 6962 \"-\" \"-\"");
  EXPECT_EQ(line("%I %O %b %D %{ringlog:time_firstbyte}x %{ringlog:side}x %{ringlog:hitmiss}x "
                 "%{ringlog:handling}x %{X-Forwarded-For}i %{Content-Length}o",
                 t),
            "120 7162 6962 2000 0.001200 b - - 192.0.2.10 6962");
}

TEST_F(Ncsa, MissingValuesAreDashesOrJsonNulls) {
  Transaction t = txn(5, TxnType::req, {{Tag::Begin, "req 4 rxreq"}});
  const char* fmt = "%b %D %H %h %I %m %O %q %r %s %t %T %U %u %{X}i %{X}o %{ringlog:time_firstbyte}x "
                    "%{ringlog:hitmiss}x %{ringlog:handling}x %{sec}t %{VSL:Hit}x";
  EXPECT_EQ(line(fmt, t), "- - HTTP/1.0 - - - -  - http://localhost HTTP/1.0 - - - - - - - - - - - -");
  EXPECT_EQ(line(fmt, t, true),
            "null null HTTP/1.0  null  null  - http://localhost HTTP/1.0 null  null  -   null - - null ");
}

// varnishncsa 7.1 prints 0 for a HEAD, a 204 or an empty body (not CLF's '-'); '-' is
// for a transaction without ReqAcct.
TEST_F(Ncsa, ZeroBodyBytesIsZeroAsVarnishncsa) {
  Transaction t = client_request();
  for (auto& r : t.records)
    if (r.tag == Tag::ReqAcct) t.set_payload(r, "82 0 82 304 0 304");
  EXPECT_EQ(line("%b %O", t), "0 304");
  EXPECT_EQ(line("%b %O", t, true), "0 304");
  std::erase_if(t.records, [](const HeldRecord& r) { return r.tag == Tag::ReqAcct; });
  EXPECT_EQ(line("%b %O", t), "- -");
  EXPECT_EQ(line("%b %O", t, true), "null null");
}

TEST_F(Ncsa, FirstOrLastOccurrenceAsVarnishncsa) {
  Transaction t = client_request();
  // VCL-style edits: a second URL, method, status, header, start, Host.
  add_before_end(t,
                 {{Tag::ReqURL, "/rewritten"},
                    {Tag::ReqMethod, "POST"},
                    {Tag::ReqStart, "10.9.9.9 1 a1"},
                    {Tag::ReqHeader, "Host: second.example"},
                    {Tag::ReqHeader, "User-Agent: changed/2"},
                    {Tag::RespStatus, "404"},
                    {Tag::Timestamp, "Start: 1.0 0 0"}});
  // Request line, client address and times: the first; headers and status: the last;
  // %r's Host: the first.
  EXPECT_EQ(line("%U %m %h %s %{User-Agent}i %{Host}i %{sec}t|%r", t),
            "/index.html GET 192.0.2.10 404 changed/2 second.example 1795990488|"
            "GET http://www.example.com/index.html?x=1&y=2 HTTP/1.1");
}

TEST_F(Ncsa, UnsetHeadersAreGoneUntilSetAgain) {
  Transaction t = client_request();
  add_before_end(t, {{Tag::ReqUnset, "Referer: http://example.com/start"},
                                         {Tag::RespUnset, "Content-Type: text/html"},
                                         {Tag::RespHeader, "Content-Type: text/plain"},
                                         {Tag::ReqUnset, "User-Agent: curl/7.88.1"},
                                         {Tag::ReqHeader, "User-Agent: normalized"}});
  EXPECT_EQ(line("%{Referer}i|%{Content-Type}o|%{User-Agent}i", t), "-|text/plain|normalized");
}

TEST_F(Ncsa, HeaderNamesMatchWholeNamesAndTrimValues) {
  Transaction t = txn(9, TxnType::req, {{Tag::ReqHeader, "X-Foo-Bar: no"},
                                        {Tag::ReqHeader, "x-foo:   padded value  "},
                                        {Tag::ReqHeader, "X-Empty:"}});
  EXPECT_EQ(line("[%{X-Foo}i] [%{X-Empty}i] [%{X-Fo}i]", t), "[padded value] [] [-]");
}

TEST_F(Ncsa, RequestLineSynthesis) {
  Transaction t = txn(9, TxnType::req, {{Tag::ReqMethod, "HEAD"},
                                        {Tag::ReqURL, "/a"},
                                        {Tag::ReqHeader, "Host: http://already.example"}});
  EXPECT_EQ(line("%r", t), "HEAD http://already.example/a HTTP/1.0");
  Transaction u = txn(9, TxnType::req, {{Tag::ReqURL, "?only=query"}});
  EXPECT_EQ(line("%r|%U|%q", u), "- http://localhost?only=query HTTP/1.0||?only=query");
}

TEST_F(Ncsa, RemoteUserFromBasicAuth) {
  auto user = [](std::string auth) {
    return line("%u", txn(1, TxnType::req, {{Tag::ReqHeader, "Authorization: " + auth}}));
  };
  EXPECT_EQ(user("Basic YWxpY2U6c2VjcmV0"), "alice");
  EXPECT_EQ(user("basic Ym9i"), "bob");                // no password part
  EXPECT_EQ(user("Basic !!notbase64"), "-");           // undecodable
  EXPECT_EQ(user("Bearer YWxpY2U6c2VjcmV0"), "-");     // not basic
  EXPECT_EQ(user("Basic IiBxdW90ZTp4"), "\\\" quote");  // decoded bytes are escaped
}

TEST_F(Ncsa, HitMissAndHandlingFromTheRecords) {
  auto hm = [](std::vector<std::pair<Tag, std::string>> recs) {
    return line("%{ringlog:hitmiss}x %{ringlog:handling}x", txn(1, TxnType::req, std::move(recs)));
  };
  EXPECT_EQ(hm({{Tag::Hit, "30 120.000 10.000 0.000"}, {Tag::RespStatus, "200"}}), "hit hit");
  EXPECT_EQ(hm({{Tag::Hit, "30 120.000 10.000 0.000"}, {Tag::Link, "bereq 7 bgfetch"}, {Tag::RespStatus, "200"}}),
            "hit hit");
  EXPECT_EQ(hm({{Tag::HitMiss, "30 1.0"}, {Tag::Link, "bereq 7 fetch"}, {Tag::RespStatus, "200"}}), "miss miss");
  EXPECT_EQ(hm({{Tag::HitPass, "30 1.0"}, {Tag::Link, "bereq 7 pass"}, {Tag::RespStatus, "200"}}), "miss pass");
  EXPECT_EQ(hm({{Tag::Link, "bereq 7 pass"}, {Tag::RespStatus, "200"}}), "miss pass");
  EXPECT_EQ(hm({{Tag::Link, "bereq 7 pipe"}, {Tag::PipeAcct, "100 120 5000 9000"}}), "miss pipe");
  EXPECT_EQ(hm({{Tag::RespStatus, "400"}}), "miss synth");
  EXPECT_EQ(hm({{Tag::ReqURL, "/"}}), "- -");
}

TEST_F(Ncsa, PipeAccountingAndEndTime) {
  Transaction t = txn(1, TxnType::req, {{Tag::Timestamp, "Start: 100.000000 0 0"},
                                        {Tag::Timestamp, "Pipe: 100.250000 0.25 0.25"},
                                        {Tag::Timestamp, "PipeSess: 103.500000 3.5 3.25"},
                                        {Tag::PipeAcct, "100 120 5000 9000"}});
  EXPECT_EQ(line("%I %O %D %T %{ringlog:time_firstbyte}x", t), "5000 9000 3500000 3 0.25");
}

TEST_F(Ncsa, VslExtension) {
  Transaction t = client_request();
  EXPECT_EQ(line("%{VSL:Begin[2]}x|%{VSL:Timestamp:Process}x|%{VSL:Timestamp:Resp[2]}x|%{VSL:reqacct[6]}x|"
                 "%{VSL:ReqAcct[9]}x|%{VSL:Timestamp:Nope}x",
                 t),
            "32769|1795990488.753100 0.000499 0.000100|2.002122|7266|-|-");
}

TEST_F(Ncsa, EscapingKeepsLinesSafe) {
  Transaction t = txn(1, TxnType::req, {{Tag::ReqHeader, std::string("User-Agent: a\"b\\c\x01\x7f\xff\tz")},
                                        {Tag::ReqURL, "/x\ny"}});
  EXPECT_EQ(line("%{User-Agent}i %U", t), "a\\\"b\\\\c\\x01\\x7f\\xff\\tz /x\\ny");
  EXPECT_EQ(line("%{User-Agent}i %U", t, true), "a\\\"b\\\\c\\u0001\\u007f\\u00ff\\tz /x\\ny");
}

TEST_F(Ncsa, JsonKeepsValidUtf8AndEscapesInvalidBytes) {
  std::string out;
  ncsa_escape(out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", true);
  EXPECT_EQ(out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  out.clear();
  // Overlong, surrogate, cut sequence, stray continuation byte.
  ncsa_escape(out, "\xc0\xaf|\xed\xa0\x80|\xe2\x82|\x80", true);
  EXPECT_EQ(out, "\\u00c0\\u00af|\\u00ed\\u00a0\\u0080|\\u00e2\\u0082|\\u0080");
  out.clear();
  ncsa_escape(out, "caf\xc3\xa9", false);
  EXPECT_EQ(out, "caf\\xc3\\xa9");
}

TEST_F(Ncsa, JsonFormatGivesJson) {
  Transaction t = client_request();
  EXPECT_EQ(line("{\"size\": %b, \"status\": %s, \"ua\": \"%{User-Agent}i\", \"ref\": \"%{X-None}i\", "
                 "\"ttfb\": %{ringlog:time_firstbyte}x}",
                 t, true),
            "{\"size\": 6962, \"status\": 200, \"ua\": \"curl/7.88.1\", \"ref\": \"\", \"ttfb\": 0.000499}");
}

TEST_F(Ncsa, UnparsableTimesAreMissing) {
  Transaction t = txn(1, TxnType::req, {{Tag::Timestamp, "Start: soon 0 0"}});
  EXPECT_EQ(line("%t %D %{sec}t", t), "- - -");
  Transaction u = txn(1, TxnType::req, {{Tag::Timestamp, "Start: 10.5 0 0"}, {Tag::Timestamp, "Resp: later 0 0"}});
  EXPECT_EQ(line("%D %{usec}t %{msec_frac}t", u), "0 10500000 500");
}

TEST_F(Ncsa, FormatErrorsCarryTheirPosition) {
  struct Case {
    const char* fmt;
    std::size_t pos;
    const char* words;
  } cases[] = {
      {"%h %Z", 3, "unknown format specifier '%Z'"},
      {"abc %", 4, "lone '%'"},
      {"%{Referer", 0, "unmatched '{'"},
      {"x %{Referer}", 2, "conversion letter"},
      {"%{Referer}z", 0, "unknown conversion"},
      {"%{}i", 0, "header name"},
      {"%{hours}T", 0, "unit"},
      {"%{ringlog:nope}x", 0, "unknown extension"},
      {"%{Foo:bar}x", 0, "unknown extension"},
      {"%{VSL:NoSuchTag}x", 0, "unknown tag"},
      {"%{VSL:ReqAcct[0]}x", 0, "1 to 255"},
      {"%{VSL:ReqAcct[x]}x", 0, "bad field"},
      {"%{VSL:}x", 0, "needs a tag"},
  };
  for (const Case& c : cases) {
    try {
      NcsaFormatter::compile(c.fmt);
      ADD_FAILURE() << "no error for " << c.fmt;
    } catch (const NcsaFormatError& e) {
      EXPECT_EQ(e.pos(), c.pos) << c.fmt;
      EXPECT_NE(std::string(e.what()).find(c.words), std::string::npos) << c.fmt << ": " << e.what();
    }
  }
}

TEST_F(Ncsa, GroupSelectsSides) {
  Transaction sess = txn(32769, TxnType::sess, {{Tag::SessOpen, "192.0.2.10 51234 a0 127.0.0.1 80 1 17"}});
  Transaction req = client_request();
  Transaction be = backend_fetch();
  req.level = 2;
  be.level = 3;
  Group g{Grouping::session, {&sess, &req, &be}};
  NcsaFormatter f = NcsaFormatter::compile("%{ringlog:side}x %{ringlog:vxid}x");
  std::string out;
  EXPECT_EQ(f.format_group(g, {.client = true, .backend = false}, out), 1u);
  EXPECT_EQ(out, "c 32770\n");
  out.clear();
  EXPECT_EQ(f.format_group(g, {.client = false, .backend = true}, out), 1u);
  EXPECT_EQ(out, "b 32771\n");
  out.clear();
  EXPECT_EQ(f.format_group(g, {.client = true, .backend = true}, out), 2u);
  EXPECT_EQ(out, "c 32770\nb 32771\n");
  // Without a Begin the batch kind decides.
  Transaction nobegin;
  nobegin.vxid = 44;
  nobegin.kind = VxidKind::backend;
  EXPECT_EQ(NcsaFormatter::side_of(nobegin), VxidKind::backend);
  EXPECT_EQ(NcsaFormatter::side_of(sess), VxidKind::none);
}

// End to end through a ring: Txn writes, the Grouper groups, the formatter renders.
TEST_F(Ncsa, LinesFromARealRing) {
  test::ScratchPath path("ncsa");
  Log log = Log::create(path.str(), {.area_size = 1 << 20});
  {
    Txn req = log.begin(TxnType::req, "rxreq", 1000);
    req.timestamp("Start", 1795990488'752601'000ULL);
    req.record(Tag::ReqStart, "192.0.2.55 4444 a0");
    req.record(Tag::ReqMethod, "GET");
    req.record(Tag::ReqURL, "/ring?q=1");
    req.record(Tag::ReqProtocol, "HTTP/1.1");
    req.record(Tag::ReqHeader, "Host: ring.example");
    Txn be = req.child(TxnType::bereq, "fetch");
    be.record(Tag::BereqMethod, "GET");
    be.record(Tag::BerespStatus, "203");
    be.end();
    req.record(Tag::RespStatus, "203");
    req.record(Tag::ReqAcct, "10 0 10 20 30 50");
    req.timestamp("Resp", 1795990488'752901'000ULL);
    req.end();
  }
  Reader rd = Reader::open(path.str(), {.kind = ReaderKind::passive, .start = StartAt::oldest});
  NcsaFormatter f = NcsaFormatter::compile(std::string(kNcsaDefaultFormat) + " %D %{ringlog:handling}x");
  std::string out;
  Grouper g({.mode = Grouping::request}, [&](const Group& grp) { f.format_group(grp, {.client = true, .backend = true}, out); });
  std::vector<std::byte> buf;
  for (;;) {
    ReadResult r = rd.next(buf);
    if (r.status == ReadStatus::empty) break;
    if (r.status == ReadStatus::message && r.kind == format::MsgKind::data) g.feed(buf, Grouper::Clock::now());
  }
  g.flush();
  EXPECT_EQ(out,
            "192.0.2.55 - - [29/Nov/2026:22:14:48 +0000] \"GET http://ring.example/ring?q=1 HTTP/1.1\" 203 30 \"-\" "
            "\"-\" 300 miss\n"
            "- - - - \"GET http://localhost HTTP/1.0\" 203 - \"-\" \"-\" - -\n");
}
