#!/usr/bin/env bash
# ringproxy benchmark (a script, never a timed test): wrk on loopback, in one run,
#   1. ringproxy pass-through with full logging vs Debian's haproxy 2.6, twice: without
#      logging (target: >= 1.0x its req/s) and with `option httplog` into one of its rings
#      (target: >= 1.2x). All proxies sit in front of the same fast origin (a haproxy that
#      answers 1 KiB bodies itself with `http-request return`), so the origin bounds none.
#   2. ringproxy full logging vs logging masked (--mask none)            (target: >= 0.95x)
#   3. tracing off vs trace points compiled out (ringproxy-notrace): quantiles of
#      Timestamp Process ("since start") over 100 000 requests, the method of seeds/002
#      (Varnish PR 3840: 10%..90% of Timestamp:Process)              (target: within noise)
# Configurations are measured in interleaved rounds (ROUNDS, default 3) and medians
# reported, since the machine is shared. Prints req/s with p50/p99 latency and the
# ratios; exits 0 unless something could not run. Every server listens on 127.0.0.1
# and is stopped by pid.
# Usage: bench/bench_proxy.sh [BUILD_DIR]   (default build-bench, configured Release if new)
# Environment: DURATION (s per run, 8), CONNS (32), THREADS (proxy threads, 2), ROUNDS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench_proxy
. bench/lib.sh
BUILD=${1:-build-bench}
DURATION=${DURATION:-8}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
need wrk haproxy cmake
bench_build "$BUILD" ringproxy ringproxy-notrace proxy_log_reader
PROXY=$BUILD/proxy/server/ringproxy
NOTRACE=$BUILD/proxy/server/ringproxy-notrace
READER=$BUILD/support/proxy_log_reader
bench_workdir

# run_wrk NAME URL [SECONDS]: one wrk run; appends req/s, p50 and p99 to NAME's lists.
declare -A RPS P50 P99
run_wrk() {
  local name=$1 url=$2 dur=${3:-$DURATION}
  wrk_run -t 2 -c "$CONNS" -d "${dur}s" --latency "$url"
  RPS[$name]+="$WRK_RPS "
  P50[$name]+="$WRK_P50 "
  P99[$name]+="$WRK_P99 "
  if [ -n "$WRK_ERRORS" ]; then echo "  ($name: $WRK_ERRORS)"; fi
}
# shellcheck disable=SC2206 # the list splits into its values
last() { local v=(${RPS[$1]}); echo "${v[-1]}"; }  # the latest req/s of NAME
report() {
  # shellcheck disable=SC2086 # the lists split into their values
  printf '  %-30s %10s req/s   p50 %-9s p99 %-9s (req/s per run: %s)\n' "$1" "$(median ${RPS[$1]})" \
    "$(median ${P50[$1]})" "$(median ${P99[$1]})" "${RPS[$1]}"
}
start_proxy() {  # start_proxy BIN INSTANCE PORT EXTRA...
  local bin=$1 inst=$2 port=$3
  shift 3
  # --cache off: every request is proxied, as haproxy does (bench_cache.sh measures hits).
  start_ringproxy "$bin" "$inst" "$port" "$OPORT" --cache off "$@"
}

start_fast_origin 1024

echo "ringproxy benchmark: $(date -u +%FT%TZ), $(nproc) cores, load $(load)"
echo "  wrk -t2 -c$CONNS -d${DURATION}s, 1 KiB responses; origin haproxy http-request return (1 thread); proxies $THREADS threads"
echo "  $ROUNDS interleaved rounds, medians"

HPORT=$(free_port)
start_haproxy "$HPORT" "$OPORT"
LPORT=$(free_port)
start_haproxy "$LPORT" "$OPORT" httplog
FPORT=$(free_port)
start_proxy "$PROXY" bench-full "$FPORT"                # the default tag mask: every record
MPORT=$(free_port)
start_proxy "$PROXY" bench-masked "$MPORT" --mask none  # only Begin/End/Link
# Full logging and masked swap places every round (ABBA), so that a drift of the
# machine's load over a round does not favour the one that always runs first.
for r in $(seq "$ROUNDS"); do
  run_wrk "origin direct" "http://127.0.0.1:$OPORT/size/1024"
  run_wrk "haproxy 2.6" "http://127.0.0.1:$HPORT/size/1024"
  run_wrk "haproxy 2.6 httplog" "http://127.0.0.1:$LPORT/size/1024"
  if [ $((r % 2)) -eq 1 ]; then
    run_wrk "ringproxy full logging" "http://127.0.0.1:$FPORT/size/1024"
    run_wrk "ringproxy logging masked" "http://127.0.0.1:$MPORT/size/1024"
  else
    run_wrk "ringproxy logging masked" "http://127.0.0.1:$MPORT/size/1024"
    run_wrk "ringproxy full logging" "http://127.0.0.1:$FPORT/size/1024"
  fi
  echo "  round $r: full/masked $(ratio "$(last "ringproxy full logging")" "$(last "ringproxy logging masked")")x"
