// Tag name and flag tables for readers: built-in tags from tags.def, application tags
// named at start-up, and generated names for ids that mean nothing yet.
#include "ringlog/tags.hpp"

#include <cctype>
#include <charconv>

#include "ringlog/text.hpp"

namespace ringlog {

namespace {

struct Table {
  std::array<std::string, 256> names;
  std::array<std::string, 256> descriptions;
  std::array<std::uint8_t, 256> flags{};

  Table() {
    for (unsigned t = 0; t < 256; ++t) {
      if (is_app_tag(static_cast<Tag>(t))) {
        names[t] = "App" + std::to_string(t - kAppTagFirst);
        descriptions[t] = "Application-defined tag";
      } else {
        names[t] = "Tag" + std::to_string(t);
        descriptions[t] = "Unknown tag";
      }
    }
    for (const auto& i : builtin_tags()) {
      names[i.id] = i.name;
      descriptions[i.id] = i.description;
      flags[i.id] = i.flags;
    }
  }
};

Table& table() {
  static Table t;
  return t;
}


}  // namespace

std::string_view tag_name(Tag t) noexcept { return table().names[std::uint8_t(t)]; }
std::uint8_t tag_flags(Tag t) noexcept { return table().flags[std::uint8_t(t)]; }
std::string_view tag_description(Tag t) noexcept { return table().descriptions[std::uint8_t(t)]; }

std::optional<Tag> tag_by_name(std::string_view name) noexcept {
  const Table& tb = table();
  for (unsigned t = 1; t < 255; ++t)
    if (iequals(tb.names[t], name)) return static_cast<Tag>(t);
  // Generic spellings keep working after an app tag is renamed.
  auto numbered = [&](std::string_view prefix, unsigned base) -> std::optional<Tag> {
    if (name.size() <= prefix.size() || !istarts_with(name, prefix)) return std::nullopt;
    unsigned n = 0;
    auto rest = name.substr(prefix.size());
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec != std::errc() || p != rest.data() + rest.size() || base + n > 254) return std::nullopt;
    return static_cast<Tag>(base + n);
  };
  if (auto t = numbered("App", kAppTagFirst); t && is_app_tag(*t)) return t;
  if (auto t = numbered("Tag", 0); t && *t != Tag::invalid) return t;
  return std::nullopt;
}

bool define_app_tag(Tag t, std::string_view name, std::uint8_t flags, std::string_view description) {
  if (!is_app_tag(t) || name.empty()) return false;
  Table& tb = table();
  tb.names[std::uint8_t(t)] = std::string(name);
  tb.flags[std::uint8_t(t)] = flags & (kTagUnsafe | kTagBinary);
  if (!description.empty()) tb.descriptions[std::uint8_t(t)] = std::string(description);
  return true;
}

}  // namespace ringlog
