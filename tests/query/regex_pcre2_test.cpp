// ringlog::Regex, the PCRE2 wrapper every regular expression goes through: Varnish's
// syntax and semantics (search anywhere, (?i), caseless), PCRE2's message and offset
// for a bad pattern, long subjects that neither recurse nor hang (JIT and
// interpreter alike), and one Regex searched from several threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "ringlog/regex.hpp"

namespace {

using ringlog::Regex;
using ringlog::RegexError;
using ringlog::RegexOptions;
using Result = Regex::Result;

// Both engines: the JIT where the platform has one, and the interpreter it falls back to.
class RegexEngines : public ::testing::TestWithParam<bool> {
 protected:
  Regex re(const std::string& p, bool caseless = false) {
    return Regex::compile(p, RegexOptions{.caseless = caseless, .jit = GetParam()});
  }
};

INSTANTIATE_TEST_SUITE_P(Jit, RegexEngines, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "jit" : "interpreter"; });

TEST_P(RegexEngines, SearchesAnywhereInTheSubject) {
  EXPECT_TRUE(re("login").matches("/account/login?next=/"));
  EXPECT_TRUE(re("^/account").matches("/account/login"));
  EXPECT_FALSE(re("^login").matches("/account/login"));
  EXPECT_FALSE(re("logout").matches("/account/login"));
  EXPECT_TRUE(re("").matches(""));
  EXPECT_TRUE(re("x*").matches(std::string_view()));
  // Bytes after a NUL and non-UTF-8 bytes are part of the subject.
  EXPECT_TRUE(re("\\xff!").matches(std::string("a\0b\xff!", 5)));
  EXPECT_FALSE(Regex().matches("anything"));
}

TEST_P(RegexEngines, PerlSyntaxAndCaselessness) {
  EXPECT_TRUE(re("(?i)/LOGIN").matches("/login"));
  EXPECT_FALSE(re("/LOGIN").matches("/login"));
  EXPECT_TRUE(re("/LOGIN", true).matches("/login"));
  EXPECT_TRUE(re("\\d{3}\\s\\w+").matches("HTTP/1.1 404 Not"));
  EXPECT_TRUE(re("(?<=Host: )example\\.com$").matches("Host: example.com"));
  EXPECT_TRUE(re("^(?:GET|HEAD)\\b").matches("HEAD"));
  EXPECT_EQ(re("(?-i)A", true).search("a"), Result::no_match);  // inline flags override -C
}

TEST(Regex, ABadPatternGivesPcre2sMessageAndOffset) {
  try {
    Regex::compile("ab(cd");
    FAIL() << "compiled";
  } catch (const RegexError& e) {
    EXPECT_EQ(e.offset(), 5u);
    EXPECT_NE(e.message().find("missing closing parenthesis"), std::string::npos) << e.message();
    EXPECT_NE(std::string(e.what()).find("at offset 5"), std::string::npos) << e.what();
  }
  try {
    Regex::compile("a{2,1}");
    FAIL() << "compiled";
  } catch (const RegexError& e) {
    EXPECT_EQ(e.offset(), 5u);
    EXPECT_NE(e.message().find("out of order"), std::string::npos) << e.message();
  }
  EXPECT_THROW(Regex::compile("[z-a]"), RegexError);
  EXPECT_THROW(Regex::compile("(?<"), RegexError);
}

// A 64 KiB header value against (a|b)*c: every iteration of the group is a
// backtracking point, which a recursive matcher would take from the machine stack.
TEST_P(RegexEngines, A64KiBValueAgainstAlternationNeitherRecursesNorFails) {
  std::string v = "X-Pad: ";
  while (v.size() < 64 * 1024) v += (v.size() & 1) ? 'a' : 'b';
  const Regex r = re("(a|b)*c");
  EXPECT_EQ(r.search(v), Result::no_match);
  EXPECT_EQ(r.search(v + "c"), Result::match);
  EXPECT_EQ(re("^X-Pad: (a|b)*c$").search(v + "c"), Result::match);
  EXPECT_EQ(re("^X-Pad: (a|b)*$").search(v), Result::match);
  EXPECT_EQ(re("^X-Pad: (a|b)*$").search(v + "c"), Result::no_match);
  std::string as(64 * 1024, 'a');
  EXPECT_EQ(r.search(as), Result::no_match);
  EXPECT_EQ(r.search(as + "c"), Result::match);
}

// Exponential backtracking stops at the match limit: an error, not a hang or a crash.
TEST_P(RegexEngines, CatastrophicBacktrackingStopsAtTheLimit) {
  std::string v(64 * 1024, 'a');
  v += '!';
  EXPECT_EQ(re("^(a+)+$").search(v), Result::error);
  EXPECT_EQ(re("^(?:a|aa)+$").search(std::string(200, 'a') + "!"), Result::error);
  // The same patterns still answer where the answer is cheap.
  EXPECT_EQ(re("^(a+)+$").search(std::string(64 * 1024, 'a')), Result::match);
}

TEST(Regex, OneRegexSearchedFromManyThreads) {
  const Regex r = Regex::compile("^/(api|static)/v[0-9]+/");
  std::atomic<int> wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        bool even = (i + t) % 2 == 0;
        std::string s = even ? "/api/v" + std::to_string(i) + "/x" : "/apix/v" + std::to_string(i);
        if (r.matches(s) != even) wrong.fetch_add(1, std::memory_order_relaxed);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Regex, CopiesShareTheCompiledPattern) {
  Regex a = Regex::compile("b+", RegexOptions{.caseless = true});
  Regex b = a;
  EXPECT_EQ(b.pattern(), "b+");
  EXPECT_EQ(a.jit(), b.jit());
  a = Regex();
  EXPECT_TRUE(b.matches("aBBa"));
  EXPECT_TRUE(a.empty());
}

}  // namespace
