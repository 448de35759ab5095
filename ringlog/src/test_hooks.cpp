// Test-only (compiled into the ringlog_hooks library variant, never into ringlog): the
// named write-path steps of test_hooks.hpp may SIGKILL the process, so that the crash
// torture test can kill writers at each step. Armed by test_hook_arm(spec) or, on the
// first hook, by the environment variable RINGLOG_TEST_KILL. spec:
//   "STEP:N"   die the Nth time STEP is reached (N >= 1)
//   "STEP:pX"  die at each hit of STEP with probability X (0 < X <= 1)
//   STEP "*" matches every step; "" disarms.
// test_hook_observe(fn) also calls fn(step) at every step, before the kill check, so
// that a test can hold a writer at a step until something else has happened.
#ifdef RINGLOG_TEST_HOOKS
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>

#include "test_hooks.hpp"

namespace ringlog::detail {

namespace {
struct KillSpec {
  char step[32] = {};
  double probability = 0;          // > 0: random mode
  std::atomic<long> countdown{0};  // > 0: die when it reaches 0
  std::atomic<bool> armed{false};
};
KillSpec g_spec;
std::atomic<void (*)(const char*)> g_observer{nullptr};
std::once_flag g_env_once;

void arm(const char* spec) noexcept {
  g_spec.armed.store(false, std::memory_order_relaxed);
  if (!spec || !*spec) return;
  const char* colon = std::strchr(spec, ':');
  if (!colon || colon == spec || static_cast<std::size_t>(colon - spec) >= sizeof g_spec.step) return;
  std::memset(g_spec.step, 0, sizeof g_spec.step);
  std::memcpy(g_spec.step, spec, static_cast<std::size_t>(colon - spec));
  if (colon[1] == 'p') {
    g_spec.probability = std::strtod(colon + 2, nullptr);
    g_spec.countdown.store(0, std::memory_order_relaxed);
    if (!(g_spec.probability > 0)) return;
  } else {
    g_spec.probability = 0;
    long n = std::strtol(colon + 1, nullptr, 10);
    if (n < 1) return;
    g_spec.countdown.store(n, std::memory_order_relaxed);
  }
  g_spec.armed.store(true, std::memory_order_release);
}
}  // namespace

void test_hook_arm(const char* spec) noexcept {
  std::call_once(g_env_once, [] {});
  arm(spec);
}

void test_hook_observe(void (*fn)(const char*)) noexcept { g_observer.store(fn, std::memory_order_release); }

void test_hook(const char* step) noexcept {
  if (auto fn = g_observer.load(std::memory_order_acquire)) fn(step);
  std::call_once(g_env_once, [] { arm(std::getenv("RINGLOG_TEST_KILL")); });
  if (!g_spec.armed.load(std::memory_order_acquire)) return;
  if (!(g_spec.step[0] == '*' && g_spec.step[1] == 0) && std::strcmp(step, g_spec.step) != 0) return;
  bool die;
  if (g_spec.probability > 0) {
    thread_local std::minstd_rand rng(static_cast<unsigned>(::getpid()) * 2654435761u ^
                                      static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(&step)));
    die = std::uniform_real_distribution<double>(0, 1)(rng) < g_spec.probability;
  } else {
    die = g_spec.countdown.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  if (die) ::kill(::getpid(), SIGKILL);
}

}  // namespace ringlog::detail
#endif  // RINGLOG_TEST_HOOKS
