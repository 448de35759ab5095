// The text forms of a snapshot: varnishstat -1 columns and rates, -j shape and escaping,
// -l, -f globs with ^ exclusions, Prometheus families, one instance or several (the real
// parser checks the output in stat_cli_test.py, a real Prometheus in
// stat_listen_test.py; here the exact lines are pinned down).
#include <gtest/gtest.h>

#include "ringlog/stats_output.hpp"

namespace rs = ringlog::stats;

namespace {

rs::CounterValue cv(std::string group, std::string ident, std::string field, rs::Type t, rs::Format f,
                    std::uint64_t raw, std::string desc) {
  rs::CounterValue c;
  c.group = std::move(group);
  c.ident = std::move(ident);
  c.field = std::move(field);
  c.name = c.group + (c.ident.empty() ? "" : "." + c.ident) + "." + c.field;
  c.type = t;
  c.format = f;
  c.raw = raw;
  c.description = std::move(desc);
  return c;
}

rs::Snapshot sample() {
  rs::Snapshot s;
  s.created_ns = 1'000'000'000'000ull;
  s.timestamp_ns = s.created_ns + 100'000'000'000ull;  // 100 s of uptime
  s.counters.push_back(cv("MAIN", "", "client_req", rs::Type::counter, rs::Format::integer, 250, "Good client requests received"));
  s.counters.push_back(cv("MAIN", "", "sess_active", rs::Type::gauge, rs::Format::integer, std::uint64_t(-3), "Sessions open now"));
  s.counters.push_back(cv("MAIN", "", "s_resp_bodybytes", rs::Type::counter, rs::Format::bytes, 4096, "Response body bytes sent"));
  s.counters.push_back(cv("MAIN", "", "req_time", rs::Type::counter, rs::Format::duration, 1'500'000'000ull, "Time \"spent\"\\ serving"));
  s.counters.push_back(cv("VBE", "web1", "req", rs::Type::counter, rs::Format::integer, 10, "Requests sent to the backend"));
  s.counters.push_back(cv("VBE", "web2", "req", rs::Type::counter, rs::Format::integer, 20, "Requests sent to the backend"));
  s.counters.push_back(cv("VBE", "web1", "happy", rs::Type::bitmap, rs::Format::integer, 0xff, "Health\nprobes"));
  return s;
}

TEST(StatsOutput, OnceHasNameValueRateDescription) {
  std::string o = rs::format_once(sample(), {});
  EXPECT_NE(o.find("MAIN.client_req                250         2.50 Good client requests received\n"), std::string::npos) << o;
  EXPECT_NE(o.find("MAIN.sess_active                -3            . Sessions open now\n"), std::string::npos) << o;
  EXPECT_NE(o.find("MAIN.req_time             1.500000         0.01 Time \"spent\"\\ serving\n"), std::string::npos) << o;
  EXPECT_NE(o.find("VBE.web1.happy                 255            . Health probes\n"), std::string::npos) << o;
}

TEST(StatsOutput, FilterGlobsAndExclusions) {
  rs::Filter inc({"MAIN.*"});
  EXPECT_TRUE(inc.match("MAIN.client_req"));
  EXPECT_FALSE(inc.match("VBE.web1.req"));
  rs::Filter exc({"^VBE.web1.*"});
  EXPECT_TRUE(exc.match("MAIN.client_req"));
  EXPECT_FALSE(exc.match("VBE.web1.req"));
  EXPECT_TRUE(exc.match("VBE.web2.req"));
  rs::Filter both({"VBE.*", "^*.happy"});
  EXPECT_TRUE(both.match("VBE.web2.req"));
  EXPECT_FALSE(both.match("VBE.web1.happy"));
  EXPECT_FALSE(both.match("MAIN.client_req"));
  std::string o = rs::format_once(sample(), both);
  EXPECT_EQ(o.find("MAIN."), std::string::npos);
  EXPECT_NE(o.find("VBE.web2.req"), std::string::npos);
  EXPECT_TRUE(rs::Filter().empty());
}

TEST(StatsOutput, JsonShapeAndEscapes) {
  std::string j = rs::format_json(sample(), {});
  EXPECT_EQ(j.rfind("{\n  \"version\": 1,\n  \"timestamp\": \"", 0), 0u) << j;
  EXPECT_NE(j.find("\"MAIN.sess_active\": {\n      \"description\": \"Sessions open now\",\n      \"flag\": \"g\",\n"
                   "      \"format\": \"i\",\n      \"value\": -3\n    }"),
            std::string::npos) << j;
  EXPECT_NE(j.find("\"description\": \"Time \\\"spent\\\"\\\\ serving\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"format\": \"B\""), std::string::npos);
  EXPECT_NE(j.find("\"format\": \"d\",\n      \"value\": 1.500000"), std::string::npos) << j;
  EXPECT_NE(j.find("\"flag\": \"b\",\n      \"format\": \"b\""), std::string::npos) << j;
  EXPECT_NE(j.find("Health\\nprobes"), std::string::npos);
  // Control bytes, DEL and bytes that are not UTF-8 as ringlog/json.hpp escapes them.
  rs::Snapshot odd = sample();
  odd.counters.push_back(cv("MAIN", "", "odd", rs::Type::counter, rs::Format::integer, 1, "a\x01\x7f \xc3\xa9 \xff"));
  std::string jo = rs::format_json(odd, {});
  EXPECT_NE(jo.find("\"description\": \"a\\u0001\\u007f \xc3\xa9 \\u00ff\""), std::string::npos) << jo;
  // No counters: still a complete document.
  std::string e = rs::format_json(sample(), rs::Filter({"nothing"}));
  EXPECT_NE(e.find("\"counters\": {}\n}"), std::string::npos) << e;
}

TEST(StatsOutput, PrometheusFamilies) {
  std::string p = rs::format_prometheus(sample(), {});
  EXPECT_NE(p.find("# HELP ringlog_main_client_req_total Good client requests received\n"
                   "# TYPE ringlog_main_client_req_total counter\nringlog_main_client_req_total 250\n"),
            std::string::npos) << p;
  EXPECT_NE(p.find("# TYPE ringlog_main_sess_active gauge\nringlog_main_sess_active -3\n"), std::string::npos) << p;
  EXPECT_NE(p.find("ringlog_main_s_resp_bodybytes_total 4096\n"), std::string::npos) << p;
  EXPECT_NE(p.find("ringlog_main_req_time_seconds_total 1.500000000\n"), std::string::npos) << p;
  // One family for both backends, told apart by a label.
  EXPECT_NE(p.find("# TYPE ringlog_vbe_req_total counter\nringlog_vbe_req_total{ident=\"web1\"} 10\n"
                   "ringlog_vbe_req_total{ident=\"web2\"} 20\n"),
            std::string::npos) << p;
  EXPECT_EQ(p.find("# TYPE ringlog_vbe_req_total", p.find("# TYPE ringlog_vbe_req_total") + 1), std::string::npos);
  EXPECT_NE(p.find("# HELP ringlog_vbe_happy Health\\nprobes\n# TYPE ringlog_vbe_happy gauge\n"), std::string::npos) << p;
}

TEST(StatsOutput, PrometheusInstancesShareFamiliesUnderTheirOwnLabel) {
  rs::Snapshot a = sample(), b = sample();
  a.writer_alive = true;
  b.counters[0].raw = 7;
  const rs::PrometheusInstance in[] = {{"proxy", &a}, {"edge", &b}, {"gone", nullptr}};
  std::string p = rs::format_prometheus(in, {});
  // Per instance up and writer state first, an absent one down.
  EXPECT_EQ(p.rfind("# HELP ringlog_up ", 0), 0u) << p;
  EXPECT_NE(p.find("# TYPE ringlog_up gauge\nringlog_up{ringlog_instance=\"proxy\"} 1\n"
                   "ringlog_up{ringlog_instance=\"edge\"} 1\nringlog_up{ringlog_instance=\"gone\"} 0\n"),
            std::string::npos) << p;
  EXPECT_NE(p.find("ringlog_writer_running{ringlog_instance=\"proxy\"} 1\n"
                   "ringlog_writer_running{ringlog_instance=\"edge\"} 0\n"
                   "ringlog_writer_running{ringlog_instance=\"gone\"} 0\n"),
            std::string::npos) << p;
  // One family across instances: HELP and TYPE once, the samples together.
  EXPECT_NE(p.find("# TYPE ringlog_main_client_req_total counter\n"
                   "ringlog_main_client_req_total{ringlog_instance=\"proxy\"} 250\n"
                   "ringlog_main_client_req_total{ringlog_instance=\"edge\"} 7\n# HELP"),
            std::string::npos) << p;
  EXPECT_EQ(p.find("# HELP ringlog_main_client_req_total", p.find("# HELP ringlog_main_client_req_total") + 1),
            std::string::npos);
  // The instance label first, then the group's ident.
  EXPECT_NE(p.find("ringlog_vbe_req_total{ringlog_instance=\"edge\",ident=\"web2\"} 20\n"), std::string::npos) << p;
  // Nothing of the absent instance but its two gauges, and no label named instance.
  std::size_t gone = 0;
  for (std::size_t at = p.find("\"gone\""); at != std::string::npos; at = p.find("\"gone\"", at + 1)) ++gone;
  EXPECT_EQ(gone, 2u) << p;
  EXPECT_EQ(p.find("{instance="), std::string::npos);
  // -f selects counters, never the two gauges.
  std::string f = rs::format_prometheus(in, rs::Filter({"VBE.*"}));
  EXPECT_NE(f.find("ringlog_up{ringlog_instance=\"gone\"} 0\n"), std::string::npos) << f;
  EXPECT_EQ(f.find("ringlog_main_"), std::string::npos) << f;
  EXPECT_NE(f.find("ringlog_vbe_req_total{"), std::string::npos) << f;
}

TEST(StatsOutput, PrometheusLabelValuesAreEscapedUtf8) {
  rs::Snapshot a = sample();
  // Quote, backslash, newline escaped; UTF-8 kept; a stray byte or an overlong form
  // (which Prometheus would refuse the whole scrape for) becomes U+FFFD.
  const std::string name = std::string("a\"b\\c\nd \xc3\xa9 \xff \xc0\xaf");
  const rs::PrometheusInstance in[] = {{name, &a}};
  std::string p = rs::format_prometheus(in, {});
  EXPECT_NE(p.find("ringlog_up{ringlog_instance=\"a\\\"b\\\\c\\nd \xc3\xa9 \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\"} 1\n"),
            std::string::npos) << p;
}

TEST(StatsOutput, PrometheusDropsSamplesThatContradictTheirFamily) {
  rs::Snapshot a = sample(), b = sample();
  // Another writer whose gauge client_req_total lands in the family of a's counter
  // client_req: a second TYPE would make the exposition invalid.
  b.counters.push_back(cv("MAIN", "", "client_req_total", rs::Type::gauge, rs::Format::integer, 5, "Not a counter"));
  // A writer's own group that would read as the writer state gauge is left out too.
  b.counters.push_back(cv("WRITER", "", "running", rs::Type::gauge, rs::Format::integer, 42, "Not the state"));
  const rs::PrometheusInstance in[] = {{"a", &a}, {"b", &b}};
  std::string p = rs::format_prometheus(in, {});
  EXPECT_NE(p.find("# TYPE ringlog_main_client_req_total counter\n"
                   "ringlog_main_client_req_total{ringlog_instance=\"a\"} 250\n"
                   "ringlog_main_client_req_total{ringlog_instance=\"b\"} 250\n# HELP"),
            std::string::npos) << p;
  EXPECT_EQ(p.find(" 5\n"), std::string::npos) << p;
  EXPECT_EQ(p.find(" 42\n"), std::string::npos) << p;
  EXPECT_EQ(p.find("Not "), std::string::npos) << p;
}

TEST(StatsOutput, ListAndUptime) {
  std::string l = rs::format_list(sample(), rs::Filter({"VBE.*"}));
  EXPECT_EQ(l.rfind("Available fields:\nField name", 0), 0u) << l;
  EXPECT_NE(l.find("VBE.web1.req                  Requests sent to the backend\n"), std::string::npos) << l;
  EXPECT_EQ(l.find("MAIN."), std::string::npos);
  EXPECT_EQ(rs::dhms(0), "0+00:00:00");
  EXPECT_EQ(rs::dhms(86400 * 2 + 3600 * 3 + 60 * 4 + 5.9), "2+03:04:05");
  EXPECT_DOUBLE_EQ(sample().uptime_seconds(), 100.0);
}

}  // namespace
