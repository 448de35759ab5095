#!/usr/bin/env bash
# The ring scaling sweep in one command: Release build in build-bench/, bench_ring over
# a list of writer thread counts (ringlog and the global-mutex baseline), JSON results
# and the plot bench/ring-scaling.png. Never run as a test: it measures, it does not judge.
#
# Usage: scripts/bench-scaling.sh [--threads 1,2,4,...] [--repetitions N] [--queues N]
#                                 [--json FILE] [--png FILE] [-- extra benchmark flags]
# Defaults: threads 1,2,4,8,16,32, extended by powers of two up to 2 x nproc (so a
# 64-core machine sweeps 1..128); 3 repetitions (medians are reported).
# Environment: RINGLOG_BENCH_THREADS, RINGLOG_BENCH_QUEUES, RINGLOG_BENCH_SLICE_MS,
#              RINGLOG_BENCH_AREA_MB (see bench/bench_ring.cpp), JOBS (build jobs).
set -euo pipefail
cd "$(dirname "$0")/.."

default_threads() {
  local list="1,2,4,8,16,32" t=64 max=$(( 2 * $(nproc) ))
  while [ "$t" -le "$max" ]; do list="$list,$t"; t=$(( t * 2 )); done
  echo "$list"
}

THREADS=${RINGLOG_BENCH_THREADS:-$(default_threads)}
REPS=3
JSON=build-bench/ring-scaling.json
PNG=bench/ring-scaling.png
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --threads) THREADS=$2; shift 2 ;;
    --repetitions) REPS=$2; shift 2 ;;
    --queues) export RINGLOG_BENCH_QUEUES=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    --png) PNG=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
done

cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DRINGLOG_BUILD_TESTS=OFF -DRINGLOG_BUILD_TOOLS=OFF >/dev/null
cmake --build build-bench -j "${JOBS:-$(nproc)}" --target bench_ring

echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1), kernel $(uname -r)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)   threads: $THREADS   repetitions: $REPS"
mkdir -p "$(dirname "$JSON")" "$(dirname "$PNG")"
RINGLOG_BENCH_THREADS=$THREADS build-bench/bench/bench_ring \
  --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=false \
  --json="$JSON" "${EXTRA[@]}"
# The plot needs matplotlib (Debian: python3-matplotlib); a pyenv/venv python3 first on
# PATH may not have it, so fall back to the system interpreter.
PY=python3
"$PY" -c 'import matplotlib' 2>/dev/null || PY=/usr/bin/python3
"$PY" bench/plot_ring.py "$JSON" -o "$PNG"