done
events=$(haproxy_ring_events "$LPORT")
[ "$events" -gt 0 ] || die "haproxy with httplog logged nothing into its ring"
echo "  (haproxy httplog ring: $events lines held at the end)"
for n in "origin direct" "haproxy 2.6" "haproxy 2.6 httplog" "ringproxy full logging" "ringproxy logging masked"; do report "$n"; done

# Tracing off (runtime check) vs compiled out: alternate short runs until each proxy has
# served 100 000 requests, then the quantiles of the last 100 000 Timestamp Process.
TPORT=$(free_port)
start_proxy "$PROXY" bench-trace-off "$TPORT"
NPORT=$(free_port)
start_proxy "$NOTRACE" bench-notrace "$NPORT"
served() { "$READER" --stats "$RINGLOG_DIR/$1" | awk '$1 == "MAIN.client_req" {print $2}'; }
for r in $(seq 30); do
  if [ "$(served bench-trace-off)" -ge 100000 ] && [ "$(served bench-notrace)" -ge 100000 ]; then break; fi
  if [ $((r % 2)) -eq 1 ]; then  # ABBA, as above
    run_wrk "ringproxy tracing off" "http://127.0.0.1:$TPORT/size/1024" 4
    run_wrk "ringproxy trace compiled out" "http://127.0.0.1:$NPORT/size/1024" 4
  else
    run_wrk "ringproxy trace compiled out" "http://127.0.0.1:$NPORT/size/1024" 4
    run_wrk "ringproxy tracing off" "http://127.0.0.1:$TPORT/size/1024" 4
  fi
done
report "ringproxy tracing off"
report "ringproxy trace compiled out"

quantiles() {  # quantiles INSTANCE LABEL
  "$READER" "$RINGLOG_DIR/$1/ring" | /usr/bin/python3 -c '
import json, sys
v = []
for line in sys.stdin:
    t = json.loads(line)
    if t["type"] != "req":
        continue
    for tag, p in t["records"]:
        if tag == "Timestamp" and p.startswith("Process:"):
            v.append(float(p.split()[2]))
v = sorted(v[-100000:])
q = [v[int(len(v) * k / 10)] for k in range(1, 10)] if v else []
print("  %-30s n=%d  " % (sys.argv[1], len(v)) + " ".join("%.6f" % x for x in q))
if q:
    open(sys.argv[2], "w").write("%.6f %.6f\n" % (q[4], q[8]))
' "$2" "$WORK/q.$1"
}
echo
echo "Timestamp Process, seconds since request start (10% 20% ... 90%):"
quantiles bench-trace-off "tracing off (runtime check)"
quantiles bench-notrace "trace compiled out"

# shellcheck disable=SC2086 # the list splits into its values
m() { median ${RPS[$1]}; }
echo
echo "ratios (medians):"
echo "  ringproxy full logging / haproxy 2.6 without logging: $(ratio "$(m 'ringproxy full logging')" "$(m 'haproxy 2.6')")x  (target >= 1.0)"
echo "  ringproxy full logging / haproxy 2.6 httplog into a ring: $(ratio "$(m 'ringproxy full logging')" "$(m 'haproxy 2.6 httplog')")x  (target >= 1.2)"
echo "  ringproxy logging masked / haproxy 2.6 without logging: $(ratio "$(m 'ringproxy logging masked')" "$(m 'haproxy 2.6')")x"
echo "  full logging / logging masked:          $(ratio "$(m 'ringproxy full logging')" "$(m 'ringproxy logging masked')")x  (target >= 0.95)"
echo "  tracing off / compiled out (req/s):     $(ratio "$(m 'ringproxy tracing off')" "$(m 'ringproxy trace compiled out')")x"
if [ -s "$WORK/q.bench-trace-off" ] && [ -s "$WORK/q.bench-notrace" ]; then
  read -r t50 t90 <"$WORK/q.bench-trace-off"
  read -r n50 n90 <"$WORK/q.bench-notrace"
  echo "  Timestamp Process p50 tracing off / compiled out: $t50 / $n50 s = $(ratio "$t50" "$n50")x;" \
    "p90 $t90 / $n90 s = $(ratio "$t90" "$n90")x  (target: within noise)"
fi
