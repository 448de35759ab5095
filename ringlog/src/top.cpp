// ringlog-top's counting core (see top.hpp): varnishtop's decay, done on a hash map
// keyed by tag and payload, sorted only when a screen or a dump needs the order.
#include "ringlog/top.hpp"

#include <algorithm>
#include <cstdio>

namespace ringlog {

namespace {

// Display order: count, highest first; then tag and key, which the map key holds in
// that order (bytes compared unsigned).
template <class It>
bool display_before(const It& a, const It& b) {
  if (a->second != b->second) return a->second > b->second;
  return a->first < b->first;
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
  auto it = counts_.find(scratch_);
  if (it == counts_.end()) it = counts_.emplace(scratch_, 0.0).first;
  it->second += 1.0;
  return true;
}

std::vector<TopCounter::Map::const_iterator> TopCounter::order(std::size_t max, double min_count) const {
  std::vector<Map::const_iterator> v;
  v.reserve(min_count > 0 ? 64 : counts_.size());
  for (auto it = counts_.begin(); it != counts_.end(); ++it)
    if (it->second > min_count) v.push_back(it);
  auto before = [](const Map::const_iterator& a, const Map::const_iterator& b) { return display_before(a, b); };
  if (max < v.size()) {
    std::partial_sort(v.begin(), v.begin() + std::ptrdiff_t(max), v.end(), before);
    v.resize(max);
  } else {
    std::sort(v.begin(), v.end(), before);
  }
  return v;
}

std::vector<TopCounter::Entry> TopCounter::sorted(std::size_t max) const {
  std::vector<Entry> out;
  for (const auto& it : order(max, -1.0)) out.push_back(entry(*it));
  return out;
}

void TopCounter::decay(unsigned period, std::size_t rows) {
  if (period == 0) period = 1;
  if (ticks_ < period) ++ticks_;
  const double n = ticks_;
  std::vector<Map::iterator> order;
  order.reserve(counts_.size());
  for (auto it = counts_.begin(); it != counts_.end(); ++it) order.push_back(it);
  std::sort(order.begin(), order.end(), [](const Map::iterator& a, const Map::iterator& b) { return display_before(a, b); });
  // varnishtop walks the list in display order: row l (from 2, under the header) is
  // shown while l < rows. A pair is forgotten when its count falls below a tenth of the
  // lowest shown row's, or when it ranks beyond ten screens. varnishtop compares the
  // decayed count with the shown row's count before its decay, which on the first
  // update (n = 1, every count becomes 1/3) forgets every shown pair counted more than
  // 3.3 times; comparing decayed with decayed keeps the rule and not that glitch.
  double shown_min = 0;
  std::size_t l = 1;
  std::vector<Map::iterator> drop;
  for (const Map::iterator& it : order) {
    ++l;
    double& c = it->second;
    c += (1.0 / 3.0 - c) / n;
    if (l < rows) shown_min = c;
    if (c * 10 < shown_min || l > rows * 10) drop.push_back(it);
  }
  for (const Map::iterator& it : drop) counts_.erase(it);
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
  // Only pairs counted more than once are listed: sort just those.
  for (const auto& it : order(std::numeric_limits<std::size_t>::max(), 1.0)) {
    const Entry e = entry(*it);
    int n = std::snprintf(num, sizeof num, "%9.2f ", e.count);
    out.append(num, std::size_t(n));
    out += tag_name(e.tag);
    out += ' ';
    append_top_key(out, e.key);
    out += '\n';
  }
  return out;
}

}  // namespace ringlog
