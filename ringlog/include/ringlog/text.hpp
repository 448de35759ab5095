// ASCII case-insensitive comparisons, for the names ringlog and its programs match
// without regard to case: tag names, query and format prefixes, HTTP header names and
// tokens. Only A-Z and a-z fold; other bytes (UTF-8 included) compare as they are, and
// the locale never matters. Inline and allocation-free: the HTTP parser uses them.
#pragma once

#include <cstddef>
#include <string_view>

namespace ringlog {

constexpr char ascii_lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

constexpr bool istarts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

}  // namespace ringlog
