#!/usr/bin/env bash
# bench_tail.sh: `ringlog -d -g raw|request > /dev/null` on a full 64 MiB ring against
# Debian's `varnishlog -d -g raw|request > /dev/null` on a full ~80 MB Varnish log, on
# the same machine in the same run. Both sides count their records (raw lines) and
# are timed best-of-N; figures are records per second of wall time and of CPU time
# (user+sys: steadier on a shared machine). Prints the ratios; target >= 2x.
#
# Usage: bench/bench_tail.sh [BUILD_DIR] [RUNS]   (default build-bench, 3 runs)
# varnishd runs on 127.0.0.1 only, in a temp dir, and is stopped by pid at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=bench_tail
. "$ROOT/bench/lib.sh"
BUILD=${1:-$ROOT/build-bench}
RUNS=${2:-3}
RINGLOG=$BUILD/readers/ringlog-tail/ringlog
WRITER=$BUILD/support/tail_writer
for b in "$RINGLOG" "$WRITER"; do
  [ -x "$b" ] || { echo "missing $b: cmake --build $BUILD --target ringlog-tail tail_writer" >&2; exit 1; }
done
command -v varnishd >/dev/null || PATH=$PATH:/usr/sbin
need varnishd varnishlog wrk curl

bench_workdir

# --- ringlog: a full 64 MiB ring of proxy-shaped transactions.
"$WRITER" fill "$WORK/ring" $((64 << 20)) >/dev/null

# --- varnish: synthetic responses (no backend), an 80 MB log filled by wrk.
PORT=$(free_port)
cat >"$WORK/bench.vcl" <<'VCL'
vcl 4.1;
backend default none;
sub vcl_recv { return (synth(200, "OK")); }
sub vcl_synth {
  set resp.http.Content-Type = "text/plain";
  set resp.http.X-Bench = "ringlog";
  set resp.body = "hello";
  return (deliver);
}
VCL
varnishd -n "$WORK/varnish" -a 127.0.0.1:$PORT -f "$WORK/bench.vcl" -s malloc,16m \
  -p vsl_space=80M -j none -F >"$WORK/varnishd.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
# Fill the log: bounded wrk runs until varnishlog -d sees the log has wrapped
# (the oldest vxid is no longer the first one).
for _ in $(seq 12); do
  wrk -t2 -c16 -d3s "http://127.0.0.1:$PORT/static/img/logo.png" >/dev/null 2>&1 || true
  first=$(varnishlog -n "$WORK/varnish" -d -g raw 2>/dev/null | awk '$1 > 0 {print $1; exit}' || true)
  if [ "${first:-0}" -gt 1000 ]; then break; fi
done

best() {  # best-of-RUNS "wall cpu" of a command writing to /dev/null
  local bw=999999 bc=999999 out w c
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -o "$WORK/time" -f "%e %U %S" "$@" >/dev/null 2>"$WORK/stderr"
    out=$(tail -1 "$WORK/time")
    w=$(echo "$out" | awk '{print $1}'); c=$(echo "$out" | awk '{print $2 + $3}')
    bw=$(awk -v a="$bw" -v b="$w" 'BEGIN{print (b<a)?b:a}')
    bc=$(awk -v a="$bc" -v b="$c" 'BEGIN{print (b<a)?b:a}')
  done
  echo "$bw $bc"
}

R_RECS=$("$RINGLOG" -n "$WORK/ring" -d -g raw | wc -l)
V_RECS=$(varnishlog -n "$WORK/varnish" -d -g raw | wc -l)
printf "records in the log: ringlog %d (64 MiB ring), varnish %d (vsl_space 80M)\n" "$R_RECS" "$V_RECS"
printf "%-8s %12s %12s %12s %12s %8s %8s\n" mode ringlog/s varnish/s rl-cpu/s vl-cpu/s wall-x cpu-x
for mode in raw request; do
  read -r rw rc < <(best "$RINGLOG" -n "$WORK/ring" -d -g $mode)
  read -r vw vc < <(best varnishlog -n "$WORK/varnish" -d -g $mode)
  awk -v m=$mode -v rr="$R_RECS" -v vr="$V_RECS" -v rw="$rw" -v rc="$rc" -v vw="$vw" -v vc="$vc" 'BEGIN{
    if (rc <= 0) rc = 0.01; if (vc <= 0) vc = 0.01; if (rw <= 0) rw = 0.01; if (vw <= 0) vw = 0.01;
    a = rr / rw; b = vr / vw; c = rr / rc; d = vr / vc;
    printf "%-8s %12.0f %12.0f %12.0f %12.0f %7.2fx %7.2fx\n", m, a, b, c, d, a / b, c / d }'
done
echo "(best of $RUNS runs; records/s = raw record lines / seconds; target >= 2x)"
