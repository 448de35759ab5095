// The VSL query language: what parses (and how it groups), where errors are
// reported, and how queries evaluate against transaction groups.
#include <gtest/gtest.h>

#include <string>

#include "ringlog/query.hpp"

namespace {

using ringlog::Group;
using ringlog::Grouping;
using ringlog::Query;
using ringlog::QueryParseError;
using ringlog::QuerySet;
using ringlog::Tag;
using ringlog::Transaction;

std::size_t error_pos(const std::string& q) {
  try {
    Query::parse(q);
  } catch (const QueryParseError& e) {
    EXPECT_FALSE(e.message().empty());
    return e.pos();
  }
  ADD_FAILURE() << "query parsed but should not: " << q;
  return std::string::npos;
}

Transaction txn(std::uint64_t vxid, ringlog::TxnType type, unsigned level,
                std::initializer_list<std::pair<Tag, std::string>> recs) {
  Transaction t;
  t.vxid = vxid;
  t.type = type;
  t.kind = ringlog::kind_of(type);
  t.level = level;
  t.begun = t.ended = true;
  for (const auto& [tag, p] : recs) t.add(tag, p);
  return t;
}

class QueryEval : public ::testing::Test {
 protected:
  void SetUp() override {
    req = txn(4098, ringlog::TxnType::req, 1,
              {{Tag::Begin, "req 4097 rxreq"},
               {Tag::Timestamp, "Start: 1795990488.752611 0.000000 0.000000"},
               {Tag::ReqMethod, "GET"},
               {Tag::ReqURL, "/index.html"},
               {Tag::ReqHeader, "Host: example.com"},
               {Tag::ReqHeader, "User-Agent: curl/7.88.1"},
               {Tag::Link, "bereq 4099 fetch"},
               {Tag::RespStatus, "200"},
               {Tag::Timestamp, "Resp: 1795990488.753611 0.001000 0.001000"},
               {Tag::ReqAcct, "78 0 78 120 512 632"},
               {Tag::End, ""}});
    be = txn(4099, ringlog::TxnType::bereq, 2,
             {{Tag::Begin, "bereq 4098 fetch"},
              {Tag::BereqURL, "/index.html"},
              {Tag::BerespStatus, "503"},
              {Tag::End, ""}});
    g.mode = Grouping::request;
    g.txns = {&req, &be};
  }
  bool m(const std::string& q) { return Query::parse(q).matches(g); }
  bool mc(const std::string& q) { return Query::parse(q, ringlog::QueryOptions{.caseless = true}).matches(g); }

