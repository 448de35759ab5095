#!/usr/bin/env bash
# The ring scaling sweep in one command: Release build in build-bench/, bench_ring over
# writer counts (ringlog, the global-mutex ring, LTTng-UST, spdlog async, in the same
# run; writers in one process and in two), JSON results and the plot
# bench/ring-scaling.png. Never run as a test: it measures, it does not judge.
#
# Usage: scripts/bench-scaling.sh [--threads 1,2,4,...] [--procs2 1,2,4,...] [--rounds N]
#                                 [--queues N] [--json FILE] [--png FILE] [-- bench_ring options]
# Defaults: threads 1,2,4,8,16, extended by powers of two up to 2 x nproc; 2-process
# cases with 1,2,4,8 threads each; 5 rounds (medians are reported).
# Environment: RINGLOG_BENCH_* (see bench_ring --help), JOBS (build jobs).
# Run it at normal priority under the machine's benchmark lock:
#   flock /tmp/ringlog-bench.lock scripts/bench-scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."

default_threads() {
  local list="1,2,4,8,16" t=32 max=$(( 2 * $(nproc) ))
  while [ "$t" -le "$max" ]; do list="$list,$t"; t=$(( t * 2 )); done
  echo "$list"
}

THREADS=${RINGLOG_BENCH_THREADS:-$(default_threads)}
PROCS2=${RINGLOG_BENCH_PROCS2-1,2,4,8}
ROUNDS=5
JSON=build-bench/ring-scaling.json
PNG=bench/ring-scaling.png
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --threads) THREADS=$2; shift 2 ;;
    --procs2) PROCS2=$2; shift 2 ;;
    --rounds|--repetitions) ROUNDS=$2; shift 2 ;;
    --queues) export RINGLOG_BENCH_QUEUES=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    --png) PNG=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
done

cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DRINGLOG_BUILD_TESTS=OFF -DRINGLOG_BUILD_TOOLS=OFF >/dev/null
cmake --build build-bench -j "${JOBS:-$(nproc)}" --target bench_ring

echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1), kernel $(uname -r)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)   nice: $(nice)   threads: $THREADS   2 processes x: $PROCS2   rounds: $ROUNDS"
mkdir -p "$(dirname "$JSON")" "$(dirname "$PNG")"
build-bench/bench/bench_ring --threads "$THREADS" --procs2 "$PROCS2" --rounds "$ROUNDS" --json "$JSON" "${EXTRA[@]}"
# The plot needs matplotlib (Debian: python3-matplotlib); a pyenv/venv python3 first on
# PATH may not have it, so fall back to the system interpreter.
PY=python3
"$PY" -c 'import matplotlib' 2>/dev/null || PY=/usr/bin/python3
"$PY" bench/plot_ring.py "$JSON" -o "$PNG"
