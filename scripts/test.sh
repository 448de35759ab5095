#!/usr/bin/env bash
# The test command: installs what is needed, builds, and runs every test suite:
#   1. the normal build (all tests),
#   2. a ThreadSanitizer build running the tests labelled "tsan",
#   3. an AddressSanitizer+UBSan build running the tests labelled "asan",
#   4. the libFuzzer targets for a bounded time each (clang).
# Usage: scripts/test.sh [--quick]   (--quick: normal build only)
# Environment: JOBS (parallel jobs, nproc), FUZZ_SECONDS (per fuzz target, 45).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

bash scripts/install-deps.sh

step() { printf '\n=== %s ===\n' "$*"; }

step "build (RelWithDebInfo)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$JOBS"
step "tests"
ctest --test-dir build -j "$JOBS" --output-on-failure --timeout 900

[ "$QUICK" = 1 ] && exit 0

# Builds only the test programs that carry a label, in a sanitizer build directory.
sanitized() {
  local kind=$1 label=$2 dir=$3
  step "$kind sanitizer build: tests labelled $label"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRINGLOG_SANITIZE="$kind" \
        -DRINGLOG_BUILD_BENCH=OFF >/dev/null
  local targets
  targets=$(ctest --test-dir "$dir" -L "$label" -N | sed -n 's/^ *Test *#[0-9]*: *\([^ ]*\).*/\1/p' | sort -u)
  # A test name is its program's target name, or program/case for scripted tests.
  local build_targets=()
  for t in $targets; do build_targets+=("${t%%/*}"); done
  cmake --build "$dir" -j "$JOBS" --target $(printf '%s\n' "${build_targets[@]}" | sort -u) ringlog
  ctest --test-dir "$dir" -L "$label" -j "$JOBS" --output-on-failure --timeout 1800
}
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" sanitized thread tsan build-tsan
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  sanitized address asan build-asan

if [ -d tests/fuzz ] && ls tests/fuzz/*.cpp >/dev/null 2>&1; then
  step "fuzz targets (libFuzzer, clang)"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DRINGLOG_BUILD_FUZZ=ON \
        -DRINGLOG_BUILD_TESTS=ON -DRINGLOG_BUILD_BENCH=OFF -DRINGLOG_BUILD_TOOLS=ON \
        -DRINGLOG_FUZZ_SECONDS="${FUZZ_SECONDS:-45}" >/dev/null
  cmake --build build-fuzz -j "$JOBS" --target fuzz_all
  ctest --test-dir build-fuzz -L fuzz -j "$JOBS" --output-on-failure --timeout 600
fi
step "all test suites passed"
