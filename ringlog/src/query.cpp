// The VSL query language: a small lexer, a recursive-descent parser (not > and > or)
// and an evaluator over transaction groups, with Varnish's semantics (vsl-query(7)).
// Hostile input must never crash it: nesting depth, query length and regex size are
// bounded, and regexes are PCRE2's (ringlog::Regex), which never recurses on the
// subject and stops at its limits, so long payloads cannot exhaust the stack.
#include "ringlog/query.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <variant>

#include "ringlog/regex.hpp"
#include "ringlog/text.hpp"

namespace ringlog {

namespace {

constexpr std::size_t kMaxQueryLen = 64 * 1024;
constexpr unsigned kMaxDepth = 256;  // nested parentheses and 'not's
constexpr std::size_t kMaxRegexLen = 4096;


// Glob with '*' anywhere, case-insensitive, iterative (no backtracking blow-up).
bool glob_match(std::string_view g, std::string_view s) noexcept {
  std::size_t gi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (gi < g.size() && g[gi] == '*') {
      star = gi++;
      mark = si;
    } else if (gi < g.size() && ascii_lower(g[gi]) == ascii_lower(s[si])) {
      ++gi;
      ++si;
    } else if (star != std::string_view::npos) {
      gi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (gi < g.size() && g[gi] == '*') ++gi;
  return gi == g.size();
}

}  // namespace

bool tag_glob_match(std::string_view glob, std::string_view name) noexcept { return glob_match(glob, name); }

// ---------------------------------------------------------------- errors, tag sets

QueryParseError::QueryParseError(std::size_t pos, std::string message)
    : std::runtime_error("position " + std::to_string(pos) + ": " + message), pos_(pos), message_(std::move(message)) {}

std::string QueryParseError::describe(std::string_view q) const {
  std::string out = "query error at position " + std::to_string(pos_) + ": " + message_ + "\n";
  // Show the query on one line (control bytes as '?') and a caret under the position.
  out += "  ";
  for (char c : q) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  out += "\n  ";
  out.append(std::min(pos_, q.size()), ' ');
  out += "^\n";
  return out;
}

TagSet TagSet::all() {
  TagSet s;
  for (unsigned t = 1; t < 255; ++t)
    if (is_valid_tag(static_cast<Tag>(t))) s.bits_.set(t);
  return s;
}

bool TagSet::add(std::string_view name) {
  if (name.find('*') == std::string_view::npos) {
    auto t = tag_by_name(name);
    if (!t) return false;
    bits_.set(std::uint8_t(*t));
    return true;
  }
  bool any = false;
  for (unsigned t = 1; t < 255; ++t) {
    Tag tag = static_cast<Tag>(t);
    if (!is_valid_tag(tag)) continue;
    if (glob_match(name, tag_name(tag))) {
      bits_.set(t);
      any = true;
    }
  }
  return any;
}

TagSet TagSet::parse(std::string_view list) {
  TagSet s;
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = list.find(',', start);
    std::string_view item = list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.empty()) throw std::invalid_argument("empty tag name in taglist '" + std::string(list) + "'");
    if (!s.add(item)) {
      if (item.find('*') != std::string_view::npos)
        throw std::invalid_argument("tag glob '" + std::string(item) + "' matches no tag");
      throw std::invalid_argument("unknown tag '" + std::string(item) + "'");
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return s;
}

// ---------------------------------------------------------------- the expression tree

enum class Op : std::uint8_t { none, eq, ne, lt, le, gt, ge, seq, sne, match, nomatch };

struct Query::Node {
  enum class Kind : std::uint8_t { and_, or_, not_, test } kind = Kind::test;
  std::shared_ptr<const Node> a, b;
  // A test.
  bool vxid = false;
  TagSet tags;
  std::string taglist_text;  // for dump()
  unsigned level = 0;        // 0: any level
  char level_mode = '=';     // '=', '+' (at least), '-' (at most)
  std::string prefix;        // record prefix before ':' (without it); empty: none
  bool has_prefix = false;
  unsigned field = 0;        // 1-based; 0: whole value
  Op op = Op::none;
  bool rhs_is_int = false;
  std::int64_t rhs_int = 0;
  double rhs_float = 0;
  std::string rhs_text;
  bool caseless = false;  // eq/ne ignore case (-C); the regex carries its own flag
  Regex re;
};

namespace {

using Node = Query::Node;

enum class T : std::uint8_t { end, lparen, rparen, lbrace, rbrace, lbracket, rbracket, colon, comma, op, word, string };

struct Token {
  T type = T::end;
  std::size_t pos = 0;
  std::string text;  // word/string contents, or the operator spelling
  Op op = Op::none;
};

bool is_special(char c) {
  switch (c) {
    case '(': case ')': case '{': case '}': case '[': case ']': case ':': case ',':
    case '=': case '!': case '<': case '>': case '~': case '"': case '\'':
      return true;
    default:
      return false;
  }
}
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::vector<Token> lex(std::string_view q) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < q.size()) {
    char c = q[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    Token t;
    t.pos = i;
    auto single = [&](T type) {
      t.type = type;
      t.text = std::string(1, c);
      ++i;
    };
    switch (c) {
      case '(': single(T::lparen); break;
      case ')': single(T::rparen); break;
      case '{': single(T::lbrace); break;
      case '}': single(T::rbrace); break;
      case '[': single(T::lbracket); break;
      case ']': single(T::rbracket); break;
      case ':': single(T::colon); break;
      case ',': single(T::comma); break;
      case '=':
        if (i + 1 < q.size() && q[i + 1] == '=') {
          t = Token{T::op, i, "==", Op::eq};
          i += 2;
        } else {
          throw QueryParseError(i, "expected '==' (a single '=' is not an operator)");
        }
        break;
      case '!':
        if (i + 1 < q.size() && q[i + 1] == '=') {
          t = Token{T::op, i, "!=", Op::ne};
          i += 2;
        } else if (i + 1 < q.size() && q[i + 1] == '~') {
          t = Token{T::op, i, "!~", Op::nomatch};
          i += 2;
        } else {
          throw QueryParseError(i, "expected '!=' or '!~' (use 'not' for negation)");
        }
        break;
      case '<':
      case '>': {
        bool eq = i + 1 < q.size() && q[i + 1] == '=';
        Op op = c == '<' ? (eq ? Op::le : Op::lt) : (eq ? Op::ge : Op::gt);
        t = Token{T::op, i, std::string(q.substr(i, eq ? 2 : 1)), op};
        i += eq ? 2 : 1;
        break;
      }
      case '~':
        t = Token{T::op, i, "~", Op::match};
        ++i;
        break;
      case '"':
      case '\'': {
        // Quoted string: backslash escapes the quote and itself; other escapes are
        // kept as written (so regexes like "\d" reach the regex compiler intact).
        char quote = c;
        std::size_t j = i + 1;
        std::string s;
        bool closed = false;
        while (j < q.size()) {
          char d = q[j];
          if (d == '\\' && j + 1 < q.size() && (q[j + 1] == quote || q[j + 1] == '\\')) {
            if (q[j + 1] == quote) s += quote;
            else s += "\\\\";  // keep an escaped backslash escaped for regexes
            j += 2;
            continue;
          }
          if (d == quote) {
            closed = true;
            break;
          }
          s += d;
          ++j;
        }
        if (!closed) throw QueryParseError(i, "unterminated string");
        t.type = T::string;
        t.text = std::move(s);
        i = j + 1;
        break;
      }
      default: {
        std::size_t j = i;
        while (j < q.size() && !is_space(q[j]) && !is_special(q[j])) ++j;
        t.type = T::word;
        t.text = std::string(q.substr(i, j - i));
        i = j;
        if (t.text == "eq") {
          t.type = T::op;
          t.op = Op::seq;
        } else if (t.text == "ne") {
          t.type = T::op;
          t.op = Op::sne;
        }
        break;
      }
    }
    out.push_back(std::move(t));
  }
  out.push_back(Token{T::end, q.size(), {}, Op::none});
  return out;
}

// Unescapes "\\\\" back to one backslash for non-regex uses of a string operand.
std::string plain_string(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool parse_int(std::string_view s, std::int64_t& v) {
  if (s.empty()) return false;
  std::string_view d = s;
  if (d.front() == '+') d.remove_prefix(1);
  auto [p, ec] = std::from_chars(d.data(), d.data() + d.size(), v);
  return ec == std::errc() && p == d.data() + d.size() && !d.empty();
}

bool parse_float(std::string_view s, double& v) {
  if (s.empty() || s.size() > 64) return false;
  std::string tmp(s);
  char* end = nullptr;
  errno = 0;
  v = std::strtod(tmp.c_str(), &end);
  if (end != tmp.c_str() + tmp.size() || errno == ERANGE || !std::isfinite(v)) return false;
  // strtod accepts hex floats, inf and nan; the query language only has decimals.
  for (char c : tmp)
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')) return false;
  return true;
}

// The offset in the query text of byte `offset` of a token's text: a quoted string
// starts after its quote, and an escaped quote is two bytes of the query for one of
// the text (an escaped backslash stays two bytes in both).
std::size_t source_pos(std::string_view q, const Token& t, std::size_t offset) {
  if (t.type != T::string) return std::min(t.pos + offset, q.size());
  const char quote = q[t.pos];
  std::size_t j = t.pos + 1, k = 0;
  while (k < offset && j < q.size()) {
    if (q[j] == '\\' && j + 1 < q.size() && q[j + 1] == quote) {
      j += 2;
      k += 1;
    } else if (q[j] == '\\' && j + 1 < q.size() && q[j + 1] == '\\') {
      j += 2;
      k += 2;
    } else {
      ++j;
      ++k;
    }
  }
  return std::min(j, q.size());
}

class Parser {
 public:
  Parser(std::string_view q, QueryOptions options) : q_(q), options_(options), toks_(lex(q)) {}

  std::shared_ptr<const Node> parse() {
    if (peek().type == T::end) throw QueryParseError(peek().pos, "empty query");
    auto n = parse_or(0);
    if (peek().type != T::end) {
      const Token& t = peek();
      if (t.type == T::rparen) throw QueryParseError(t.pos, "unbalanced ')'");
      throw QueryParseError(t.pos, "expected 'and', 'or' or the end of the query, got '" + t.text + "'");
    }
    return n;
  }

 private:
  const Token& peek() const { return toks_[i_]; }
  const Token& take() { return toks_[i_ < toks_.size() - 1 ? i_++ : i_]; }
  bool is_word(const char* w) const { return peek().type == T::word && peek().text == w; }

  void check_depth(unsigned depth) const {
    if (depth > kMaxDepth) throw QueryParseError(peek().pos, "query nested too deeply");
  }

  std::shared_ptr<const Node> parse_or(unsigned depth) {
    check_depth(depth);
    auto left = parse_and(depth);
    while (is_word("or")) {
      take();
      auto right = parse_and(depth);
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::or_;
      n->a = std::move(left);
      n->b = std::move(right);
      left = std::move(n);
    }
    return left;
  }

  std::shared_ptr<const Node> parse_and(unsigned depth) {
    check_depth(depth);
    auto left = parse_not(depth);
    while (is_word("and")) {
      take();
      auto right = parse_not(depth);
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::and_;
      n->a = std::move(left);
      n->b = std::move(right);
      left = std::move(n);
    }
    return left;
  }

  std::shared_ptr<const Node> parse_not(unsigned depth) {
    check_depth(depth);
    if (is_word("not")) {
      take();
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::not_;
      n->a = parse_not(depth + 1);
      return n;
    }
    if (peek().type == T::lparen) {
      std::size_t open = take().pos;
      auto inner = parse_or(depth + 1);
      if (peek().type != T::rparen)
        throw QueryParseError(peek().type == T::end ? peek().pos : peek().pos,
                              "expected ')' to close the '(' at position " + std::to_string(open));
      take();
      return inner;
    }
    return parse_test();
  }

  std::shared_ptr<const Node> parse_test() {
    auto n = std::make_shared<Node>();
    const Token& first = peek();
    if (first.type == T::end) throw QueryParseError(first.pos, "expected a record test, got the end of the query");
    if (first.type == T::lbrace) parse_level(*n);
    const Token& t = peek();
    if (t.type == T::word && (t.text == "and" || t.text == "or" || t.text == "not"))
      throw QueryParseError(t.pos, "expected a record test, got '" + t.text + "'");
    if (t.type == T::word && t.text == "vxid") {
      take();
      n->vxid = true;
    } else if (t.type == T::word) {
      parse_taglist(*n);
    } else {
      throw QueryParseError(t.pos, t.type == T::end ? "expected a tag name, got the end of the query"
                                                    : "expected a tag name, got '" + t.text + "'");
    }
    if (!n->vxid && peek().type == T::colon) {
      std::size_t cpos = take().pos;
      const Token& p = peek();
      if (p.type != T::word && p.type != T::string)
        throw QueryParseError(p.type == T::end ? cpos + 1 : p.pos, "expected a record prefix after ':'");
      n->prefix = p.type == T::string ? plain_string(p.text) : p.text;
      n->has_prefix = true;
      take();
    }
    if (!n->vxid && peek().type == T::lbracket) {
      take();
      const Token& f = peek();
      std::int64_t v = 0;
      if (f.type != T::word || !parse_int(f.text, v) || v < 1 || v > 1000000)
        throw QueryParseError(f.pos, "expected a field number (1 or more) inside '[ ]'");
      n->field = unsigned(v);
      take();
      if (peek().type != T::rbracket) throw QueryParseError(peek().pos, "expected ']' after the field number");
      take();
    }
    if (peek().type != T::op) {
      if (n->vxid) throw QueryParseError(peek().pos, "'vxid' needs a numeric comparison (== != < <= > >=)");
      return n;  // a bare record selection: true when such a record exists
    }
    const Token& opt = take();
    n->op = opt.op;
    const Token& rhs = peek();
    if (rhs.type != T::word && rhs.type != T::string)
      throw QueryParseError(rhs.pos, "expected an operand after '" + opt.text + "'");
    switch (n->op) {
      case Op::eq: case Op::ne: case Op::lt: case Op::le: case Op::gt: case Op::ge: {
        if (rhs.type == T::word && parse_int(rhs.text, n->rhs_int)) {
          n->rhs_is_int = true;
          n->rhs_float = double(n->rhs_int);
        } else if (rhs.type == T::word && !n->vxid && parse_float(rhs.text, n->rhs_float)) {
          n->rhs_is_int = false;
        } else {
          throw QueryParseError(rhs.pos, n->vxid ? "'vxid' compares with an integer, got '" + rhs.text + "'"
                                                 : "'" + opt.text + "' compares numbers; got '" + rhs.text +
                                                       "' (use eq/ne for strings)");
        }
        break;
      }
      case Op::seq:
      case Op::sne:
        if (n->vxid) throw QueryParseError(opt.pos, "'vxid' needs a numeric comparison (== != < <= > >=)");
        n->rhs_text = rhs.type == T::string ? plain_string(rhs.text) : rhs.text;
        n->caseless = options_.caseless;
        break;
      case Op::match:
      case Op::nomatch: {
        if (n->vxid) throw QueryParseError(opt.pos, "'vxid' needs a numeric comparison (== != < <= > >=)");
        n->rhs_text = rhs.text;
        if (n->rhs_text.size() > kMaxRegexLen) throw QueryParseError(rhs.pos, "regular expression too long");
        try {
          n->re = Regex::compile(n->rhs_text, RegexOptions{.caseless = options_.caseless});
        } catch (const RegexError& e) {
          throw QueryParseError(source_pos(q_, rhs, e.offset()), "bad regular expression: " + e.message());
        }
        break;
      }
      case Op::none: break;
    }
    take();
    return n;
  }

  void parse_level(Node& n) {
    take();  // '{'
    const Token& t = peek();
    std::string_view s = t.type == T::word ? std::string_view(t.text) : std::string_view();
    char mode = '=';
    if (!s.empty() && (s.back() == '+' || s.back() == '-')) {
      mode = s.back();
      s.remove_suffix(1);
    }
    std::int64_t v = 0;
    if (t.type != T::word || !parse_int(s, v) || v < 0 || v > 1000 || s.front() == '+')
      throw QueryParseError(t.pos, "expected a level: {N}, {N+} or {N-}");
    n.level = unsigned(v);
    n.level_mode = mode;
    take();
    if (peek().type != T::rbrace) throw QueryParseError(peek().pos, "expected '}' after the level");
    take();
  }

  void parse_taglist(Node& n) {
    for (;;) {
      const Token& t = peek();
      if (t.type != T::word) throw QueryParseError(t.pos, "expected a tag name after ','");
      if (!n.tags.add(t.text)) {
        if (t.text.find('*') != std::string::npos)
          throw QueryParseError(t.pos, "tag glob '" + t.text + "' matches no tag");
        throw QueryParseError(t.pos, "unknown tag '" + t.text + "'");
      }
      if (!n.taglist_text.empty()) n.taglist_text += ',';
      n.taglist_text += t.text;
      take();
      if (peek().type != T::comma) break;
      take();
    }
  }

  std::string_view q_;
  QueryOptions options_;
  std::vector<Token> toks_;
  std::size_t i_ = 0;
};

// ---------------------------------------------------------------- evaluation

bool level_ok(const Node& n, unsigned level) {
  if (n.level == 0 && n.level_mode == '=') return true;
  switch (n.level_mode) {
    case '+': return level >= n.level;
    case '-': return level <= n.level;
    default: return level == n.level;
  }
}

// The value a test looks at: the payload, after "prefix:" when there is a prefix,
// then the field-th whitespace-separated field. False when it does not apply.
bool select_value(const Node& n, std::string_view payload, std::string_view& out) {
  std::string_view v = payload;
  if (n.has_prefix) {
    if (v.size() <= n.prefix.size() || v[n.prefix.size()] != ':' || !iequals(v.substr(0, n.prefix.size()), n.prefix))
      return false;
    v.remove_prefix(n.prefix.size() + 1);
    while (!v.empty() && is_space(v.front())) v.remove_prefix(1);
  }
  if (n.field > 0) {
    unsigned f = 0;
    std::size_t i = 0;
    for (;;) {
      while (i < v.size() && is_space(v[i])) ++i;
      if (i >= v.size()) return false;
      std::size_t j = i;
      while (j < v.size() && !is_space(v[j])) ++j;
      if (++f == n.field) {
        v = v.substr(i, j - i);
        break;
      }
      i = j;
    }
  }
  out = v;
  return true;
}

template <class V>
bool compare(Op op, V a, V b) {
  switch (op) {
    case Op::eq: return a == b;
    case Op::ne: return a != b;
    case Op::lt: return a < b;
    case Op::le: return a <= b;
    case Op::gt: return a > b;
    case Op::ge: return a >= b;
    default: return false;
  }
}

bool numeric_test(const Node& n, std::string_view v) {
  while (!v.empty() && is_space(v.back())) v.remove_suffix(1);
  std::int64_t i = 0;
  if (n.rhs_is_int && parse_int(v, i)) return compare(n.op, i, n.rhs_int);
  double d = 0;
  if (!parse_float(v, d)) return false;  // not a number: no match (as Varnish)
  return compare(n.op, d, n.rhs_float);
}

bool test_value(const Node& n, std::string_view v) {
  switch (n.op) {
    case Op::none: return true;
    case Op::seq: return n.caseless ? iequals(v, n.rhs_text) : v == n.rhs_text;
    case Op::sne: return n.caseless ? !iequals(v, n.rhs_text) : v != n.rhs_text;
    // As Varnish: a search that stops at a PCRE2 limit counts as a match for '~' and
    // as no match for '!~' (only a definite "no match" satisfies '!~').
    case Op::match: return n.re.search(v) != Regex::Result::no_match;
    case Op::nomatch: return n.re.search(v) == Regex::Result::no_match;
    default: return numeric_test(n, v);
  }
}

bool eval_test(const Node& n, const Group& g) {
  for (const Transaction* t : g.txns) {
    if (!level_ok(n, t->level)) continue;
    if (n.vxid) {
      if (n.rhs_is_int ? compare(n.op, std::int64_t(t->vxid), n.rhs_int)
                       : compare(n.op, double(t->vxid), n.rhs_float))
        return true;
      continue;
    }
    for (const HeldRecord& r : t->records) {
      if (!n.tags.contains(r.tag)) continue;
      std::string_view v;
      if (!select_value(n, t->payload(r), v)) continue;
      if (test_value(n, v)) return true;
    }
  }
  return false;
}

bool eval(const Node& n, const Group& g) {
  switch (n.kind) {
    case Node::Kind::and_: return eval(*n.a, g) && eval(*n.b, g);
    case Node::Kind::or_: return eval(*n.a, g) || eval(*n.b, g);
    case Node::Kind::not_: return !eval(*n.a, g);
    case Node::Kind::test: return eval_test(n, g);
  }
  return false;
}

const char* op_text(Op op) {
  switch (op) {
    case Op::eq: return "==";
    case Op::ne: return "!=";
    case Op::lt: return "<";
    case Op::le: return "<=";
    case Op::gt: return ">";
    case Op::ge: return ">=";
    case Op::seq: return "eq";
    case Op::sne: return "ne";
    case Op::match: return "~";
    case Op::nomatch: return "!~";
    case Op::none: break;
  }
  return "";
}

void dump(const Node& n, std::string& out) {
  switch (n.kind) {
    case Node::Kind::and_:
    case Node::Kind::or_:
      out += '(';
      dump(*n.a, out);
      out += n.kind == Node::Kind::and_ ? " and " : " or ";
      dump(*n.b, out);
      out += ')';
      return;
    case Node::Kind::not_:
      out += "(not ";
      dump(*n.a, out);
      out += ')';
      return;
    case Node::Kind::test: break;
  }
  if (n.level != 0 || n.level_mode != '=') {
    out += '{' + std::to_string(n.level);
    if (n.level_mode != '=') out += n.level_mode;
    out += '}';
  }
  out += n.vxid ? "vxid" : n.taglist_text;
  if (n.has_prefix) out += ':' + n.prefix;
  if (n.field) out += '[' + std::to_string(n.field) + ']';
  if (n.op == Op::none) return;
  out += ' ';
  out += op_text(n.op);
  out += ' ';
  if (n.op == Op::seq || n.op == Op::sne || n.op == Op::match || n.op == Op::nomatch) {
    out += '"' + n.rhs_text + '"';
  } else if (n.rhs_is_int) {
    out += std::to_string(n.rhs_int);
  } else {
    char b[64];
    std::snprintf(b, sizeof b, "%g", n.rhs_float);
    out += b;
  }
}

}  // namespace

Query::~Query() = default;

Query Query::parse(std::string_view text, QueryOptions options) {
  if (text.size() > kMaxQueryLen) throw QueryParseError(kMaxQueryLen, "query too long");
  Query q;
  q.text_ = std::string(text);
  q.root_ = Parser(text, options).parse();
  return q;
}

bool Query::matches(const Group& g) const { return root_ && eval(*root_, g); }

std::string Query::dump() const {
  std::string out;
  if (root_) ringlog::dump(*root_, out);
  return out;
}

void QuerySet::add_file_text(std::string_view text) {
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view trimmed = line;
    while (!trimmed.empty() && is_space(trimmed.front())) trimmed.remove_prefix(1);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    try {
      add(line);
    } catch (const QueryParseError& e) {
      throw QueryParseError(e.pos(), "line " + std::to_string(line_no) + ": " + e.message());
    }
  }
}

bool QuerySet::matches(const Group& g) const {
  if (queries_.empty()) return true;
  for (const Query& q : queries_)
    if (q.matches(g)) return true;
  return false;
}

}  // namespace ringlog
