// The VSL query language (Varnish's vsl-query(7), documented in ringlog-query(7)):
// selects transaction groups for the reader tools (-q). A query is parsed once and
// evaluated against each Group; every record test means "some record of some
// transaction of the group (at the given level) passes". Parsing trusts nothing:
// errors carry the byte position in the query text, never crash.
// `~` and `!~` search anywhere with PCRE2 (ringlog::Regex), as Varnish does.
// Thread safety: a parsed Query/QuerySet is immutable; matches() may run concurrently.
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ringlog/group.hpp"
#include "ringlog/tags.hpp"

namespace ringlog {

// A parse error: pos is the 0-based byte offset in the query text where it was found.
class QueryParseError : public std::runtime_error {
 public:
  QueryParseError(std::size_t pos, std::string message);
  std::size_t pos() const noexcept { return pos_; }
  const std::string& message() const noexcept { return message_; }
  // "query:1:7: expected an operand after '=='" style text with a caret line:
  //   ReqURL == 
  //             ^
  std::string describe(std::string_view query_text) const;

 private:
  std::size_t pos_;
  std::string message_;
};

// A set of tags named by a taglist: comma-separated tag names or globs ("Req*",
// "*Header", "*"), case-insensitive (varnishlog's -i/-x arguments).
class TagSet {
 public:
  TagSet() = default;
  // Throws std::invalid_argument naming the bad element (a glob that matches nothing
  // or an unknown tag name).
  static TagSet parse(std::string_view taglist);
  // One name or glob; false when it matches no tag.
  bool add(std::string_view name_or_glob);
  void add(Tag t) noexcept { bits_.set(std::uint8_t(t)); }
  bool contains(Tag t) const noexcept { return bits_.test(std::uint8_t(t)); }
  bool empty() const noexcept { return bits_.none(); }
  static TagSet all();

 private:
  std::bitset<256> bits_;
};

// Case-insensitive glob over tag names: '*' matches any run of characters.
bool tag_glob_match(std::string_view glob, std::string_view name) noexcept;

// How a query is compiled. caseless: every regex and every eq/ne comparison ignores
// case (the tools' -C, as varnishlog -C).
struct QueryOptions {
  bool caseless = false;
};

class Query {
 public:
  // Throws QueryParseError; a regex PCRE2 refuses is one, at the position in the query
  // text where PCRE2 stopped.
  static Query parse(std::string_view text, QueryOptions options = {});

  Query(const Query&) = default;
  Query(Query&&) noexcept = default;
  Query& operator=(const Query&) = default;
  Query& operator=(Query&&) noexcept = default;
  ~Query();

  bool matches(const Group& g) const;
  const std::string& text() const noexcept { return text_; }
  // The parsed expression back as text, fully parenthesised (for tests and -v).
  std::string dump() const;

  struct Node;

 private:
  Query() = default;
  std::string text_;
  std::shared_ptr<const Node> root_;
};

// Several -q options: a group is selected when any query matches; an empty set
// selects everything.
class QuerySet {
 public:
  QuerySet() = default;
  explicit QuerySet(QueryOptions options) : options_(options) {}
  // Parses and adds one query (with the set's options); throws QueryParseError.
  void add(std::string_view text) { queries_.push_back(Query::parse(text, options_)); }
  // Adds the queries of a -Q file: one per line; blank lines and lines starting with
  // '#' are skipped. Throws QueryParseError whose message names the line and whose
  // pos is the offset within that line.
  void add_file_text(std::string_view text);
  bool empty() const noexcept { return queries_.empty(); }
  std::size_t size() const noexcept { return queries_.size(); }
  const std::vector<Query>& queries() const noexcept { return queries_; }
  bool matches(const Group& g) const;

 private:
  QueryOptions options_;
  std::vector<Query> queries_;
};

}  // namespace ringlog
