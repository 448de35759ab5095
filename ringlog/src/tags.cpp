// Tag name and flag tables for readers: built-in tags from tags.def, application tags
// named at start-up, and generated names for ids that mean nothing yet.
#include "ringlog/tags.hpp"

#include <cctype>
#include <charconv>

#include "ringlog/text.hpp"

namespace ringlog {

namespace {

constexpr std::size_t cstr_len(const char* s) {
  std::size_t n = 0;
  while (s[n]) ++n;
  return n;
}

// "Tag<N>", "App<N>" or the built-in name of each id, space-padded to 16 bytes, and
// its length.
struct Generated {
  std::array<std::array<char, 16>, 256> padded{};
  std::array<std::uint8_t, 256> len{};
  std::array<std::uint8_t, 256> flags{};
};

constexpr Generated generate() {
  Generated g;
  for (unsigned t = 0; t < 256; ++t) {
    auto& p = g.padded[t];
    for (char& c : p) c = ' ';
    bool app = is_app_tag(static_cast<Tag>(t));
    unsigned n = app ? t - kAppTagFirst : t;
    std::size_t len = 0;
    for (char c : std::string_view(app ? "App" : "Tag")) p[len++] = c;
    char digits[4];
    std::size_t k = 0;
    do {
      digits[k++] = char('0' + n % 10);
      n /= 10;
    } while (n);
    while (k) p[len++] = digits[--k];
    g.len[t] = std::uint8_t(len);
  }
  for (const auto& i : tagdef::kBuiltin) {
    std::size_t len = cstr_len(i.name);
    auto& p = g.padded[i.id];
    for (std::size_t k = 0; k < 16; ++k) p[k] = k < len ? i.name[k] : ' ';
    g.len[i.id] = std::uint8_t(len);
    g.flags[i.id] = i.flags;
  }
  return g;
}
constexpr Generated kGenerated = generate();
static_assert([] {
  for (const auto& i : tagdef::kBuiltin)
    if (cstr_len(i.name) > kPaddedNameMax) return false;
  return true;
}(), "built-in tag names must fit kPaddedNameMax (the printers' fixed-width copy)");

constexpr std::array<std::string_view, 256> make_names(const std::array<std::array<char, 16>, 256>& storage) {
  std::array<std::string_view, 256> v{};
  for (unsigned t = 0; t < 256; ++t) v[t] = std::string_view(storage[t].data(), kGenerated.len[t]);
  return v;
}

// Descriptions are only for help texts: built on first use.
struct Descriptions {
  std::array<std::string, 256> text;
  Descriptions() {
    for (unsigned t = 0; t < 256; ++t)
      text[t] = is_app_tag(static_cast<Tag>(t)) ? "Application-defined tag" : "Unknown tag";
    for (const auto& i : builtin_tags()) text[i.id] = i.description;
  }
};

Descriptions& descriptions() {
  static Descriptions d;
  return d;
}

// Names of app tags too long for the padded table.
std::array<std::string, 256>& long_names() {
  static std::array<std::string, 256> n;
  return n;
}

}  // namespace

namespace tagdef {
constinit std::array<std::array<char, 16>, 256> g_padded = kGenerated.padded;
constinit std::array<std::string_view, 256> g_names = make_names(g_padded);
constinit std::array<std::uint8_t, 256> g_flags = kGenerated.flags;
}  // namespace tagdef

std::string_view tag_description(Tag t) noexcept { return descriptions().text[std::uint8_t(t)]; }

std::optional<Tag> tag_by_name(std::string_view name) noexcept {
  for (unsigned t = 1; t < 255; ++t)
    if (iequals(tagdef::g_names[t], name)) return static_cast<Tag>(t);
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
  const std::uint8_t id = std::uint8_t(t);
  auto& padded = tagdef::g_padded[id];
  if (name.size() <= kPaddedNameMax) {
    for (std::size_t k = 0; k < padded.size(); ++k) padded[k] = k < name.size() ? name[k] : ' ';
    tagdef::g_names[id] = std::string_view(padded.data(), name.size());
  } else {
    long_names()[id] = std::string(name);
    tagdef::g_names[id] = long_names()[id];
  }
  tagdef::g_flags[id] = flags & (kTagUnsafe | kTagBinary);
  if (!description.empty()) descriptions().text[id] = std::string(description);
  return true;
}

}  // namespace ringlog
