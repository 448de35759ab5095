#!/usr/bin/env bash
# ringproxy benchmark (a script, never a timed test): wrk on loopback, in one run,
#   1. ringproxy pass-through with full logging vs Debian's haproxy 2.6, twice: without
#      logging (target: >= 1.0x its req/s) and with `option httplog` into one of its rings
#      (target: >= 1.2x). All proxies sit in front of the same fast origin (a haproxy that
#      answers 1 KiB bodies itself with `http-request return`), so the origin bounds none.
#      Then the same four again at a fixed CPU budget: each proxy in a cpu cgroup limited
#      to CPU_CAP % of one CPU (default 50; 0: not run), so that the proxy, not wrk or the
#      origin sharing the machine, bounds the req/s (needs root; skipped otherwise).
#      Beside them in every round, the floor: tcp_relay (bench/peers/tcp_relay.c), a byte
#      relay with no HTTP, one recv and one send per direction and almost no user space,
#      the most a proxy making a system call per read and write can make on this machine;
#      the same relay with each loop turn's sends batched into one io_uring_enter; and on
#      io_uring alone (receives too, one io_uring_enter per loop turn), the most a proxy
#      that batches its system calls can. Their ratios to haproxy httplog are the
#      ceilings of ringproxy's, printed so that a target above them reads as such.
#   2. ringproxy full logging vs logging masked (--mask none)            (target: >= 0.95x)
#   3. tracing off vs trace points compiled out (ringproxy-notrace): quantiles of
#      Timestamp Process ("since start") over 100 000 requests, the method of seeds/002
#      (Varnish PR 3840: 10%..90% of Timestamp:Process)              (target: within noise)
# Configurations are measured in interleaved rounds (ROUNDS, default 5) and medians
# reported, since the machine is shared; each ratio is also taken within every round
# and said how often it held. wrk, the origin and the proxy share the machine's CPUs, so
# req/s moves by less than the proxy's own cost does: beside req/s the script prints the
# CPU time each proxy process used per request (user and system, its threads' schedstat
# run times over the wrk run, divided by the requests wrk completed), and the ratios by
# that CPU time (haproxy's CPU per request / ringproxy's: above 1 when ringproxy costs
# less). Exits 0 unless something could not run. Every server listens on 127.0.0.1 and
# is stopped by pid.
# Usage: bench/bench_proxy.sh [BUILD_DIR]   (default build-bench, configured Release if new)
# Environment: DURATION (s per run, 8), CONNS (32), THREADS (proxy threads, 2), ROUNDS (5),
# CPU_CAP (50), RING_SIZE (ringproxy's ring in the comparison, 32M: the size of haproxy's).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench_proxy
. bench/lib.sh
BUILD=${1:-build-bench}
DURATION=${DURATION:-8}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
need wrk haproxy cmake
bench_build "$BUILD" ringproxy ringproxy-notrace proxy_log_reader tcp_relay
RELAY=$BUILD/bench/tcp_relay
PROXY=$BUILD/proxy/server/ringproxy
NOTRACE=$BUILD/proxy/server/ringproxy-notrace
READER=$BUILD/support/proxy_log_reader
bench_workdir

