// JSON output of transaction groups: one object per group, on one line (`ringlog -j`,
// reused by ringlog-forward). Payloads are escaped as Varnish prints them but in JSON
// string syntax; bytes that are not UTF-8 become \u00XX (their byte value), binary
// tags are hex. The output is always valid JSON whatever the records hold.
//
// Shape (keys always in this order; optional keys only when true):
//   {"group":"request","vxid":32770,"transactions":[
//     {"vxid":32770,"level":1,"type":"req","side":"c","parent":32769,
//      "reason":"rxreq","complete":true,
//      "records":[{"tag":"Begin","value":"req 32769 rxreq"},
//                 {"tag":"ReqURL","value":"/","truncated":true},
//                 {"tag":"VSL","value":"timeout","synthetic":true}]}]}
// "side" is "c" (client), "b" (backend), "s" (session) or "-"; "complete" is false
// when the transaction was closed without its End (timeout, overrun, end of input).
// Thread safety: stateless functions.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "ringlog/group.hpp"
#include "ringlog/record.hpp"

namespace ringlog {

// Which records and transactions to include (the tools' -i/-x/-I/-X/-c/-b); null
// functions include everything. A transaction left without records is still listed
// (its header fields tell what it was) unless txn_filter rejects it.
struct JsonFilter {
  std::function<bool(const Transaction&)> txn_filter;
  std::function<bool(const Transaction&, const Record&)> record_filter;
};

// Appends one JSON object for the group followed by '\n'.
void append_json(std::string& out, const Group& g, const JsonFilter& filter = {});
// The one JSON string escaper of ringlog and its programs (ringlog -j, ringlog-ncsa -j,
// ringlog-forward, ringlog-stat -j, ringlog-dump): '"' '\\' \n \r \t get their short
// escapes; other control bytes (0x00-0x1f) and DEL become \u00XX; a well-formed UTF-8
// sequence passes through as it is; every byte of an ill-formed one (a stray
// continuation byte, an overlong form, a surrogate, above U+10FFFF, cut short) becomes
// \u00XX, XX its byte value. The result is valid JSON and valid UTF-8 whatever the input.
// append_json_escaped appends the escaped bytes alone, append_json_string quoted.
void append_json_escaped(std::string& out, std::string_view bytes);
void append_json_string(std::string& out, std::string_view bytes);
// The record's value as it appears in "value" (hex for binary tags), quoted.
void append_json_value(std::string& out, const Record& r);

}  // namespace ringlog
