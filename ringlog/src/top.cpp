// ringlog-top's counting core (see top.hpp): varnishtop's decay, done on a hash map
// keyed by tag and payload, sorted only when a screen or a dump needs the order.
#include "ringlog/top.hpp"

#include <algorithm>
#include <cstdio>

namespace ringlog {

namespace {

bool display_before(const TopCounter::Entry* a, const TopCounter::Entry* b) {
  if (a->count != b->count) return a->count > b->count;
  if (a->tag != b->tag) return std::uint8_t(a->tag) < std::uint8_t(b->tag);
  return a->key < b->key;
}

}  // namespace

bool TopCounter::add(Tag tag, std::string_view payload) {
  std::string_view key = payload;
  if (first_field_) {
    std::size_t i = 0;
    while (i < key.size() && key[i] != ':' && key[i] != ' ' && key[i] != '\t' && key[i] != '\n' && key[i] != '\r' &&
           key[i] != '\f' && key[i] != '\v')
      ++i;
    key = key.substr(0, i);
  }
  if (key.empty()) return false;
  scratch_.assign(1, static_cast<char>(tag));
  scratch_.append(key);
  auto it = entries_.find(scratch_);
  if (it == entries_.end()) {
    it = entries_.emplace(scratch_, Entry{tag, std::string(key), 0.0}).first;
  }
  it->second.count += 1.0;
  return true;
}

std::vector<const TopCounter::Entry*> TopCounter::sorted(std::size_t max) const {
  std::vector<const Entry*> v;
  v.reserve(entries_.size());
  for (const auto& [k, e] : entries_) v.push_back(&e);
  if (max < v.size()) {
    std::partial_sort(v.begin(), v.begin() + std::ptrdiff_t(max), v.end(), display_before);
    v.resize(max);
  } else {
    std::sort(v.begin(), v.end(), display_before);
  }
  return v;
}

void TopCounter::decay(unsigned period, std::size_t rows) {
  if (period == 0) period = 1;
  if (ticks_ < period) ++ticks_;
  const double n = ticks_;
  std::vector<Entry*> order;
  order.reserve(entries_.size());
  for (auto& [k, e] : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(), display_before);
  // varnishtop walks the list in display order: row l (from 2, under the header) is
  // shown while l < rows. A pair is forgotten when its count falls below a tenth of the
  // lowest shown row's, or when it ranks beyond ten screens. varnishtop compares the
  // decayed count with the shown row's count before its decay, which on the first
  // update (n = 1, every count becomes 1/3) forgets every shown pair counted more than
  // 3.3 times; comparing decayed with decayed keeps the rule and not that glitch.
  double shown_min = 0;
  std::size_t l = 1;
  std::vector<std::string> drop;
  for (Entry* e : order) {
    ++l;
    e->count += (1.0 / 3.0 - e->count) / n;
    if (l < rows) shown_min = e->count;
    if (e->count * 10 < shown_min || l > rows * 10) {
      std::string k(1, static_cast<char>(e->tag));
      k += e->key;
      drop.push_back(std::move(k));
    }
  }
  for (const std::string& k : drop) entries_.erase(k);
}

void append_top_key(std::string& out, std::string_view key) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
}

std::string TopCounter::dump() const {
  std::string out;
  char num[64];
  for (const Entry* e : sorted()) {
    if (e->count <= 1.0) break;
    int n = std::snprintf(num, sizeof num, "%9.2f ", e->count);
    out.append(num, std::size_t(n));
    out += tag_name(e->tag);
    out += ' ';
    append_top_key(out, e->key);
    out += '\n';
  }
  return out;
}

}  // namespace ringlog
