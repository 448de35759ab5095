// Character classes (RFC 9110 §5.6.2, §5.5) and the small lookups on parsed heads.
// Tables, not branches: the parser runs them on every byte of every head.
#include "ringproxy/http/message.hpp"

#include "chars.hpp"
#include "field_ids.hpp"

namespace ringproxy::http {

std::string_view method_name(Method m) {
  switch (m) {
    case Method::Get: return "GET";
    case Method::Head: return "HEAD";
    case Method::Post: return "POST";
    case Method::Put: return "PUT";
    case Method::Delete: return "DELETE";
    case Method::Connect: return "CONNECT";
    case Method::Options: return "OPTIONS";
    case Method::Trace: return "TRACE";
    case Method::Patch: return "PATCH";
    case Method::Other: break;
  }
  return "";
}

bool is_tchar(unsigned char c) { return detail::kCharClass[c] & detail::kTchar; }
bool is_field_value_char(unsigned char c) { return detail::kCharClass[c] & detail::kValue; }

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!is_tchar(c)) return false;
  return true;
}

bool iequals(std::string_view a, std::string_view b) { return detail::iequals(a, b); }

FieldId field_id(std::string_view name) { return detail::lookup_field(name); }

std::string_view field_name(FieldId id) {
  auto i = static_cast<std::size_t>(id);
  return i < kFieldIds ? detail::kFieldNames[i] : std::string_view();
}

const Header* HeaderList::find(std::string_view name) const {
  for (const Header& h : v_)
    if (detail::iequals(h.name, name)) return &h;
  return nullptr;
}

std::size_t HeaderList::count(std::string_view name) const {
  std::size_t n = 0;
  for (const Header& h : v_) n += detail::iequals(h.name, name);
  return n;
}

bool HeaderList::has_token(std::string_view name, std::string_view token) const {
  for (const Header& h : v_) {
    if (!detail::iequals(h.name, name)) continue;
    bool found = false;
    detail::for_each_list_element(h.value, [&](std::string_view e) {
      if (detail::iequals(e, token)) found = true;
    });
    if (found) return true;
  }
  return false;
}

bool ConnectionInfo::lists(std::string_view token) const {
  for (std::size_t i = 0; i < count; ++i) {
    bool found = false;
    detail::for_each_list_element(values[i], [&](std::string_view e) {
      if (detail::iequals(e, token)) found = true;
    });
    if (found) return true;
  }
  return false;
}

}  // namespace ringproxy::http
