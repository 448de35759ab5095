// The head records (see header_log.hpp).
#include "header_log.hpp"

#include "ringlog/fmt.hpp"

namespace ringproxy::header_log {

using ringlog::Tag;

namespace {

// "Name: value" of a parsed field, logged from the bytes in place when the field was
// received in the usual "Name: value" shape (no copy), else formatted. The caller has
// tested the tag (once per head).
void field(ringlog::Txn& t, Tag tag, const http::Header& h) {
  const char* end = h.value.data() + h.value.size();
  if (!h.value.empty() && h.value.data() == h.name.data() + h.name.size() + 2 && h.name.data()[h.name.size()] == ':' &&
      h.name.data()[h.name.size() + 1] == ' ')
    t.record_enabled(tag, std::string_view(h.name.data(), std::size_t(end - h.name.data())));
  else
    t.recordf(tag, "%.*s: %.*s", int(h.name.size()), h.name.data(), int(h.value.size()), h.value.data());
}

// Each "Name: value" field line after the first line of a serialized head.
void field_lines(ringlog::Txn& t, Tag tag, std::string_view head) {
  if (!t.enabled(tag)) return;
  std::size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos) {
    pos += 2;
    std::size_t e = head.find("\r\n", pos);
    if (e == std::string_view::npos || e == pos) break;
    t.record_enabled(tag, head.substr(pos, e - pos));
    pos = e;
  }
}

void acct(ringlog::Txn& t, Tag tag, std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  // Six numbers of at most 20 digits and their five spaces.
  t.record_with<6 * 20 + 5>(tag, [&](char* o) {
    char* p = o;
    for (std::uint64_t v : {a, b, a + b, c, d}) {
      p += ringlog::format_u64(p, v);
      *p++ = ' ';
    }
    return std::size_t(p - o) + ringlog::format_u64(p, c + d);
  });
}

}  // namespace

void request(ringlog::Txn& req, const http::RequestHead& h) {
  req.record(Tag::ReqMethod, h.method_name);
  req.record(Tag::ReqURL, h.target);
  req.record(Tag::ReqProtocol, h.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1");
  if (req.enabled(Tag::ReqHeader))
    for (const http::Header& x : h.headers) field(req, Tag::ReqHeader, x);
}

void backend_request(ringlog::Txn& bereq, std::string_view method, std::string_view url, std::string_view head) {
  bereq.record(Tag::BereqMethod, method);
  bereq.record(Tag::BereqURL, url);
  bereq.record(Tag::BereqProtocol, "HTTP/1.1");
  field_lines(bereq, Tag::BereqHeader, head);
}

void backend_response(ringlog::Txn& bereq, const http::ResponseHead& h) {
  bereq.record(Tag::BerespProtocol, h.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1");
  bereq.record_with<20>(Tag::BerespStatus, [&](char* o) { return ringlog::format_u64(o, h.status); });
  bereq.record(Tag::BerespReason, h.reason);
  if (bereq.enabled(Tag::BerespHeader))
    for (const http::Header& x : h.headers) field(bereq, Tag::BerespHeader, x);
}

void response_status(ringlog::Txn& req, int status, std::string_view reason) {
  req.record(Tag::RespProtocol, "HTTP/1.1");
  req.record_with<21>(Tag::RespStatus, [&](char* o) {
    if (status >= 0) return ringlog::format_u64(o, std::uint64_t(status));
    o[0] = '-';
    return 1 + ringlog::format_u64(o + 1, std::uint64_t(0) - std::uint64_t(std::int64_t(status)));
  });
  req.record(Tag::RespReason, reason.empty() ? http::reason_phrase(status) : reason);
}

void response_status(ringlog::Txn& req, std::string_view status, std::string_view reason) {
  req.record(Tag::RespProtocol, "HTTP/1.1");
  req.record(Tag::RespStatus, status);
  req.record(Tag::RespReason, reason);
}

void response_field(ringlog::Txn& req, const http::Header& h) {
  if (req.enabled(Tag::RespHeader)) field(req, Tag::RespHeader, h);
}

void response_line(ringlog::Txn& req, std::string_view out, std::size_t at) {
  req.record(Tag::RespHeader, out.substr(at, out.size() - at - 2));
}

void put_response_field(std::string& out, ringlog::Txn& req, std::string_view name, std::string_view value) {
  std::size_t at = out.size();
  http::write_header(out, name, value);
  response_line(req, out, at);
}

void response_head(ringlog::Txn& req, std::string_view head) {
  std::size_t sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1), eol = head.find("\r\n");
  response_status(req, head.substr(sp1 + 1, sp2 - sp1 - 1), head.substr(sp2 + 1, eol - sp2 - 1));
  field_lines(req, Tag::RespHeader, head);
}

void request_acct(ringlog::Txn& req, const Bytes& b) {
  acct(req, Tag::ReqAcct, b.hdr_rx, b.body_rx, b.hdr_tx, b.body_tx);
}

void backend_acct(ringlog::Txn& bereq, const Bytes& b) {
  acct(bereq, Tag::BereqAcct, b.hdr_tx, b.body_tx, b.hdr_rx, b.body_rx);
}

}  // namespace ringproxy::header_log
