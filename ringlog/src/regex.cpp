// PCRE2 behind ringlog::Regex (see regex.hpp). What a search needs besides the
// compiled code (match data, a match context carrying the limits, the JIT stack) is
// made once per thread and reused, so a search allocates nothing and concurrent
// searches of one Regex share nothing mutable. It must never let PCRE2 run unbounded.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "ringlog/regex.hpp"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace ringlog {

namespace {

static_assert(std::is_same_v<pcre2_code, pcre2_real_code_8>, "regex.hpp names PCRE2's 8-bit code type");

constexpr std::size_t kJitStackStart = 32 * 1024;

// One per thread, made on its first search: the ovector holds one pair (a search only
// asks whether there is a match; a too-small ovector still reports one).
struct Scratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  Scratch() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (!context) return;
    pcre2_set_match_limit(context, Regex::kMatchLimit);
    pcre2_set_depth_limit(context, Regex::kDepthLimit);
    pcre2_set_heap_limit(context, Regex::kHeapLimitKiB);
    // Without a stack of its own the JIT uses 32 KiB of the machine stack and fails a
    // long subject; this one grows on demand up to its limit.
    jit_stack = pcre2_jit_stack_create(kJitStackStart, Regex::kJitStackMax, nullptr);
    if (jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~Scratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  bool ok() const noexcept { return data && context; }
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

bool jit_available() {
  static const bool yes = [] {
    std::uint32_t v = 0;
    return pcre2_config(PCRE2_CONFIG_JIT, &v) >= 0 && v != 0;
  }();
  return yes;
}

std::string error_text(int code) {
  PCRE2_UCHAR buf[256];
  int n = pcre2_get_error_message(code, buf, sizeof buf);
  if (n < 0) return "PCRE2 error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buf), std::size_t(n));
}

}  // namespace

RegexError::RegexError(std::size_t offset, std::string message)
    : std::runtime_error(message + " (at offset " + std::to_string(offset) + ")"),
      offset_(offset),
      message_(std::move(message)) {}

Regex Regex::compile(std::string_view pattern, RegexOptions options) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  std::uint32_t flags = options.caseless ? PCRE2_CASELESS : 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), flags, &code,
                                 &offset, nullptr);
  if (!re) throw RegexError(std::min<std::size_t>(offset, pattern.size()), error_text(code));
  Regex r;
  r.code_ = std::shared_ptr<const pcre2_code>(re, [](const pcre2_code* c) { pcre2_code_free(const_cast<pcre2_code*>(c)); });
  r.pattern_ = std::string(pattern);
  // Where the JIT is missing (or refuses the pattern, e.g. out of executable memory)
  // the interpreter runs it: same answers, same limits.
  if (options.jit && jit_available()) r.jit_ = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
  return r;
}

Regex::Result Regex::search(std::string_view subject) const noexcept {
  if (!code_) return Result::no_match;
  Scratch& s = scratch();
  if (!s.ok()) return Result::error;
  // PCRE2 10.42 refuses a null subject even when it is empty.
  auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data() ? subject.data() : "");
  int rc = jit_ ? pcre2_jit_match(code_.get(), subj, subject.size(), 0, 0, s.data, s.context)
                : pcre2_match(code_.get(), subj, subject.size(), 0, PCRE2_NO_JIT, s.data, s.context);
  if (rc >= 0) return Result::match;  // 0: matched, the ovector was too small for the groups
  if (rc == PCRE2_ERROR_NOMATCH) return Result::no_match;
  return Result::error;  // PCRE2_ERROR_MATCHLIMIT, _DEPTHLIMIT, _HEAPLIMIT, _JIT_STACKLIMIT, _NOMEMORY
}

}  // namespace ringlog
