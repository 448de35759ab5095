// Query evaluation speed: VSL queries (regex and plain) evaluated over every request
// group of a full ring, in records/s. It uses the public query API only, so the same
// source builds against any revision of the library: bench_query.sh builds it against
// the std::regex revision and against this one and prints the ratios of one run.
// It only reads the ring it is given.
//
//   bench_query RING [ROUNDS]   prints one "query I: ..." line per query, best of ROUNDS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "ringlog/group.hpp"
#include "ringlog/query.hpp"
#include "ringlog/ring.hpp"

namespace {

// Valid in ECMAScript and in PCRE2 alike, with the same meaning in both.
const char* const kQueries[] = {
    "ReqURL ~ \"^/static/img/\"",                     // anchored prefix
    "ReqURL ~ \"\\.png$\"",                           // suffix
    "ReqHeader:User-Agent ~ \"Firefox/[0-9]+\"",      // a prefixed header, searched
    "ReqHeader ~ \"deflate|zstd\"",                   // alternation over every request header
    "RespHeader ~ \"Content-Length: 4[0-9]{3}\"",     // a counted class
    "ReqHeader ~ \"X-Forwarded-For\"",                // matches nothing: every header is searched
    "ReqURL eq \"/static/img/1.png\"",                // no regex: the evaluator alone
};

struct Data {
  std::deque<std::vector<ringlog::Transaction>> txns;
  std::vector<ringlog::Group> groups;
  std::uint64_t records = 0;
};

Data load(const std::string& path) {
  Data d;
  ringlog::Reader rd = ringlog::Reader::open(path, {.kind = ringlog::ReaderKind::passive, .start = ringlog::StartAt::oldest});
  ringlog::GroupOptions go{ringlog::Grouping::request, std::chrono::seconds(3600), 100000};
  ringlog::Grouper grouper(go, [&](const ringlog::Group& g) {
    auto& copy = d.txns.emplace_back();
    for (const ringlog::Transaction* t : g.txns) {
      copy.push_back(*t);
      d.records += t->records.size();
    }
  });
  std::vector<std::byte> buf;
  const auto now = ringlog::Grouper::Clock::now();
  for (;;) {
    ringlog::ReadResult r = rd.next(buf);
    if (r.status == ringlog::ReadStatus::empty) break;
    if (r.status == ringlog::ReadStatus::message && r.kind == ringlog::format::MsgKind::data) grouper.feed(buf, now);
  }
  grouper.flush();
  for (auto& v : d.txns) {
    ringlog::Group g;
    g.mode = ringlog::Grouping::request;
    for (auto& t : v) g.txns.push_back(&t);
    d.groups.push_back(std::move(g));
  }
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_query RING [ROUNDS]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  Data d = load(argv[1]);
  if (d.groups.empty()) {
    std::fprintf(stderr, "bench_query: %s holds no groups\n", argv[1]);
    return 1;
  }
  std::printf("ring %s: %zu request groups, %llu records\n", argv[1], d.groups.size(),
              static_cast<unsigned long long>(d.records));
  int i = 0;
  for (const char* text : kQueries) {
    ringlog::QuerySet qs;
    qs.add(text);
    double best = 0;
    std::uint64_t matched = 0;
    for (int r = 0; r < rounds; ++r) {
      using clk = std::chrono::steady_clock;
      std::uint64_t passes = 0, m = 0;
      const auto t0 = clk::now();
      double secs = 0;
      do {  // whole passes over the ring for at least half a second
        m = 0;
        for (const ringlog::Group& g : d.groups) m += qs.matches(g);
        ++passes;
        secs = std::chrono::duration<double>(clk::now() - t0).count();
      } while (secs < 0.5);
      best = std::max(best, double(d.records) * double(passes) / secs);
      matched = m;
    }
    std::printf("query %d: %.0f records/s, %llu groups matched: %s\n", i++, best,
                static_cast<unsigned long long>(matched), text);
    std::fflush(stdout);
  }
  return 0;
}
