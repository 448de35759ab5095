#!/usr/bin/env bash
# Instructions per record of `ringlog -d -g MODE > /dev/null` for the four groupings,
# counted by callgrind over a full ring filled by `tail_writer fill`: deterministic,
# whatever the machine's load (the evidence to quote for a change to the reader's path;
# bench_tail.sh gives the wall and CPU figures against varnishlog).
# Usage: bench/tail-instructions.sh [BUILD_DIR] [RING_BYTES]   (default build, 4 MiB)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
SIZE=${2:-$((4 << 20))}
RINGLOG=$BUILD/readers/ringlog-tail/ringlog
WRITER=$BUILD/support/tail_writer
for b in "$RINGLOG" "$WRITER"; do
  [ -x "$b" ] || { echo "missing $b: cmake --build $BUILD --target ringlog-tail tail_writer" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "valgrind not found (Debian package valgrind)" >&2; exit 1; }
OUT=$(mktemp -d /tmp/ringlog-tail-callgrind.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
"$WRITER" fill "$OUT/ring" "$SIZE" >/dev/null
RECS=$("$RINGLOG" -n "$OUT/ring" -d -g raw | wc -l)
echo "instructions per record (callgrind, ringlog -d -g MODE > /dev/null, $RECS records, $SIZE-byte ring):"
for mode in raw vxid request session; do
  valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.$mode" "$RINGLOG" -n "$OUT/ring" -d -g "$mode" \
    >/dev/null 2>"$OUT/vg.$mode" || { cat "$OUT/vg.$mode" >&2; exit 1; }
  total=$(sed -n 's/^summary: *//p; s/^totals: *//p' "$OUT/cg.$mode" | head -1 | awk '{print $1}')
  awk -v m="$mode" -v t="$total" -v n="$RECS" 'BEGIN { printf "  %-8s %8.1f  (%d instructions)\n", m, t / n, t }'
done
