// libFuzzer target for the VSL query language: any bytes as a query must either parse
// or fail with a QueryParseError whose position lies within the query; a parsed query
// is evaluated against a small request group (regexes, fields, prefixes, levels) and
// dumped back. Odd-length inputs are parsed caseless (-C). Nothing may crash, hang or
// leak: regexes are PCRE2's, bounded by its limits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ringlog/query.hpp"

namespace {

ringlog::Transaction make(std::uint64_t vxid, ringlog::TxnType type, unsigned level,
                          std::initializer_list<std::pair<ringlog::Tag, std::string>> recs) {
  ringlog::Transaction t;
  t.vxid = vxid;
  t.type = type;
  t.kind = ringlog::kind_of(type);
  t.level = level;
  t.begun = t.ended = true;
  for (const auto& [tag, p] : recs) t.add(tag, p);
  return t;
}

const ringlog::Group& group() {
  using ringlog::Tag;
  static const ringlog::Transaction req = make(
      4098, ringlog::TxnType::req, 1,
      {{Tag::Begin, "req 4097 rxreq"}, {Tag::ReqURL, "/index.html?a=1"}, {Tag::ReqHeader, "Host: example.com"},
       {Tag::ReqHeader, std::string("X-Bin: \x01\xff\0", 10)}, {Tag::RespStatus, "200"},
       {Tag::Timestamp, "Resp: 1795990488.753611 0.001000 0.001000"}, {Tag::End, ""}});
  static const ringlog::Transaction be = make(4099, ringlog::TxnType::bereq, 2,
                                              {{Tag::Begin, "bereq 4098 fetch"},
                                               {Tag::BerespStatus, "503"},
                                               {Tag::BereqAcct, std::string(300, 'x') + " 12 -3 1e5"}});
  static const ringlog::Group g{ringlog::Grouping::request, {&req, &be}};
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view q(reinterpret_cast<const char*>(data), size);
  try {
    ringlog::Query query = ringlog::Query::parse(q, ringlog::QueryOptions{.caseless = (size & 1) != 0});
    (void)query.matches(group());
    std::string d = query.dump();
    (void)d;
  } catch (const ringlog::QueryParseError& e) {
    if (e.pos() > q.size()) std::abort();  // positions must point into the query (or its end)
    std::string text = e.describe(q);
    (void)text;
  }
  return 0;
}
