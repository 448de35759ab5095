// Record tags, generated from ringlog/defs/tags.def: the Tag enum, name and flag
// tables, and the default tag mask. The constexpr parts are what the write path folds
// into one bit test; the name registry is for readers and tools.
// Thread safety: everything here is read-only except define_app_tag(), which must be
// called before other threads print or look tags up (at start-up).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ringlog {

enum class Tag : std::uint8_t {
  invalid = 0,
#define RINGLOG_TAG(id, name, flags, desc) name = id,
#include "tags.def"
#undef RINGLOG_TAG
};

// Tag flags (tags.def's S, U, B, O, R).
inline constexpr std::uint8_t kTagStructural = 1;  // Begin/End/Link: never masked
inline constexpr std::uint8_t kTagUnsafe = 2;      // may hold any byte: printed escaped
inline constexpr std::uint8_t kTagBinary = 4;      // printed as hex
inline constexpr std::uint8_t kTagDefaultOff = 8;  // masked unless enabled
inline constexpr std::uint8_t kTagReaderOnly = 16; // synthetic, made by readers

// Tags 192..254 are for embedding applications (app_tag(0) .. app_tag(62)).
inline constexpr unsigned kAppTagFirst = 192;
inline constexpr unsigned kAppTagLast = 254;
inline constexpr unsigned kAppTagCount = kAppTagLast - kAppTagFirst + 1;
constexpr Tag app_tag(unsigned n) noexcept { return static_cast<Tag>(kAppTagFirst + n); }
constexpr bool is_app_tag(Tag t) noexcept {
  return unsigned(t) >= kAppTagFirst && unsigned(t) <= kAppTagLast;
}

struct TagInfo {
  std::uint8_t id;
  const char* name;
  std::uint8_t flags;
  const char* description;
};

namespace tagdef {
inline constexpr std::uint8_t S = kTagStructural, U = kTagUnsafe, B = kTagBinary, O = kTagDefaultOff,
                              R = kTagReaderOnly;
inline constexpr TagInfo kBuiltin[] = {
#define RINGLOG_TAG(id, name, flags, desc) {id, #name, static_cast<std::uint8_t>(flags), desc},
#include "tags.def"
#undef RINGLOG_TAG
};
}  // namespace tagdef

// The built-in tags, in tags.def order.
inline constexpr std::span<const TagInfo> builtin_tags() noexcept { return tagdef::kBuiltin; }

constexpr bool is_builtin_tag(Tag t) noexcept {
  for (const auto& i : tagdef::kBuiltin)
    if (i.id == std::uint8_t(t)) return true;
  return false;
}
constexpr bool is_valid_tag(Tag t) noexcept { return is_builtin_tag(t) || is_app_tag(t); }

// Built-in flags of a tag (app tags: see tag_flags()).
constexpr std::uint8_t builtin_tag_flags(Tag t) noexcept {
  for (const auto& i : tagdef::kBuiltin)
    if (i.id == std::uint8_t(t)) return i.flags;
  return 0;
}

// Default tag mask, one bit per tag id (bit set = logged): every valid tag except the
// ones flagged O (Debug, Trace) and R (reader-made).
constexpr std::array<std::uint64_t, 4> make_default_mask() noexcept {
  std::array<std::uint64_t, 4> m{};
  for (unsigned t = 0; t < 256; ++t) {
    Tag tag = static_cast<Tag>(t);
    if (!is_valid_tag(tag)) continue;
    if (builtin_tag_flags(tag) & (kTagDefaultOff | kTagReaderOnly)) continue;
    m[t >> 6] |= 1ULL << (t & 63);
  }
  return m;
}
inline constexpr std::array<std::uint64_t, 4> kDefaultTagMask = make_default_mask();

// Reader-side tables of every tag id (tags.cpp; constant-initialised, so usable before
// main; define_app_tag() changes app tags). Inline lookups: a reader looks a tag up for
// every record it prints. kPaddedName holds names of up to kPaddedNameMax characters
// followed by spaces to 16 bytes, for printers that copy a fixed 16 bytes.
inline constexpr std::size_t kPaddedNameMax = 14;
namespace tagdef {
extern std::array<std::string_view, 256> g_names;
extern std::array<std::uint8_t, 256> g_flags;
extern std::array<std::array<char, 16>, 256> g_padded;
}  // namespace tagdef

// Reader side: names and flags of every tag id, app tags included ("App0".. unless
// defined). Unknown ids are named "Tag<N>".
inline std::string_view tag_name(Tag t) noexcept { return tagdef::g_names[std::uint8_t(t)]; }
inline std::uint8_t tag_flags(Tag t) noexcept { return tagdef::g_flags[std::uint8_t(t)]; }
// The name followed by spaces to 16 bytes; only when tag_name(t).size() <= kPaddedNameMax.
inline const char* tag_name_padded(Tag t) noexcept { return tagdef::g_padded[std::uint8_t(t)].data(); }
std::string_view tag_description(Tag t) noexcept;
// Case-insensitive, like Varnish's -i/-x arguments. Accepts "App<N>" and "Tag<N>".
std::optional<Tag> tag_by_name(std::string_view name) noexcept;
// Names an application tag (process-local; other processes print it as App<N>).
// flags: kTagUnsafe and/or kTagBinary. Returns false for a non-app tag.
bool define_app_tag(Tag t, std::string_view name, std::uint8_t flags, std::string_view description = {});

}  // namespace ringlog