# run_wrk NAME URL [SECONDS]: one wrk run against the server of pid SERVER[NAME]; appends
# req/s, p50, p99, that server's CPU microseconds per request, the share of it spent in
# user space (percent) and the origin's CPU microseconds per request to NAME's lists.
declare -A RPS P50 P99 CPU USR ORIG SERVER
run_wrk() {
  local name=$1 url=$2 dur=${3:-$DURATION} c0 c1 u0 s0 u1 s1 o0 o1
  c0=$(cpu_ns "${SERVER[$name]}")
  o0=$(cpu_ns "$OPID")
  read -r u0 s0 < <(cpu_ticks "${SERVER[$name]}")
  wrk_run -t 2 -c "$CONNS" -d "${dur}s" --latency "$url"
  c1=$(cpu_ns "${SERVER[$name]}")
  o1=$(cpu_ns "$OPID")
  read -r u1 s1 < <(cpu_ticks "${SERVER[$name]}")
  ORIG[$name]+="$(/usr/bin/python3 -c "print('%.2f' % (($o1 - $o0) / 1000 / max($WRK_REQS, 1)))") "
  USR[$name]+="$(((u1 - u0) * 100 / (u1 - u0 + s1 - s0 > 0 ? u1 - u0 + s1 - s0 : 1))) "
  RPS[$name]+="$WRK_RPS "
  P50[$name]+="$WRK_P50 "
  P99[$name]+="$WRK_P99 "
  CPU[$name]+="$(/usr/bin/python3 -c "print('%.2f' % (($c1 - $c0) / 1000 / max($WRK_REQS, 1)))") "
  if [ -n "$WRK_ERRORS" ]; then echo "  ($name: $WRK_ERRORS)"; fi
}
# shellcheck disable=SC2206 # the list splits into its values
last() { local v=(${RPS[$1]}); echo "${v[-1]}"; }  # the latest req/s of NAME
# shellcheck disable=SC2206
last_cpu() { local v=(${CPU[$1]}); echo "${v[-1]}"; }  # the latest CPU us/request of NAME
report() {
  # shellcheck disable=SC2086 # the lists split into their values
  printf '  %-30s %10s req/s  p50 %-8s p99 %-8s CPU/req %6s us, %2s %% user; origin %5s us  (req/s per run: %s)\n' \
    "$1" "$(median ${RPS[$1]})" "$(median ${P50[$1]})" "$(median ${P99[$1]})" "$(median ${CPU[$1]})" \
    "$(median ${USR[$1]})" "$(median ${ORIG[$1]})" "${RPS[$1]}"
}
# Within-round ratios: HELD[KEY] counts the rounds in which the ratio KEY met its target,
# RR[KEY] lists the ratio of every round.
declare -A HELD RR
# paired KEY A B TARGET [cpu]: the ratio of A's latest req/s to B's (with "cpu": of B's
# latest CPU per request to A's) this round, against TARGET; appended to the line PAIRED.
paired() {
  local key=$1 a=$2 b=$3 target=$4 r
  if [ "${5:-}" = cpu ]; then r=$(ratio "$(last_cpu "$b")" "$(last_cpu "$a")"); else r=$(ratio "$(last "$a")" "$(last "$b")"); fi
  RR[$key]+="$r "
  if /usr/bin/python3 -c "import sys; sys.exit(0 if '$r' != '-' and float('$r') >= $target else 1)"; then
    HELD[$key]=$((${HELD[$key]:-0} + 1))
  fi
  PAIRED+=" ${key%"$RSUFFIX"} ${r}x"
}
start_proxy() {  # start_proxy BIN INSTANCE PORT EXTRA...
  local bin=$1 inst=$2 port=$3
  shift 3
  # --cache off: every request is proxied, as haproxy does (bench_cache.sh measures hits).
  start_ringproxy "$bin" "$inst" "$port" "$OPORT" --cache off "$@"
}

start_fast_origin 1024
OPID=$LAST
SERVER["origin direct"]=$OPID

echo "ringproxy benchmark: $(date -u +%FT%TZ), $(nproc) cores, load $(load)"
echo "  wrk -t2 -c$CONNS -d${DURATION}s, 1 KiB responses; origin haproxy http-request return (1 thread); proxies $THREADS threads"
echo "  $ROUNDS interleaved rounds, medians; CPU/req: the server process's CPU time per request"

HPORT=$(free_port)
start_haproxy "$HPORT" "$OPORT"
SERVER["haproxy 2.6"]=$LAST
LPORT=$(free_port)
start_haproxy "$LPORT" "$OPORT" httplog
SERVER["haproxy 2.6 httplog"]=$LAST
FPORT=$(free_port)
# ringproxy's rings for the comparison: haproxy's size (its ring "reqlog", 32 MiB), so
# that neither writes its log into more memory than the other.
RING_SIZE=${RING_SIZE:-32M} start_proxy "$PROXY" bench-full "$FPORT"  # the default tag mask: every record
SERVER["ringproxy full logging"]=$LAST
MPORT=$(free_port)
RING_SIZE=${RING_SIZE:-32M} start_proxy "$PROXY" bench-masked "$MPORT" --mask none  # only Begin/End/Link
SERVER["ringproxy logging masked"]=$LAST
declare -A URL=(["haproxy 2.6"]="http://127.0.0.1:$HPORT/size/1024"
  ["haproxy 2.6 httplog"]="http://127.0.0.1:$LPORT/size/1024"
  ["ringproxy full logging"]="http://127.0.0.1:$FPORT/size/1024"
  ["ringproxy logging masked"]="http://127.0.0.1:$MPORT/size/1024")
