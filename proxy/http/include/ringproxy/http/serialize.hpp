// Writing heads: start lines, fields, and the forwarding rules of a proxy (hop-by-hop
// fields removed, Connection-listed ones too, Via and X-Forwarded-For appended). Output
// is appended to a caller-owned std::string whose capacity is reused between messages.
// A forwarded head never carries the peer's framing fields: the caller writes its own.
#pragma once

#include "ringproxy/http/message.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ringproxy::http {

// RFC 9110 §7.6.1 + RFC 2616 §13.5.1 list: Connection, Keep-Alive, Proxy-Connection,
// Proxy-Authenticate, Proxy-Authorization, TE, Trailer, Transfer-Encoding, Upgrade.
bool is_hop_by_hop(std::string_view name);
// Hop-by-hop, or named in one of the message's Connection fields.
bool is_hop_by_hop(std::string_view name, const ConnectionInfo& conn);
// The same for a parsed field, by its id (a scan of Connection only for an Other field
// when Connection lists a token that is no fields.def name).
inline bool is_hop_by_hop(const Header& h, const ConnectionInfo& conn) {
  return (kHopByHopFields & field_bit(h.id)) != 0 || conn.lists(h);
}
// The fields a proxy never forwards from this message: the hop-by-hop ones and the
// fields.def names its Connection lists (an Other name listed still needs
// conn.lists(h): see write_fields_if).
inline FieldSet hop_by_hop_fields(const ConnectionInfo& conn) { return kHopByHopFields | conn.listed; }

std::string_view reason_phrase(int status);  // "OK", "Not Found"...; "Unknown" otherwise

void write_request_line(std::string& out, std::string_view method, std::string_view target,
                        std::uint8_t version_minor = 1);
void write_status_line(std::string& out, int status, std::string_view reason = {},
                       std::uint8_t version_minor = 1);  // empty reason: reason_phrase(status)
void write_header(std::string& out, std::string_view name, std::string_view value);
void write_header(std::string& out, std::string_view name, std::uint64_t value);
void end_head(std::string& out);  // the empty line

// Appends "Name: value\r\n" for each field of `headers` that keep(h) accepts, in
// order. Fields received verbatim on consecutive lines are copied with one append (a
// head's kept fields are mostly one run).
template <class Keep>
void write_fields_if(std::string& out, const HeaderList& headers, Keep&& keep) {
  const char* run = nullptr;
  const char* run_end = nullptr;
  for (const Header& h : headers) {
    if (!keep(h)) continue;
    if (h.verbatim) {
      const char* line_end = h.value.data() + h.value.size() + 2;
      if (h.name.data() != run_end) {
        if (run) out.append(run, static_cast<std::size_t>(run_end - run));
        run = h.name.data();
      }
      run_end = line_end;
    } else {
      if (run) out.append(run, static_cast<std::size_t>(run_end - run));
      run = run_end = nullptr;
      write_header(out, h.name, h.value);
    }
  }
  if (run) out.append(run, static_cast<std::size_t>(run_end - run));
}

struct ForwardOptions {
  std::string_view via = "ringproxy";  // Via: "1.<minor> <via>" appended to the list; empty: none
  std::string_view client_addr;       // requests: appended to X-Forwarded-For; empty: none
  bool keep_framing = false;  // keep Content-Length (never Transfer-Encoding, it is hop-by-hop)
};

// Start line + the end-to-end fields of `req` (target replaced by `target` if not
// empty) + Via + X-Forwarded-For. No Content-Length/Transfer-Encoding unless
// keep_framing, no final empty line: add framing and extra fields, then end_head().
void write_forward_request(std::string& out, const RequestHead& req, const ForwardOptions& opt,
                           std::string_view target = {});
// Same for a response (start line keeps the origin's status and reason, HTTP/1.1).
void write_forward_response(std::string& out, const ResponseHead& resp, const ForwardOptions& opt);

// One field line each: the values of the message's existing fields of that name, in
// order, then ours ("1.<minor> <pseudonym>" for Via, the address for X-Forwarded-For).
void write_via(std::string& out, const HeaderList& headers, std::uint8_t version_minor, std::string_view pseudonym);
void write_x_forwarded_for(std::string& out, const HeaderList& headers, std::string_view client_addr);

}  // namespace ringproxy::http
