// The records of HTTP heads and their accounting, in one place: Req* (the client's
// request as received), Bereq* (the backend request as built), Beresp* (the backend's
// response as parsed), Resp* (the response the client gets), ReqAcct and BereqAcct.
// Every stage that writes or reads a head logs it through these; they check the tag
// mask first and log field lines from the bytes in place when they can (no copy). May
// call the log (ringlog::Txn) and the HTTP codec only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ringlog/txn.hpp"
#include "ringproxy/http/http.hpp"

namespace ringproxy::header_log {

// ReqMethod, ReqURL, ReqProtocol and a ReqHeader per field of the client's request.
void request(ringlog::Txn& req, const http::RequestHead& h);

// BereqMethod, BereqURL, BereqProtocol and a BereqHeader per field line of `head`, the
// serialized backend request (its request line, then "Name: value\r\n" lines).
void backend_request(ringlog::Txn& bereq, std::string_view method, std::string_view url, std::string_view head);

// BerespProtocol, BerespStatus, BerespReason and a BerespHeader per field.
void backend_response(ringlog::Txn& bereq, const http::ResponseHead& h);

// RespProtocol ("HTTP/1.1": what the client is sent), RespStatus, RespReason (the
// standard phrase when `reason` is empty).
void response_status(ringlog::Txn& req, int status, std::string_view reason);
void response_status(ringlog::Txn& req, std::string_view status, std::string_view reason);
// RespHeader for one field.
void response_field(ringlog::Txn& req, const http::Header& h);
// RespHeader for the "Name: value\r\n" line that ends `out` and starts at `at`.
void response_line(ringlog::Txn& req, std::string_view out, std::size_t at);
// Writes "Name: value\r\n" to out and logs it as a RespHeader.
void put_response_field(std::string& out, ringlog::Txn& req, std::string_view name, std::string_view value);
// A serialized response head (status line, field lines, blank line): Resp* for all of it.
void response_head(ringlog::Txn& req, std::string_view head);

// ReqAcct / BereqAcct: "<hdr out> <body out> <total out> <hdr in> <body in> <total in>",
// from the client's point of view (received, then sent) and the backend's (sent, then
// received), as Varnish writes them.
struct Bytes {
  std::uint64_t hdr_rx = 0, body_rx = 0, hdr_tx = 0, body_tx = 0;
};
void request_acct(ringlog::Txn& req, const Bytes& b);
void backend_acct(ringlog::Txn& bereq, const Bytes& b);

}  // namespace ringproxy::header_log