  Transaction req, be;
  Group g;
};

TEST(QueryParse, PrecedenceIsNotThenAndThenOr) {
  EXPECT_EQ(Query::parse("ReqURL or RespStatus and Hit").dump(), "(ReqURL or (RespStatus and Hit))");
  EXPECT_EQ(Query::parse("not ReqURL and Hit").dump(), "((not ReqURL) and Hit)");
  EXPECT_EQ(Query::parse("not (ReqURL or Hit)").dump(), "(not (ReqURL or Hit))");
  EXPECT_EQ(Query::parse("Req* or Resp* or Be*").dump(), "((Req* or Resp*) or Be*)");  // left-associative
}

TEST(QueryParse, RecordSelectionForms) {
  EXPECT_EQ(Query::parse("{2+}ReqHeader:Host[1] eq 'x'").dump(), "{2+}ReqHeader:Host[1] eq \"x\"");
  EXPECT_EQ(Query::parse("{1}vxid == 5").dump(), "{1}vxid == 5");
  EXPECT_EQ(Query::parse("{3-}Req*,*Status >= 2.5").dump(), "{3-}Req*,*Status >= 2.5");
  EXPECT_EQ(Query::parse("RespStatus!=200").dump(), "RespStatus != 200");
  EXPECT_EQ(Query::parse("ReqURL ~ \"^/a\\\\.b\"").dump(), "ReqURL ~ \"^/a\\\\.b\"");
  EXPECT_EQ(Query::parse("ReqMethod eq GET").dump(), "ReqMethod eq \"GET\"");
  EXPECT_EQ(Query::parse("requrl").dump(), "requrl");  // tag names are case-insensitive
}

TEST(QueryParse, ErrorsCarryThePosition) {
  EXPECT_EQ(error_pos(""), 0u);
  EXPECT_EQ(error_pos("   "), 3u);
  EXPECT_EQ(error_pos("ReqURL =="), 9u);          // operand missing at the end
  EXPECT_EQ(error_pos("ReqURL = 1"), 7u);         // single '='
  EXPECT_EQ(error_pos("ReqURL ! 1"), 7u);
  EXPECT_EQ(error_pos("NoSuchTag eq x"), 0u);
  EXPECT_EQ(error_pos("ReqURL and Nope*"), 11u);  // glob matching no tag
  EXPECT_EQ(error_pos("(ReqURL"), 7u);            // ')' missing
  EXPECT_EQ(error_pos("ReqURL )"), 7u);
  EXPECT_EQ(error_pos("ReqURL ~ \"(\""), 11u);    // bad regex: where PCRE2 stopped in it
  EXPECT_EQ(error_pos("ReqURL ~ \"a\\\"(b\""), 15u);  // ... counted in the query text, escapes included
  EXPECT_EQ(error_pos("ReqURL ~ a\\"), 11u);      // an unquoted regex too
  EXPECT_EQ(error_pos("RespStatus > abc"), 13u);  // numeric operator, string operand
  EXPECT_EQ(error_pos("{x}ReqURL"), 1u);
  EXPECT_EQ(error_pos("{1ReqURL"), 1u);
  EXPECT_EQ(error_pos("{1}"), 3u);
  EXPECT_EQ(error_pos("ReqURL and"), 10u);
  EXPECT_EQ(error_pos("ReqURL and or Hit"), 11u);
  EXPECT_EQ(error_pos("ReqURL eq \"open"), 10u);  // unterminated string
  EXPECT_EQ(error_pos("vxid eq 3"), 5u);
  EXPECT_EQ(error_pos("vxid"), 4u);
  EXPECT_EQ(error_pos("vxid == 1.5"), 8u);
  EXPECT_EQ(error_pos("ReqHeader: == 1"), 11u);
  EXPECT_EQ(error_pos("ReqURL[0]"), 7u);
  EXPECT_EQ(error_pos("ReqURL[2"), 8u);
  EXPECT_EQ(error_pos("ReqURL eq x y"), 12u);     // trailing garbage
  EXPECT_EQ(error_pos("ReqURL,"), 7u);
  EXPECT_EQ(error_pos("RespStatus == 0x10"), 14u);  // decimals only
}

TEST(QueryParse, DescribeShowsACaret) {
  try {
    Query::parse("ReqURL = 1");
    FAIL();
  } catch (const QueryParseError& e) {
    std::string d = e.describe("ReqURL = 1");
    EXPECT_NE(d.find("position 7"), std::string::npos) << d;
    EXPECT_NE(d.find("\n  ReqURL = 1\n         ^\n"), std::string::npos) << d;
  }
}

TEST(QueryParse, HostileInputIsAnErrorNotACrash) {
  EXPECT_NO_THROW(Query::parse(std::string(150, '(') + "ReqURL" + std::string(150, ')')));
  std::string deep = std::string(100000, '(');
  EXPECT_THROW(Query::parse(deep), QueryParseError);
  std::string nots;
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_THROW(Query::parse(nots + "ReqURL"), QueryParseError);
  EXPECT_THROW(Query::parse(std::string(100000, 'a')), QueryParseError);  // too long
  EXPECT_THROW(Query::parse(std::string("ReqURL eq \"\0\"", 13) + "x"), QueryParseError);
  EXPECT_NO_THROW(Query::parse(std::string("ReqURL eq \"\0\"", 13)));
  // Regexes nested past PCRE2's limit, or too big once compiled: refused, not a crash.
  EXPECT_THROW(Query::parse("ReqURL ~ \"" + std::string(2000, '(') + "a" + std::string(2000, ')') + "\""), QueryParseError);
  EXPECT_THROW(Query::parse("ReqURL ~ \"((a{65535}){65535}){65535}\""), QueryParseError);
  EXPECT_NO_THROW(Query::parse("ReqURL ~ \"" + std::string(200, '(') + "a" + std::string(200, ')') + "\""));
}

TEST_F(QueryEval, StringOperators) {
  EXPECT_TRUE(m("ReqURL eq \"/index.html\""));
  EXPECT_TRUE(m("ReqURL eq '/index.html'"));
  EXPECT_FALSE(m("ReqURL eq /index"));
  EXPECT_FALSE(m("ReqURL ne /index.html"));
  EXPECT_TRUE(m("ReqURL ne /other"));
  EXPECT_TRUE(m("ReqURL ~ \"^/ind\""));
  EXPECT_FALSE(m("ReqURL ~ \"^/IND\""));  // case-sensitive, as Varnish
  EXPECT_FALSE(m("ReqURL !~ \"html$\""));
  EXPECT_TRUE(m("ReqURL !~ \"^/admin\""));
  EXPECT_FALSE(m("ReqURL ~ \"^/admin\""));
}

TEST_F(QueryEval, NumericOperators) {
  EXPECT_TRUE(m("RespStatus == 200"));
  EXPECT_FALSE(m("RespStatus != 200"));
  EXPECT_TRUE(m("RespStatus < 300"));
  EXPECT_TRUE(m("RespStatus <= 200"));
  EXPECT_FALSE(m("RespStatus > 200"));
  EXPECT_TRUE(m("RespStatus >= 200"));
  EXPECT_TRUE(m("RespStatus < 200.5"));
  EXPECT_FALSE(m("ReqURL == 1"));         // not a number: no match
  EXPECT_FALSE(m("ReqURL != 1"));
  EXPECT_TRUE(m("BerespStatus >= 500"));  // any transaction of the group
}

TEST_F(QueryEval, PrefixAndField) {
  EXPECT_TRUE(m("ReqHeader:Host eq example.com"));
  EXPECT_TRUE(m("ReqHeader:host eq example.com"));  // prefix is case-insensitive
  EXPECT_FALSE(m("ReqHeader:Hos eq example.com"));  // the whole name before ':'
  EXPECT_TRUE(m("ReqHeader:User-Agent ~ curl"));
  EXPECT_TRUE(m("ReqHeader:User-Agent"));
  EXPECT_FALSE(m("ReqHeader:Cookie"));
  EXPECT_TRUE(m("Timestamp:Resp[2] > 0.0005"));
  EXPECT_FALSE(m("Timestamp:Resp[2] > 0.5"));
  EXPECT_TRUE(m("ReqAcct[5] == 512"));
  EXPECT_FALSE(m("ReqAcct[7]"));  // no 7th field
  EXPECT_TRUE(m("ReqAcct[6]"));
  EXPECT_TRUE(m("Begin[1] eq bereq"));
}

TEST_F(QueryEval, LevelsTaglistsGlobsAndVxid) {
  EXPECT_TRUE(m("{2}BerespStatus == 503"));
  EXPECT_FALSE(m("{1}BerespStatus == 503"));
  EXPECT_TRUE(m("{1+}BerespStatus"));
  EXPECT_TRUE(m("{2+}BerespStatus"));
  EXPECT_FALSE(m("{3+}BerespStatus"));
  EXPECT_FALSE(m("{1-}BereqURL"));
  EXPECT_TRUE(m("{2-}BereqURL"));
  EXPECT_TRUE(m("ReqURL,BereqURL eq /index.html"));
  EXPECT_TRUE(m("*Status >= 500"));
  EXPECT_TRUE(m("Beresp* == 503"));
  EXPECT_FALSE(m("Req* == 503"));
  EXPECT_TRUE(m("vxid == 4099"));
  EXPECT_TRUE(m("{1}vxid == 4098"));
  EXPECT_FALSE(m("{1}vxid == 4099"));
  EXPECT_FALSE(m("vxid > 5000"));
  EXPECT_TRUE(m("Hash or ReqURL"));
  EXPECT_FALSE(m("Hash"));
}

TEST_F(QueryEval, BooleanCombinations) {
  EXPECT_TRUE(m("RespStatus == 200 and BerespStatus == 503"));
  EXPECT_FALSE(m("RespStatus == 200 and not BerespStatus == 503"));
  EXPECT_TRUE(m("not Hit"));
  EXPECT_TRUE(m("Hit or (ReqMethod eq GET and ReqURL ~ html)"));
  EXPECT_FALSE(m("not (Hit or ReqMethod eq GET)"));
  EXPECT_TRUE(m("not not ReqURL"));
}

// Regexes are PCRE2's, as Varnish's: they search anywhere, take Perl syntax and inline
// flags, and -C (QueryOptions::caseless) makes every regex and eq/ne caseless.
TEST_F(QueryEval, RegexesArePcre2AndCaselessWithTheOption) {
  EXPECT_TRUE(m("ReqURL ~ \"index\""));
  EXPECT_FALSE(m("ReqURL !~ index"));
  EXPECT_TRUE(m("ReqURL ~ \"(?i)/INDEX\""));
  EXPECT_TRUE(m("ReqHeader:User-Agent ~ \"^curl/\\d+\\.\\d+\""));
  EXPECT_TRUE(m("ReqHeader ~ \"(?<=Host: )example\\.com$\""));
  EXPECT_FALSE(m("ReqURL ~ \"/INDEX\""));
  EXPECT_TRUE(mc("ReqURL ~ \"/INDEX\""));
  EXPECT_FALSE(mc("ReqURL !~ \"/INDEX\""));
  EXPECT_TRUE(mc("ReqURL ~ \"(?-i)/index\""));
  EXPECT_FALSE(mc("ReqURL ~ \"(?-i)/INDEX\""));
  EXPECT_FALSE(m("ReqMethod eq get"));
  EXPECT_TRUE(mc("ReqMethod eq get"));
  EXPECT_TRUE(m("ReqMethod ne get"));
  EXPECT_FALSE(mc("ReqMethod ne get"));
  QuerySet s(ringlog::QueryOptions{.caseless = true});
  s.add_file_text("ReqURL ~ \"^/INDEX\\.HTML$\"\n");
  EXPECT_TRUE(s.matches(g));
}

TEST(QueryParse, ABadRegexShowsPcre2sMessage) {
  try {
    Query::parse("ReqURL ~ \"^/(a|b\"");
    FAIL();
  } catch (const QueryParseError& e) {
    EXPECT_EQ(e.pos(), 16u);
    EXPECT_NE(e.message().find("bad regular expression: missing closing parenthesis"), std::string::npos)
        << e.message();
  }
}

// A 64 KiB header value: every iteration of (a|b)* is a backtracking point, and the
// answer must still come back, right, without exhausting any stack.
TEST_F(QueryEval, A64KiBHeaderAgainstAlternationGivesTheRightAnswer) {
  std::string v = "X-Pad: ";
  while (v.size() < 64 * 1024) v += (v.size() & 1) ? 'a' : 'b';
  req.add(Tag::ReqHeader, v);
  EXPECT_FALSE(m("ReqHeader:X-Pad ~ \"(a|b)*c\""));
  EXPECT_TRUE(m("ReqHeader:X-Pad !~ \"(a|b)*c\""));
  EXPECT_TRUE(m("ReqHeader:X-Pad ~ \"^(a|b)*$\""));
  req.set_payload(req.records.back(), v + 'c');
  EXPECT_TRUE(m("ReqHeader:X-Pad ~ \"(a|b)*c\""));
  EXPECT_FALSE(m("ReqHeader:X-Pad !~ \"(a|b)*c\""));
  EXPECT_TRUE(m("ReqHeader:X-Pad ~ \"^(a|b)*c$\""));
  EXPECT_FALSE(m("ReqHeader:X-Pad ~ \"^(a|b)*$\""));
}

// A search stopped by a PCRE2 limit counts as a match for '~' and as no match for
// '!~', as Varnish's VRE_match result is read.
TEST_F(QueryEval, ASearchStoppedByALimitIsNotANoMatch) {
  req.add(Tag::ReqHeader, "X-A: " + std::string(200, 'a') + "!");
  EXPECT_TRUE(m("ReqHeader:X-A ~ \"^(?:a|aa)+$\""));
  EXPECT_FALSE(m("ReqHeader:X-A !~ \"^(?:a|aa)+$\""));
}

TEST_F(QueryEval, QuerySetOrsItsQueries) {
  QuerySet s;
  EXPECT_TRUE(s.matches(g));  // empty: everything
  s.add("Hit");
  EXPECT_FALSE(s.matches(g));
  s.add("RespStatus == 200");
  EXPECT_TRUE(s.matches(g));
  QuerySet f;
  f.add_file_text("# comment\n\n  Hit\nReqURL eq /nope\r\n");
  EXPECT_EQ(f.size(), 2u);
  EXPECT_FALSE(f.matches(g));
  try {
    f.add_file_text("ReqURL\n# fine\nReqURL ==\n");
    FAIL();
  } catch (const QueryParseError& e) {
    EXPECT_EQ(e.pos(), 9u);
    EXPECT_NE(e.message().find("line 3"), std::string::npos) << e.message();
  }
}

TEST(TagSet, NamesAndGlobs) {
  auto s = ringlog::TagSet::parse("Req*,*Header, respstatus");
  EXPECT_TRUE(s.contains(Tag::ReqURL));
  EXPECT_TRUE(s.contains(Tag::BerespHeader));
  EXPECT_TRUE(s.contains(Tag::RespStatus));
  EXPECT_FALSE(s.contains(Tag::RespReason));
  EXPECT_THROW(ringlog::TagSet::parse("NoSuchTag"), std::invalid_argument);
  EXPECT_THROW(ringlog::TagSet::parse("Zz*"), std::invalid_argument);
  EXPECT_THROW(ringlog::TagSet::parse("ReqURL,,Hit"), std::invalid_argument);
  EXPECT_TRUE(ringlog::tag_glob_match("*eq*", "ReqURL"));
  EXPECT_FALSE(ringlog::tag_glob_match("*eq", "ReqURL"));
}

}  // namespace