# start_relay NAME [MODE]: tcp_relay (MODE: --batch-sends or --uring) with THREADS loops
# in front of the origin, on a free port, measured as NAME.
start_relay() {
  local name=$1 port
  shift
  port=$(free_port)
  "$RELAY" "$@" "$port" "$OPORT" "$THREADS" &
  pids+=("$!")
  SERVER[$name]=$!
  URL[$name]="http://127.0.0.1:$port/size/1024"
  wait_port "$port" || die "tcp_relay $* did not start"
}
start_relay "tcp relay (floor)"
start_relay "tcp relay batched sends" --batch-sends
start_relay "tcp relay io_uring" --uring
# proxy_rounds SUFFIX: ROUNDS rounds of the four proxies and the three relays, measured
# under the names "NAME$SUFFIX" (the ratio keys too); the origin alone first in each round
# when SUFFIX is empty. The seven run in one order on odd rounds and in the reverse one on even
# rounds (ABBA), so that a drift of the machine's load over a round favours none.
proxy_rounds() {
  local x=$1 r n order
  RSUFFIX=$x
  F="ringproxy full logging$x" M="ringproxy logging masked$x" H="haproxy 2.6$x" L="haproxy 2.6 httplog$x"
  R="tcp relay (floor)$x" B="tcp relay batched sends$x" U="tcp relay io_uring$x"
  for n in "$H" "$L" "$F" "$M" "$R" "$B" "$U"; do
    SERVER[$n]=${SERVER[${n%"$x"}]}
    URL[$n]=${URL[${n%"$x"}]}
  done
  for r in $(seq "$ROUNDS"); do
    [ -n "$x" ] || run_wrk "origin direct" "http://127.0.0.1:$OPORT/size/1024"
    if [ $((r % 2)) -eq 1 ]; then order=("$R" "$B" "$U" "$H" "$L" "$F" "$M"); else order=("$M" "$F" "$L" "$H" "$U" "$B" "$R"); fi
    for n in "${order[@]}"; do run_wrk "$n" "${URL[$n]}"; done
    PAIRED=""
    paired "full/haproxy$x" "$F" "$H" 1.0
    paired "full/httplog$x" "$F" "$L" 1.2
    paired "full/masked$x" "$F" "$M" 0.95
    paired "cpu:full/haproxy$x" "$F" "$H" 1.0 cpu
    paired "cpu:full/httplog$x" "$F" "$L" 1.2 cpu
    paired "cpu:masked/haproxy$x" "$M" "$H" 1.0 cpu
    paired "floor/httplog$x" "$R" "$L" 1.2
    paired "full/floor$x" "$F" "$R" 1.0
    paired "batched-floor/httplog$x" "$B" "$L" 1.2
    paired "uring-floor/httplog$x" "$U" "$L" 1.2
    echo "  round $r:$PAIRED"
  done
  [ -n "$x" ] || report "origin direct"
  for n in "$H" "$L" "$F" "$M" "$R" "$B" "$U"; do report "$n"; done
}
proxy_rounds ""
events=$(haproxy_ring_events "$LPORT")
[ "$events" -gt 0 ] || die "haproxy with httplog logged nothing into its ring"
echo "  (haproxy httplog ring: $events lines held at the end)"

# The same four at a fixed CPU budget: each proxy process in a cpu cgroup of its own with
# a quota of CPU_CAP % of one CPU (and the largest weight, so that the quota, not the
# machine's other work, is what bounds it). The proxy is then the bottleneck (wrk and the
# origin have the rest of the machine), as on a server whose proxy saturates its cores,
# and req/s is the proxy's requests per CPU-second at that budget.
CAPX=""
if [ "${CPU_CAP:-50}" != 0 ]; then
  if cpu_cap "${CPU_CAP:-50}" "${SERVER["haproxy 2.6"]}" "${SERVER["haproxy 2.6 httplog"]}" \
    "${SERVER["ringproxy full logging"]}" "${SERVER["ringproxy logging masked"]}" "${SERVER["tcp relay (floor)"]}" \
    "${SERVER["tcp relay batched sends"]}" "${SERVER["tcp relay io_uring"]}"; then
    CAPX=" @${CPU_CAP:-50}% CPU"
    echo
    echo "at a CPU budget: each proxy limited to ${CPU_CAP:-50} % of one CPU ($CPU_CAP_HOW)"
    proxy_rounds "$CAPX"
  else
    echo
    echo "at a CPU budget: skipped ($CPU_CAP_HOW)"
  fi
fi

