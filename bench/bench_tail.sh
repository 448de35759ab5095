#!/usr/bin/env bash
# bench_tail.sh: `ringlog -d -g MODE > /dev/null` on a full 64 MiB ring against
# Debian's `varnishlog -d -g MODE > /dev/null` on a full ~80 MB Varnish log, for the four
# groupings (raw, vxid, request, session), on the same machine in the same run, the two
# readers alternating run by run. Both sides count their records (raw lines); figures
# are records per second of wall time and of CPU time. CPU time is the reader process's
# user+sys from wait4(2)'s rusage (microseconds; the kernel's precise runtime, not
# ticks), best of N. Prints the ratios and PASS/FAIL against the targets: >= 2x in every
# mode, and `-g request` >= 5x by CPU.
#
# Usage: bench/bench_tail.sh [BUILD_DIR] [RUNS]   (default build-bench, 5 runs)
# varnishd runs on 127.0.0.1 only, in a temp dir, and is stopped by pid at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=bench_tail
. "$ROOT/bench/lib.sh"
BUILD=${1:-$ROOT/build-bench}
RUNS=${2:-5}
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

# --- varnish: synthetic responses (no backend, one request per connection), an 80 MB
# log filled by wrk.
PORT=$(free_port)
cat >"$WORK/bench.vcl" <<'VCL'
vcl 4.1;
backend default none;
sub vcl_recv { return (synth(200, "OK")); }
sub vcl_synth {
  set resp.http.Content-Type = "text/plain";
  set resp.http.X-Bench = "ringlog";
  set resp.body = "hello";
  # One request per session: wrk's keep-alive sessions would outlive the log (their
  # Begin overwritten), and varnishlog -g session drops such groups unprinted.
  set resp.http.Connection = "close";
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

# timed CMD...: one run of CMD with stdout to /dev/null; prints "wall cpu" in seconds,
# cpu = user + sys of CMD (and any children it waited for) from wait4's rusage.
timed() {
  /usr/bin/python3 - "$WORK/stderr" "$@" <<'PY'
import os, subprocess, sys, time
err = open(sys.argv[1], "w")
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=err)
_, status, ru = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
    sys.exit("%s failed (status %d)" % (sys.argv[2], status))
print("%.6f %.6f" % (wall, ru.ru_utime + ru.ru_stime))
PY
}
min() { awk -v a="$1" -v b="$2" 'BEGIN{print (b<a)?b:a}'; }

R_RECS=$("$RINGLOG" -n "$WORK/ring" -d -g raw | wc -l)
V_RECS=$(varnishlog -n "$WORK/varnish" -d -g raw | wc -l)
printf "records in the log: ringlog %d (64 MiB ring), varnish %d (vsl_space 80M)\n" "$R_RECS" "$V_RECS"
# What each prints per mode (lines of output): the two must do comparable work.
for mode in raw vxid request session; do
  printf "output lines -g %-8s ringlog %9d  varnishlog %9d\n" "$mode" \
    "$("$RINGLOG" -n "$WORK/ring" -d -g $mode | wc -l)" "$(varnishlog -n "$WORK/varnish" -d -g $mode | wc -l)"
done
printf "load before: %s\n" "$(load)"
printf "%-8s %12s %12s %12s %12s %8s %8s %9s %9s\n" mode ringlog/s varnish/s rl-cpu/s vl-cpu/s wall-x cpu-x rl-cpu-s vl-cpu-s
declare -A CPUX
for mode in raw vxid request session; do
  rw=999999 rc=999999 vw=999999 vc=999999
  for i in $(seq "$RUNS"); do
    # Alternate which reader goes first, so neither always runs on a warmer machine.
    for who in $( (( i % 2 )) && echo "r v" || echo "v r"); do
      if [ "$who" = r ]; then
        out=$(timed "$RINGLOG" -n "$WORK/ring" -d -g $mode) || die "ringlog -g $mode: $(cat "$WORK/stderr")"
        rw=$(min "$rw" "${out% *}"); rc=$(min "$rc" "${out#* }")
      else
        out=$(timed varnishlog -n "$WORK/varnish" -d -g $mode) || die "varnishlog -g $mode: $(cat "$WORK/stderr")"
        vw=$(min "$vw" "${out% *}"); vc=$(min "$vc" "${out#* }")
      fi
    done
  done
  line=$(awk -v m=$mode -v rr="$R_RECS" -v vr="$V_RECS" -v rw="$rw" -v rc="$rc" -v vw="$vw" -v vc="$vc" 'BEGIN{
    if (rc <= 0) rc = 1e-6; if (vc <= 0) vc = 1e-6; if (rw <= 0) rw = 1e-6; if (vw <= 0) vw = 1e-6;
    a = rr / rw; b = vr / vw; c = rr / rc; d = vr / vc;
    printf "%-8s %12.0f %12.0f %12.0f %12.0f %7.2fx %7.2fx %9.4f %9.4f\n", m, a, b, c, d, a / b, c / d, rc, vc }')
  echo "$line"
  CPUX[$mode]=$(awk '{sub("x", "", $7); print $7}' <<<"$line")
done
printf "load after: %s\n" "$(load)"
echo "(best of $RUNS runs each, alternating; records/s = raw record lines / seconds; *-cpu-s = CPU seconds)"
for mode in raw vxid request session; do
  awk -v m="$mode" -v x="${CPUX[$mode]}" 'BEGIN{ printf "%s: -g %s by CPU %.2fx varnishlog (target >= 2x)\n", (x >= 2 ? "PASS" : "FAIL"), m, x }'
done
awk -v x="${CPUX[request]}" 'BEGIN{ printf "%s: -g request by CPU %.2fx varnishlog (target >= 5x)\n", (x >= 5 ? "PASS" : "FAIL"), x }'
