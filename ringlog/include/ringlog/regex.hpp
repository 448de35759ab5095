// Regular expressions as Varnish has them: PCRE2 (Perl syntax, `(?i)` and friends),
// searched anywhere in the subject, JIT-compiled where the platform allows and
// interpreted otherwise. Every regex of the library and the tools (queries, -I/-X,
// purges) goes through this one class. A pattern is compiled once; matching never
// allocates on the hot path and never recurses on the subject: bounded PCRE2 limits
// make a pathological pattern fail with Result::error instead of hanging or crashing.
// Thread safety: a compiled Regex is immutable and may be searched from any number of
// threads at once (each thread reuses its own match data).
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

struct pcre2_real_code_8;

namespace ringlog {

// A pattern PCRE2 refused: its message and the 0-based offset in the pattern where
// PCRE2 stopped.
class RegexError : public std::runtime_error {
 public:
  RegexError(std::size_t offset, std::string message);
  std::size_t offset() const noexcept { return offset_; }
  const std::string& message() const noexcept { return message_; }

 private:
  std::size_t offset_;
  std::string message_;
};

struct RegexOptions {
  bool caseless = false;  // PCRE2_CASELESS (the tools' -C)
  bool jit = true;        // false: always interpret (tests of the fallback path)
};

class Regex {
 public:
  enum class Result { no_match, match, error };

  // Throws RegexError.
  static Regex compile(std::string_view pattern, RegexOptions options = {});

  Regex() = default;  // matches nothing

  // Is there a match anywhere in subject? error: a PCRE2 limit was reached (match
  // steps, backtracking depth, heap or JIT stack), the answer is unknown.
  Result search(std::string_view subject) const noexcept;
  bool matches(std::string_view subject) const noexcept { return search(subject) == Result::match; }

  bool empty() const noexcept { return !code_; }
  bool jit() const noexcept { return jit_; }  // compiled to machine code
  const std::string& pattern() const noexcept { return pattern_; }

  // The limits every search runs under (per start position, as PCRE2 counts them).
  static constexpr unsigned kMatchLimit = 1'000'000;      // backtracking steps
  static constexpr unsigned kDepthLimit = 1'000'000;      // nested backtracking points (interpreter)
  static constexpr unsigned kHeapLimitKiB = 64 * 1024;    // the interpreter's backtracking frames
  static constexpr std::size_t kJitStackMax = 8u << 20;   // the JIT's backtracking stack

 private:
  std::shared_ptr<const pcre2_real_code_8> code_;
  std::string pattern_;
  bool jit_ = false;
};

}  // namespace ringlog
