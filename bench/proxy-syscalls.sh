#!/usr/bin/env bash
# System calls per proxied request, counted by strace (deterministic, whatever the
# machine's load): ringproxy with full logging and haproxy 2.6 without logging, each with
# one thread in front of the same fast origin (haproxy answering 1 KiB bodies itself).
# After a warm-up, strace -c attaches to every thread of the proxy, N keep-alive GETs
# are sent by one curl, and strace is stopped: each call's count divided by N. Every
# server listens on 127.0.0.1 and is stopped by pid.
# Usage: bench/proxy-syscalls.sh [BUILD_DIR] [N]   (default build-bench, 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=proxy-syscalls
. bench/lib.sh
BUILD=${1:-build-bench}
N=${2:-2000}
per_request_setup "$BUILD" strace

# measure NAME PID PORT: strace -c on every thread of PID while N requests go to PORT;
# prints the calls per request, most frequent first, and their total.
measure() {
  local name=$1 pid=$2 port=$3 spid tids=()
  keepalive_gets "$port" 200
  for t in /proc/"$pid"/task/*; do tids+=(-p "${t##*/}"); done
  strace -c -U calls,name -S calls -o "$WORK/st.$port" "${tids[@]}" 2>/dev/null &
  spid=$!
  sleep 1  # (strace attaches asynchronously; no request is counted before it is on)
  keepalive_gets "$port" "$N"
  kill -INT "$spid"
  wait "$spid" 2>/dev/null || true
  echo "  $name:"
  awk -v n="$N" '$1 ~ /^[0-9]+$/ && $2 != "total" { printf "    %-16s %6.2f\n", $2, $1 / n; s += $1 }
    END { printf "    %-16s %6.2f\n", "total", s / n }' "$WORK/st.$port"
}

echo "system calls per proxied request (strace -c, $N keep-alive GETs of 1 KiB, one proxy thread, $(date -u +%F)):"
P=$(free_port)
start_ringproxy "$PROXY" sys-full "$P" "$OPORT" --cache off
measure "ringproxy full logging" "$LAST" "$P"
stop "$LAST"
P=$(free_port)
start_haproxy "$P" "$OPORT"
measure "haproxy 2.6 without logging" "$LAST" "$P"
stop "$LAST"