# Tracing off (runtime check) vs compiled out: alternate short runs until each proxy has
# served 100 000 requests, then the quantiles of the last 100 000 Timestamp Process.
TPORT=$(free_port)
# 256 MiB: the quantiles need the last 100 000 requests (~117 MB of records) in the ring.
RING_SIZE=256M start_proxy "$PROXY" bench-trace-off "$TPORT"
SERVER["ringproxy tracing off"]=$LAST
NPORT=$(free_port)
RING_SIZE=256M start_proxy "$NOTRACE" bench-notrace "$NPORT"
SERVER["ringproxy trace compiled out"]=$LAST
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
echo
echo "tracing off vs trace points compiled out:"
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
# shellcheck disable=SC2086
mc() { median ${CPU[$1]}; }
# held KEY: "held in k of n rounds (per round: ...)"
# shellcheck disable=SC2206
held() { local v=(${RR[$1]:-}); echo "held in ${HELD[$1]:-0} of ${#v[@]} rounds (per round: ${RR[$1]% })"; }
echo
# summary SUFFIX: the ratios of the proxy_rounds run of that suffix.
summary() {
  local x=$1
  F="ringproxy full logging$x" M="ringproxy logging masked$x" H="haproxy 2.6$x" L="haproxy 2.6 httplog$x"
  echo "ratios${x:+ at ${x#" @"}} (medians of req/s; within-round ratios and how often each met its target):"
  echo "  ringproxy full logging / haproxy 2.6 without logging: $(ratio "$(m "$F")" "$(m "$H")")x  (target >= 1.0; $(held "full/haproxy$x"))"
  echo "  ringproxy full logging / haproxy 2.6 httplog into a ring: $(ratio "$(m "$F")" "$(m "$L")")x  (target >= 1.2; $(held "full/httplog$x"))"
  echo "  ringproxy logging masked / haproxy 2.6 without logging: $(ratio "$(m "$M")" "$(m "$H")")x"
  echo "  full logging / logging masked:          $(ratio "$(m "$F")" "$(m "$M")")x  (target >= 0.95; $(held "full/masked$x"))"
  echo "ratios${x:+ at ${x#" @"}} by CPU per request (haproxy's microseconds / ringproxy's, medians):"
  echo "  ringproxy full logging vs haproxy 2.6 without logging: $(mc "$H") / $(mc "$F") us = $(ratio "$(mc "$H")" "$(mc "$F")")x  (target >= 1.0; $(held "cpu:full/haproxy$x"))"
  echo "  ringproxy full logging vs haproxy 2.6 httplog: $(mc "$L") / $(mc "$F") us = $(ratio "$(mc "$L")" "$(mc "$F")")x  (target >= 1.2; $(held "cpu:full/httplog$x"))"
  echo "  ringproxy logging masked vs haproxy 2.6 without logging: $(mc "$H") / $(mc "$M") us = $(ratio "$(mc "$H")" "$(mc "$M")")x  ($(held "cpu:masked/haproxy$x"))"
  R="tcp relay (floor)$x" B="tcp relay batched sends$x" U="tcp relay io_uring$x"
  echo "the floor${x:+ at ${x#" @"}}: a TCP relay without HTTP (the most a proxy can make here):"
  echo "  tcp relay / haproxy 2.6 httplog (req/s): $(ratio "$(m "$R")" "$(m "$L")")x  (rounds in which even the relay reached 1.2x: $(held "floor/httplog$x"))"
  echo "  tcp relay / haproxy 2.6 without logging (req/s): $(ratio "$(m "$R")" "$(m "$H")")x"
  echo "  tcp relay batched sends / haproxy 2.6 httplog (req/s): $(ratio "$(m "$B")" "$(m "$L")")x  (rounds in which it reached 1.2x: $(held "batched-floor/httplog$x"))"
  echo "  tcp relay io_uring / haproxy 2.6 httplog (req/s): $(ratio "$(m "$U")" "$(m "$L")")x  (rounds in which it reached 1.2x: $(held "uring-floor/httplog$x"))"
  echo "  ringproxy full logging / tcp relay (req/s): $(ratio "$(m "$F")" "$(m "$R")")x  (at or above the relay: $(held "full/floor$x"))"
  echo "  CPU per request: tcp relay $(mc "$R") us, batched sends $(mc "$B") us, io_uring $(mc "$U") us; ringproxy full logging $(mc "$F") us, haproxy 2.6 httplog $(mc "$L") us"
}
summary ""
if [ -n "$CAPX" ]; then summary "$CAPX"; fi
echo "tracing:"
echo "  tracing off / compiled out (req/s):     $(ratio "$(m 'ringproxy tracing off')" "$(m 'ringproxy trace compiled out')")x"
if [ -s "$WORK/q.bench-trace-off" ] && [ -s "$WORK/q.bench-notrace" ]; then
  read -r t50 t90 <"$WORK/q.bench-trace-off"
  read -r n50 n90 <"$WORK/q.bench-notrace"
  echo "  Timestamp Process p50 tracing off / compiled out: $t50 / $n50 s = $(ratio "$t50" "$n50")x;" \
    "p90 $t90 / $n90 s = $(ratio "$t90" "$n90")x  (target: within noise)"
fi
