// The shared printer: Varnish's grouped and raw layouts, byte for byte, and how
// unsafe, binary and truncated payloads are shown.
#include <gtest/gtest.h>

#include "records_test_util.hpp"
#include "test_util.hpp"

using namespace ringlog;

namespace {

Transaction txn(std::uint64_t vxid, TxnType type, unsigned level, std::vector<std::pair<Tag, std::string>> recs) {
  Transaction t;
  t.vxid = vxid;
  t.type = type;
  t.kind = kind_of(type);
  t.level = level;
  for (auto& [tag, s] : recs) t.add(tag, s);
  return t;
}

}  // namespace

TEST(Printer, GroupedLayoutMatchesVarnish) {
  Transaction req = txn(32770, TxnType::req, 1,
                        {{Tag::Begin, "req 32769 rxreq"},
                         {Tag::Timestamp, "Start: 1795990488.752601 0.000000 0.000000"},
                         {Tag::ReqURL, "/"},
                         {Tag::End, ""}});
  Transaction be = txn(32771, TxnType::bereq, 2, {{Tag::Begin, "bereq 32770 fetch"}});
  Group g{Grouping::request, {&req, &be}};
  std::string out;
  print_group(out, g);
  EXPECT_EQ(out,
            "*   << Request  >> 32770     \n"
            "-   Begin          req 32769 rxreq\n"
            "-   Timestamp      Start: 1795990488.752601 0.000000 0.000000\n"
            "-   ReqURL         /\n"
            "-   End            \n"
            "**  << BeReq    >> 32771     \n"
            "--  Begin          bereq 32770 fetch\n"
            "\n");
}

TEST(Printer, DeepLevelsAndLabels) {
  Transaction s = txn(5, TxnType::sess, 4, {{Tag::SessClose, "REM_CLOSE 0.001"}});
  Transaction r = txn(0, TxnType::unknown, 1, {{Tag::Notice, "hello"}});
  Transaction u = txn(6, TxnType::unknown, 1, {});
  std::string out;
  print_group(out, Group{Grouping::session, {&s}});
  print_group(out, Group{Grouping::vxid, {&r}});
  print_group(out, Group{Grouping::vxid, {&u}});
  EXPECT_EQ(out,
            "*4* << Session  >> 5         \n"
            "-4- SessClose      REM_CLOSE 0.001\n"
            "\n"
            "*   << Record   >> 0         \n"
            "-   Notice         hello\n"
            "\n"
            "*   << Unknown  >> 6         \n"
            "\n");
}

TEST(Printer, RawLayoutMatchesVarnish) {
  std::string out;
  print_raw(out, Record{Tag::ReqURL, VxidKind::client, false, false, 32770, "/"});
  print_raw(out, Record{Tag::BereqURL, VxidKind::backend, false, false, 32771, "/x"});
  print_raw(out, Record{Tag::SessOpen, VxidKind::session, false, false, 32769, "1.2.3.4 5"});
  print_raw(out, Record{Tag::Notice, VxidKind::none, false, false, 0, "n"});
  EXPECT_EQ(out,
            "     32770 ReqURL         c /\n"
            "     32771 BereqURL       b /x\n"
            "     32769 SessOpen       - 1.2.3.4 5\n"
            "         0 Notice         - n\n");
}

TEST(Printer, UnsafeBinaryAndTruncatedPayloads) {
  std::string out;
  append_payload(out, Tag::ReqHeader, "Host: example.com");
  EXPECT_EQ(out, "Host: example.com") << "printable unsafe payloads print as they are";
  out.clear();
  append_payload(out, Tag::ReqHeader, std::string("a\tb\"c\\\x01\n\xff", 9));
  EXPECT_EQ(out, R"("a\tb\"c\\\001\n\377")");
  out.clear();
  append_payload(out, Tag::Hash, std::string("\x00\x01\xab\xff", 4));
  EXPECT_EQ(out, "[4] 0001abff");
  out.clear();
  append_payload(out, Tag::Notice, std::string("bell\x07", 5));
  EXPECT_EQ(out, "bell?") << "safe tags never pass control bytes to a terminal";
  out.clear();
  print_terse(out, 1, Record{Tag::ReqURL, VxidKind::client, true, false, 1, "/long"});
  EXPECT_EQ(out, "-   ReqURL         /long [truncated]\n");
}

TEST(Printer, TransactionsFromARingPrintLikeVarnishlog) {
  test::ScratchPath p;
  Log log = Log::create(p, {.area_size = 1 << 20});
  Txn req = log.begin(TxnType::req, "rxreq", 32769);
  req.timestamp("Start", 1795990488752601000ULL);
  req.record(Tag::ReqURL, "/");
  std::string vx = std::to_string(req.vxid());
  req.end();
  std::string out = test::print_ring(p, Grouping::vxid);
  std::string pad(10 - vx.size(), ' ');
  EXPECT_EQ(out,
            "*   << Request  >> " + vx + pad + "\n" +
            "-   Begin          req 32769 rxreq\n"
            "-   Timestamp      Start: 1795990488.752601 0.000000 0.000000\n"
            "-   ReqURL         /\n"
            "-   End            \n"
            "\n");
}
