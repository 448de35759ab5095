#!/usr/bin/env bash
# ringproxy benchmark (a script, never a timed test): wrk on loopback, in one run,
#   1. ringproxy pass-through with full logging vs Debian's haproxy 2.6, both in front of
#      the same ringlog_test_origin, 1 KiB responses     (target: >= 1.0x haproxy req/s)
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
BUILD=${1:-build-bench}
DURATION=${DURATION:-8}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target ringproxy ringproxy-notrace ringlog_test_origin proxy_log_reader >/dev/null
PROXY=$BUILD/proxy/server/ringproxy
NOTRACE=$BUILD/proxy/server/ringproxy-notrace
ORIGIN=$BUILD/tests/origin/ringlog_test_origin
READER=$BUILD/tests/proxy/proxy_log_reader
command -v wrk >/dev/null || { echo "wrk is missing (scripts/install-deps.sh)"; exit 1; }
command -v haproxy >/dev/null || { echo "haproxy is missing (scripts/install-deps.sh)"; exit 1; }

WORK=$(mktemp -d /tmp/bench_proxy.XXXXXX)
export RINGLOG_DIR=$WORK/instances
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

# run_wrk NAME URL [SECONDS]: one wrk run; appends req/s, p50 and p99 to NAME's lists.
declare -A RPS P50 P99
run_wrk() {
  local name=$1 url=$2 dur=${3:-$DURATION} out
  out=$(wrk -t 2 -c "$CONNS" -d "${dur}s" --latency "$url")
  RPS[$name]+="$(awk '/^Requests\/sec/ {print $2}' <<<"$out") "
  P50[$name]+="$(awk '$1 == "50%" {print $2}' <<<"$out") "
  P99[$name]+="$(awk '$1 == "99%" {print $2}' <<<"$out") "
  if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
    echo "  ($name: $(grep 'Non-2xx\|Socket errors' <<<"$out" | tr '\n' ' '))"
  fi
}
# median VALUES...: the median, values in wrk's units (us, ms, s) or plain numbers.
median() {
  /usr/bin/python3 -c '
import sys
def sec(x):
    for u, m in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if x.endswith(u):
            return float(x[:-len(u)]) * m
    return float(x)
v = sorted(sys.argv[1:], key=sec)
print(v[len(v) // 2] if v else "-")' $1
}
report() {
  printf '  %-30s %10s req/s   p50 %-9s p99 %-9s (req/s per run: %s)\n' "$1" "$(median "${RPS[$1]}")" \
    "$(median "${P50[$1]}")" "$(median "${P99[$1]}")" "${RPS[$1]}"
}
start_proxy() {  # start_proxy BIN INSTANCE PORT EXTRA...
  local bin=$1 inst=$2 port=$3
  shift 3
  # --cache off: every request is proxied, as haproxy does (bench_cache.sh measures hits).
  "$bin" -n "$inst" -a "127.0.0.1:$port" -t "$THREADS" -b "o=127.0.0.1:$OPORT" --health-path /size/0 \
    --ring-size 256M --cache off "$@" 2>/dev/null &
  pids+=($!)
  wait_port "$port"
}

OPORT=$(free_port)
"$ORIGIN" -p "$OPORT" -t 1 >/dev/null &
pids+=($!)
wait_port "$OPORT"

echo "ringproxy benchmark: $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  wrk -t2 -c$CONNS -d${DURATION}s, 1 KiB responses; origin ringlog_test_origin -t 1; proxies $THREADS threads"
echo "  $ROUNDS interleaved rounds, medians"

HPORT=$(free_port)
cat >"$WORK/haproxy.cfg" <<HAPROXY
global
  nbthread $THREADS
  maxconn 4000
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  http-reuse always
frontend fe
  bind 127.0.0.1:$HPORT
  default_backend be
backend be
  server o 127.0.0.1:$OPORT
HAPROXY
haproxy -f "$WORK/haproxy.cfg" -db >/dev/null 2>&1 &
pids+=($!)
wait_port "$HPORT"
FPORT=$(free_port)
start_proxy "$PROXY" bench-full "$FPORT"                # the default tag mask: every record
MPORT=$(free_port)
start_proxy "$PROXY" bench-masked "$MPORT" --mask none  # only Begin/End/Link
for _ in $(seq "$ROUNDS"); do
  run_wrk "origin direct" "http://127.0.0.1:$OPORT/size/1024"
  run_wrk "haproxy 2.6" "http://127.0.0.1:$HPORT/size/1024"
  run_wrk "ringproxy full logging" "http://127.0.0.1:$FPORT/size/1024"
  run_wrk "ringproxy logging masked" "http://127.0.0.1:$MPORT/size/1024"
done
for n in "origin direct" "haproxy 2.6" "ringproxy full logging" "ringproxy logging masked"; do report "$n"; done

# Tracing off (runtime check) vs compiled out: alternate short runs until each proxy has
# served 100 000 requests, then the quantiles of the last 100 000 Timestamp Process.
TPORT=$(free_port)
start_proxy "$PROXY" bench-trace-off "$TPORT"
NPORT=$(free_port)
start_proxy "$NOTRACE" bench-notrace "$NPORT"
served() { "$READER" --stats "$RINGLOG_DIR/$1" | awk '$1 == "MAIN.client_req" {print $2}'; }
for _ in $(seq 30); do
  if [ "$(served bench-trace-off)" -ge 100000 ] && [ "$(served bench-notrace)" -ge 100000 ]; then break; fi
  run_wrk "ringproxy tracing off" "http://127.0.0.1:$TPORT/size/1024" 4
  run_wrk "ringproxy trace compiled out" "http://127.0.0.1:$NPORT/size/1024" 4
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
' "$2"
}
echo
echo "Timestamp Process, seconds since request start (10% 20% ... 90%):"
quantiles bench-trace-off "tracing off (runtime check)"
quantiles bench-notrace "trace compiled out"

ratio() { /usr/bin/python3 -c "print('%.2f' % ($1 / $2))"; }
m() { median "${RPS[$1]}"; }
echo
echo "ratios (medians):"
echo "  ringproxy full logging / haproxy 2.6:   $(ratio "$(m 'ringproxy full logging')" "$(m 'haproxy 2.6')")x  (target >= 1.0)"
echo "  full logging / logging masked:          $(ratio "$(m 'ringproxy full logging')" "$(m 'ringproxy logging masked')")x  (target >= 0.95)"
echo "  tracing off / compiled out (req/s):     $(ratio "$(m 'ringproxy tracing off')" "$(m 'ringproxy trace compiled out')")x"
