// Internal: the name -> FieldId lookup the parser runs on every field name (and on the
// tokens of Connection), built at compile time from fields.def. A name's length and the
// low five bits of its first byte pick a bucket (in practice one listed name or none),
// then one word-at-a-time case-insensitive compare decides: an unknown name costs a
// table load, a known one a few words. Must stay exact: a name is a listed id only if it
// is that name, in any letter case.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "ringproxy/http/message.hpp"

namespace ringproxy::http::detail {

inline constexpr std::string_view kFieldNames[kFieldIds] = {
    "",
#define RINGPROXY_FIELD(id, name, hop_by_hop) name,
#include "ringproxy/http/fields.def"
#undef RINGPROXY_FIELD
};

constexpr std::size_t kMaxFieldName = 24;  // longest listed name, bounded (asserted below)

// Per id: the lower-case name and a fold mask (0x20 under letters, 0 under '-'), zero
// padded: (byte | fold) == lower holds exactly for the name's bytes in either case.
struct FieldKey {
  char lower[kMaxFieldName] = {};
  char fold[kMaxFieldName] = {};
};

struct FieldTable {
  std::array<FieldKey, kFieldIds> keys{};
  std::array<std::uint8_t, (kMaxFieldName + 1) * 32> first{};  // bucket -> first id (0: none)
  std::array<std::uint8_t, kFieldIds> next{};                   // id -> next id in its bucket
  bool valid = true;  // every name 1..kMaxFieldName bytes of letters and '-'
};

constexpr std::size_t field_bucket(std::size_t len, char c0) {
  return len * 32 + (static_cast<unsigned char>(c0) & 31u);
}

constexpr FieldTable make_field_table() {
  FieldTable t;
  for (std::size_t id = kFieldIds - 1; id >= 1; --id) {
    std::string_view n = kFieldNames[id];
    if (n.empty() || n.size() > kMaxFieldName) {
      t.valid = false;
      continue;
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      char c = n[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c == '-') {
        t.keys[id].fold[i] = 0;
      } else if (c >= 'a' && c <= 'z') {
        t.keys[id].fold[i] = 0x20;
      } else {
        t.valid = false;
      }
      t.keys[id].lower[i] = c;
    }
    // Pushed at the front, in reverse id order: each bucket lists its ids in order.
    std::size_t b = field_bucket(n.size(), n[0]);
    t.next[id] = t.first[b];
    t.first[b] = static_cast<std::uint8_t>(id);
  }
  return t;
}
inline constexpr FieldTable kFieldTable = make_field_table();
static_assert(kFieldTable.valid, "fields.def names are 1..kMaxFieldName bytes of letters and '-'");
static_assert(kFieldIds < 256, "ids fit the table's bytes");

template <class T>
inline T load_n(const char* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

// (p[i] | fold[i]) == lower[i] for i < n; n is the key's length (>= 1). Overlapping
// loads: never reads outside [p, p + n).
template <class T>
inline bool key_words_match(const char* p, std::size_t n, const FieldKey& k) {
  constexpr std::size_t w = sizeof(T);
  for (std::size_t i = 0; i + w < n; i += w)
    if ((load_n<T>(p + i) | load_n<T>(k.fold + i)) != load_n<T>(k.lower + i)) return false;
  const std::size_t t = n - w;
  return (load_n<T>(p + t) | load_n<T>(k.fold + t)) == load_n<T>(k.lower + t);
}

inline bool key_matches(const char* p, std::size_t n, const FieldKey& k) {
  if (n >= 8) return key_words_match<std::uint64_t>(p, n, k);
  if (n >= 4) return key_words_match<std::uint32_t>(p, n, k);
  if (n >= 2) return key_words_match<std::uint16_t>(p, n, k);
  return (static_cast<char>(p[0] | k.fold[0])) == k.lower[0];
}

inline FieldId lookup_field(std::string_view name) {
  const std::size_t n = name.size();
  if (n == 0 || n > kMaxFieldName) return FieldId::Other;
  for (std::uint8_t id = kFieldTable.first[field_bucket(n, name[0])]; id != 0; id = kFieldTable.next[id])
    if (key_matches(name.data(), n, kFieldTable.keys[id]))  // (the bucket fixed the length)
      return static_cast<FieldId>(id);
  return FieldId::Other;
}

}  // namespace ringproxy::http::detail
