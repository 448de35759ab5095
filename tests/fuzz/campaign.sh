#!/usr/bin/env bash
# A local fuzzing campaign for one libFuzzer target, bounded by CPU time rather than
# wall time (the machine is shared: a wall-clock budget says nothing about how much
# fuzzing was done). Never run by CI. Stops the fuzzer with SIGINT (so that it prints
# its final stats) once it has used CPU_SECONDS of CPU, then minimizes what it found
# together with the committed corpus into a fresh directory.
#
# Usage: tests/fuzz/campaign.sh BUILD_DIR TARGET [CPU_SECONDS] [extra libFuzzer flags]
#   e.g. tests/fuzz/campaign.sh build-fuzz fuzz_ring 600
# Output in BUILD_DIR/campaign/TARGET/: corpus/ (everything found), min/ (the minimized
# corpus: copy it over tests/fuzz/corpus/TARGET), crashes/ (artifacts), fuzz.log,
# merge.log, time.txt (/usr/bin/time -v of the fuzzing run).
# Environment: NICE (niceness, 10), FORK (libFuzzer -fork=N with -ignore_crashes=1, to
# keep going past a crash already known; 0 = off).
set -euo pipefail
build=$1 target=$2 cpu=${3:-600}
shift $(( $# >= 3 ? 3 : $# ))
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$build/tests/fuzz/$target
seeds=$root/tests/fuzz/corpus/$target
out=$build/campaign/$target
[ -x "$bin" ] || { echo "campaign: no fuzz target $bin (build with RINGLOG_BUILD_FUZZ=ON)" >&2; exit 2; }
mkdir -p "$out/corpus" "$out/crashes"
rm -rf "$out/min"
mkdir -p "$out/min"
flags=(-print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$out/crashes/")
[ "${FORK:-0}" != 0 ] && flags+=(-fork="$FORK" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

# CPU seconds used by a process and its children (waited and still running).
cpu_of() {
  local pid=$1 total=0 t
  t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pid/stat" 2>/dev/null) || return 1
  total=$t
  for c in $(cat "/proc/$pid/task/"*/children 2>/dev/null); do
    t=$(awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null) || continue
    total=$((total + t))
  done
  echo $(( total / $(getconf CLK_TCK) ))
}

nice -n "${NICE:-10}" /usr/bin/time -v -o "$out/time.txt" \
  "$bin" "${flags[@]}" "$@" "$out/corpus" "$seeds" >"$out/fuzz.log" 2>&1 &
timer=$!
# The fuzzer is the time command's child.
fuzzer=""
while [ -z "$fuzzer" ] && kill -0 "$timer" 2>/dev/null; do
  fuzzer=$(cat "/proc/$timer/task/"*/children 2>/dev/null | awk '{print $1}')
  [ -n "$fuzzer" ] || sleep 1
done
while kill -0 "$timer" 2>/dev/null; do
  used=$(cpu_of "$fuzzer") || break
  if [ "$used" -ge "$cpu" ]; then kill -INT "$fuzzer" 2>/dev/null || true; break; fi
  sleep 5
done
wait "$timer" || true
echo "campaign: $target used $(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.1f", u+s}' "$out/time.txt") CPU seconds"
nice -n "${NICE:-10}" "$bin" -merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=2048 "$out/min" "$seeds" "$out/corpus" >"$out/merge.log" 2>&1 || {
  echo "campaign: merge failed, see $out/merge.log" >&2; exit 1; }
echo "campaign: minimized corpus $(ls "$out/min" | wc -l) files, $(du -sb "$out/min" | cut -f1) bytes in $out/min"
grep -E '^#[0-9]+ +(DONE|INITED|pulse|NEW|REDUCE)' "$out/fuzz.log" | tail -1 || true
grep -E '^stat::' "$out/fuzz.log" || true
ls "$out/crashes"
