// Head writers and the proxy's forwarding rules. Appends only: the caller's buffer
// keeps its capacity, so a steady connection allocates nothing here.
#include "ringproxy/http/serialize.hpp"

#include <charconv>
#include <cstring>

#include "chars.hpp"

namespace ringproxy::http {

bool is_hop_by_hop(std::string_view name) { return (kHopByHopFields & field_bit(field_id(name))) != 0; }

bool is_hop_by_hop(std::string_view name, const ConnectionInfo& conn) {
  return is_hop_by_hop(name) || (conn.count && conn.lists(name));
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

void write_request_line(std::string& out, std::string_view method, std::string_view target,
                        std::uint8_t version_minor) {
  out.append(method);
  out.push_back(' ');
  out.append(target);
  out.append(" HTTP/1.");
  out.push_back(static_cast<char>('0' + (version_minor > 9 ? 1 : version_minor)));
  out.append("\r\n");
}

void write_status_line(std::string& out, int status, std::string_view reason, std::uint8_t version_minor) {
  out.append("HTTP/1.");
  out.push_back(static_cast<char>('0' + (version_minor > 9 ? 1 : version_minor)));
  out.push_back(' ');
  char num[4] = {static_cast<char>('0' + status / 100 % 10), static_cast<char>('0' + status / 10 % 10),
                 static_cast<char>('0' + status % 10), ' '};
  out.append(num, 4);
  out.append(reason.empty() ? reason_phrase(status) : reason);
  out.append("\r\n");
}

void write_header(std::string& out, std::string_view name, std::string_view value) {
  // One append of the whole line when it fits a stack line: four appends are four calls,
  // each with its own capacity check, and a head is a few short fields.
  const std::size_t n = name.size() + value.size() + 4;
  char line[256];
  if (n > sizeof line) {
    out.append(name);
    out.append(": ");
    out.append(value);
    out.append("\r\n");
    return;
  }
  char* p = line;
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  std::memcpy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
  out.append(line, n);
}

void write_header(std::string& out, std::string_view name, std::uint64_t value) {
  char num[24];
  auto r = std::to_chars(num, num + sizeof num, value);
  write_header(out, name, std::string_view(num, static_cast<std::size_t>(r.ptr - num)));
}

void end_head(std::string& out) { out.append("\r\n"); }

namespace {

// Appends one field line `name: v1, v2, ..., ours` (the values of the fields `id`).
void write_joined(std::string& out, FieldId id, const HeaderList& headers, std::string_view ours_a,
                  std::string_view ours_b) {
  const std::string_view name = field_name(id);
  if (!headers.has(id)) {
    // The usual case: nothing to merge, one line of ours.
    const std::size_t n = name.size() + 2 + ours_a.size() + ours_b.size() + 2;
    char line[256];
    if (n <= sizeof line) {
      char* p = line;
      std::memcpy(p, name.data(), name.size());
      p += name.size();
      *p++ = ':';
      *p++ = ' ';
      // (ours_b is an empty view for X-Forwarded-For: its data() may be null)
      if (!ours_a.empty()) std::memcpy(p, ours_a.data(), ours_a.size());
      p += ours_a.size();
      if (!ours_b.empty()) std::memcpy(p, ours_b.data(), ours_b.size());
      p += ours_b.size();
      *p++ = '\r';
      *p = '\n';
      out.append(line, n);
      return;
    }
  }
  out.append(name);
  out.append(": ");
  for (const Header& h : headers) {
    if (h.id != id || h.value.empty()) continue;
    out.append(h.value);
    out.append(", ");
  }
  out.append(ours_a);
  out.append(ours_b);
  out.append("\r\n");
}

void write_fields(std::string& out, const HeaderList& headers, const ConnectionInfo& conn,
                  const ForwardOptions& opt, bool request) {
  FieldSet drop = hop_by_hop_fields(conn);
  if (!opt.keep_framing) drop |= field_bit(FieldId::ContentLength);
  if (!opt.via.empty()) drop |= field_bit(FieldId::Via);
  if (request && !opt.client_addr.empty()) drop |= field_bit(FieldId::XForwardedFor);
  write_fields_if(out, headers, [&](const Header& h) { return !(drop & field_bit(h.id)) && !conn.lists(h); });
}

}  // namespace

void write_via(std::string& out, const HeaderList& headers, std::uint8_t version_minor, std::string_view pseudonym) {
  char proto[5] = {'1', '.', static_cast<char>('0' + (version_minor > 9 ? 1 : version_minor)), ' ', 0};
  write_joined(out, FieldId::Via, headers, std::string_view(proto, 4), pseudonym);
}

void write_x_forwarded_for(std::string& out, const HeaderList& headers, std::string_view client_addr) {
  write_joined(out, FieldId::XForwardedFor, headers, client_addr, {});
}

void write_forward_request(std::string& out, const RequestHead& req, const ForwardOptions& opt,
                           std::string_view target) {
  write_request_line(out, req.method_name, target.empty() ? req.target : target, 1);
  write_fields(out, req.headers, req.connection, opt, true);
  if (!opt.via.empty()) write_via(out, req.headers, req.version_minor, opt.via);
  if (!opt.client_addr.empty()) write_x_forwarded_for(out, req.headers, opt.client_addr);
}

void write_forward_response(std::string& out, const ResponseHead& resp, const ForwardOptions& opt) {
  write_status_line(out, resp.status, resp.reason.empty() ? reason_phrase(resp.status) : resp.reason, 1);
  write_fields(out, resp.headers, resp.connection, opt, false);
  if (!opt.via.empty()) write_via(out, resp.headers, resp.version_minor, opt.via);
}

}  // namespace ringproxy::http
