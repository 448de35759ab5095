// RFC 5424 messages and RFC 6587 framing as ringlog-forward writes them, and the
// destination syntax: exact bytes, round trips, and malformed input.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "forwarder.hpp"
#include "syslog.hpp"

namespace fw = ringlog::forward;

TEST(SyslogFormat, Rfc5424HeaderIsExact) {
  fw::HeaderFields h;
  h.facility = *fw::facility_by_name("local0");
  h.severity = *fw::severity_by_name("info");
  h.hostname = "web1";
  h.app_name = "ringlog";
  const std::uint64_t ts = 1795990488'752601999u;
  std::string out;
  fw::append_rfc5424(out, h, "ncsa", ts, "127.0.0.1 - - \"GET / HTTP/1.1\" 200 5");
  EXPECT_EQ(out, "<134>1 2026-11-29T22:14:48.752601Z web1 ringlog - ncsa - 127.0.0.1 - - \"GET / HTTP/1.1\" 200 5");
  out.clear();
  h.facility = *fw::facility_by_name("kern");
  h.severity = *fw::severity_by_name("emerg");
  fw::append_rfc5424(out, h, "", 0, "");
  EXPECT_EQ(out, "<0>1 1970-01-01T00:00:00.000000Z web1 ringlog - - -");
}

TEST(SyslogFormat, FacilityAndSeverityNames) {
  EXPECT_EQ(fw::facility_by_name("local7"), 23);
  EXPECT_EQ(fw::facility_by_name("daemon"), 3);
  EXPECT_FALSE(fw::facility_by_name("local8"));
  EXPECT_FALSE(fw::facility_by_name(""));
  EXPECT_EQ(fw::severity_by_name("debug"), 7);
  EXPECT_EQ(fw::severity_by_name("warning"), 4);
  EXPECT_EQ(fw::severity_by_name("warn"), 4);
  EXPECT_FALSE(fw::severity_by_name("loud"));
}

TEST(SyslogFormat, HeaderFieldsAreSanitised) {
  EXPECT_EQ(fw::sanitize_field("my host\tname\n", 255), "myhostname");
  EXPECT_EQ(fw::sanitize_field("", 48), "-");
  EXPECT_EQ(fw::sanitize_field(" \x01\x7f", 48), "-");
  EXPECT_EQ(fw::sanitize_field(std::string(300, 'a'), 255).size(), 255u);
  EXPECT_EQ(fw::sanitize_field("h\xc3\xa9te", 255), "hte");  // PRINTUSASCII only
}

TEST(SyslogFraming, OctetCountingIsLengthSpaceMessage) {
  std::string out;
  fw::append_frame(out, fw::Framing::octet_counting, "hello world\nsecond");
  EXPECT_EQ(out, "18 hello world\nsecond");
}

TEST(SyslogFraming, LfEscapesLineFeeds) {
  std::string out;
  fw::append_frame(out, fw::Framing::lf, "a\nb\n");
  EXPECT_EQ(out, "a#012b#012\n");
  out.clear();
  fw::append_frame(out, fw::Framing::lf, "plain");
  EXPECT_EQ(out, "plain\n");
}

TEST(SyslogFraming, RoundTripOfRandomMessages) {
  std::mt19937 rng(42);
  for (auto f : {fw::Framing::octet_counting, fw::Framing::lf}) {
    std::vector<std::string> msgs;
    std::string stream;
    for (int i = 0; i < 500; ++i) {
      std::string m(1 + rng() % 300, '\0');  // MSG-LEN is NONZERO-DIGIT *DIGIT
      for (auto& c : m) c = static_cast<char>(rng() % 256);
      if (f == fw::Framing::lf)
        for (auto& c : m)
          if (c == '\n') c = ' ';
      msgs.push_back(m);
      fw::append_frame(stream, f, m);
    }
    // Read back through arbitrary chunk boundaries.
    std::string pending;
    std::size_t got = 0, pos = 0;
    while (pos < stream.size()) {
      std::size_t n = std::min<std::size_t>(1 + rng() % 97, stream.size() - pos);
      pending.append(stream, pos, n);
      pos += n;
      for (;;) {
        std::size_t used = 0;
        bool bad = false;
        auto m = fw::read_frame(pending, f, used, bad);
        ASSERT_FALSE(bad);
        if (!m) break;
        ASSERT_LT(got, msgs.size());
        EXPECT_EQ(*m, msgs[got]) << "message " << got;
        ++got;
        pending.erase(0, used);
      }
    }
    EXPECT_EQ(got, msgs.size());
    EXPECT_TRUE(pending.empty());
  }
}

TEST(SyslogFraming, MalformedOctetCountsAreRejected) {
  for (const char* s : {"abc hello", "05 hello", " 5 hello", "12345678901 x", "-3 abc"}) {
    std::size_t used = 0;
    bool bad = false;
    auto m = fw::read_frame(s, fw::Framing::octet_counting, used, bad);
    EXPECT_FALSE(m) << s;
    EXPECT_TRUE(bad) << s;
  }
  std::size_t used = 0;
  bool bad = false;
  EXPECT_FALSE(fw::read_frame("10 short", fw::Framing::octet_counting, used, bad));
  EXPECT_FALSE(bad);  // just incomplete
}

TEST(Destinations, ParsedWithDerivedOrGivenNames) {
  std::string err;
  auto a = fw::parse_endpoint("tcp://127.0.0.1:514", err);
  ASSERT_TRUE(a) << err;
  EXPECT_EQ(a->proto, fw::Proto::tcp);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, "514");
  EXPECT_EQ(a->name, "tcp:127_0_0_1:514");
  auto b = fw::parse_endpoint("central=udp://[::1]:6514", err);
  ASSERT_TRUE(b) << err;
  EXPECT_EQ(b->proto, fw::Proto::udp);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, "6514");
  EXPECT_EQ(b->name, "central");
  EXPECT_EQ(b->url, "udp://[::1]:6514");
  auto c = fw::parse_endpoint("tcp://logs.example.com:601", err);
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(c->name, "tcp:logs_example_com:601");
  auto d = fw::parse_endpoint("tcp://" + std::string(80, 'h') + ":601", err);
  ASSERT_TRUE(d) << err;
  EXPECT_LE(d->name.size(), 47u);
}

TEST(Destinations, BadOnesSayWhy) {
  for (const char* s : {"127.0.0.1:514", "http://x:80", "tcp://host", "tcp://host:0", "tcp://host:70000",
                        "tcp://host:5x", "tcp://:514", "udp://[::1]514", "bad name=tcp://h:1", "=tcp://h:1",
                        "tcp://a b:1"}) {
    std::string err;
    EXPECT_FALSE(fw::parse_endpoint(s, err)) << s;
    EXPECT_FALSE(err.empty()) << s;
  }
}
