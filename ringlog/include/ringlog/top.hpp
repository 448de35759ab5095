// Decaying counts of (tag, payload) pairs: ringlog-top's core, varnishtop's algorithm.
// Each record adds 1 to its pair; once a second every count moves toward 1/3 by
// (1/3 - count) / n, n counting seconds up to the period, so a pair seen r times a
// second settles near r * period. Pairs far below the visible list are forgotten.
// Thread safety: one TopCounter per thread (the tool feeds and draws from one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ringlog/tags.hpp"

namespace ringlog {

class TopCounter {
 public:
  // One pair as listed: key views into the counter (valid until the next add/decay).
  struct Entry {
    Tag tag = Tag::invalid;
    std::string_view key;  // the payload (or its first field with -f), as recorded
    double count = 0;
  };

  // first_field: varnishtop -f, count only the payload up to the first ':' or space.
  explicit TopCounter(bool first_field = false) : first_field_(first_field) {}

  // Counts one record; false (not counted) when its key is empty.
  bool add(Tag tag, std::string_view payload);

  // The once-a-second update. rows: how many rows the screen shows; pairs whose count
  // falls below a tenth of the lowest shown one, or ranked beyond rows * 10, are
  // dropped (varnishtop's bound on memory).
  void decay(unsigned period, std::size_t rows);

  // Highest counts first; ties by tag id, then key (so dumps are reproducible). With
  // max, only the first max (a partial sort).
  std::vector<Entry> sorted(std::size_t max = std::numeric_limits<std::size_t>::max()) const;
  std::size_t size() const noexcept { return counts_.size(); }
  unsigned ticks() const noexcept { return ticks_; }

  // varnishtop -1: every pair counted more than once, "%9.2f TAG KEY" lines.
  std::string dump() const;

 private:
  // Map key: the tag byte, then the key, so that comparing map keys as bytes orders
  // by tag, then key. One allocation per pair.
  using Map = std::unordered_map<std::string, double>;
  static Entry entry(const Map::value_type& v) noexcept {
    return Entry{static_cast<Tag>(static_cast<unsigned char>(v.first[0])), std::string_view(v.first).substr(1),
                 v.second};
  }
  std::vector<Map::const_iterator> order(std::size_t max, double min_count) const;

  bool first_field_;
  unsigned ticks_ = 0;
  std::string scratch_;
  Map counts_;
};

// A key as shown on a screen or in a dump: control and non-ASCII bytes as \xHH.
void append_top_key(std::string& out, std::string_view key);

}  // namespace ringlog
