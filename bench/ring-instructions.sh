#!/usr/bin/env bash
# Instructions per message for ringlog and its peers (one writer, HAProxy mix), counted
# by callgrind: deterministic, whatever the machine's load. Runs
# `bench_ring --instructions N` under valgrind; each peer's loop is one callgrind dump.
# Usage: bench/ring-instructions.sh [BENCH_RING] [N] [-- more bench_ring options]
# Default: build/bench/bench_ring, N = 200000.
set -euo pipefail
BIN=${1:-build/bench/bench_ring}
N=${2:-200000}
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
command -v valgrind >/dev/null || { echo "valgrind not found (Debian package valgrind)" >&2; exit 1; }
OUT=$(mktemp -d /tmp/ringlog-callgrind.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" "$BIN" --instructions "$N" "$@" >"$OUT/log" 2>"$OUT/vg"
grep -E 'unavailable' "$OUT/log" || true
echo "instructions per message (callgrind, $N messages, one writer; all threads of the process):"
for f in "$OUT"/cg.out.*; do
  [ -f "$f" ] || continue
  peer=$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
  total=$(sed -n 's/^summary: *//p; s/^totals: *//p' "$f" | head -1 | awk '{print $1}')
  [ -n "$peer" ] && [ -n "$total" ] && awk -v p="$peer" -v t="$total" -v n="$N" 'BEGIN { printf "  %-10s %8.1f\n", p, t / n }'
done
