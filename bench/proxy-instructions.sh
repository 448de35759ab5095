#!/usr/bin/env bash
# Instructions per proxied request, counted by callgrind (deterministic, whatever the
# machine's load): ringproxy with full logging and with logging masked, haproxy 2.6
# without logging and with `option httplog` into one of its rings, each with one thread
# in front of the same fast origin (haproxy answering 1 KiB bodies itself), same requests.
# Each proxy runs under valgrind; after a warm-up the counters are zeroed, N keep-alive
# GETs are sent by one curl, and the counters dumped: instructions of every thread of the
# proxy process divided by N. Every server listens on 127.0.0.1 and is stopped by pid.
# Usage: bench/proxy-instructions.sh [BUILD_DIR] [N]   (default build-bench, 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=proxy-instructions
. bench/lib.sh
BUILD=${1:-build-bench}
N=${2:-2000}
per_request_setup "$BUILD" valgrind callgrind_control

# measure NAME PORT CMD...: CMD (listening on PORT) under callgrind; prints NAME's
# instructions per request.
measure() {
  local name=$1 port=$2 pid dump total
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$port" "$@" >/dev/null 2>"$WORK/vg.$port" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1200); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.05; done
  keepalive_gets "$port" 200
  callgrind_control -z "$pid" >/dev/null 2>&1
  keepalive_gets "$port" "$N"
  callgrind_control -d "$pid" >/dev/null 2>&1
  dump=$(ls -t "$WORK/cg.$port".* 2>/dev/null | head -1)
  [ -n "$dump" ] || die "$name: no callgrind dump"
  total=$(sed -n 's/^summary: *//p; s/^totals: *//p' "$dump" | head -1 | awk '{print $1}')
  stop "$pid"
  awk -v p="$name" -v t="$total" -v n="$N" 'BEGIN { printf "  %-34s %9.0f\n", p, t / n }'
}

echo "instructions per proxied request (callgrind, $N keep-alive GETs of 1 KiB, one proxy thread, $(date -u +%F)):"
P=$(free_port)
measure "ringproxy full logging" "$P" "$PROXY" -n ins-full -a "127.0.0.1:$P" -t 1 -b "o=127.0.0.1:$OPORT" \
  --health-path /size/0 --ring-size 64M --cache off
P=$(free_port)
measure "ringproxy logging masked" "$P" "$PROXY" -n ins-masked -a "127.0.0.1:$P" -t 1 -b "o=127.0.0.1:$OPORT" \
  --health-path /size/0 --ring-size 64M --cache off --mask none
P=$(free_port)
haproxy_cfg "$P" "$OPORT" >"$WORK/h-$P.cfg"
measure "haproxy 2.6 without logging" "$P" haproxy -f "$WORK/h-$P.cfg" -db
P=$(free_port)
haproxy_cfg "$P" "$OPORT" httplog >"$WORK/h-$P.cfg"
measure "haproxy 2.6 httplog into a ring" "$P" haproxy -f "$WORK/h-$P.cfg" -db
