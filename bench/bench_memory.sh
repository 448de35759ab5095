#!/usr/bin/env bash
# Memory per idle keep-alive connection (a script, never a timed test): ringproxy against
# Debian's haproxy 2.6 in one run, both in front of the same ringlog_test_origin.
# Each round starts every proxy afresh (in an order that rotates), warms it with a short
# wrk run (which also wraps ringproxy's ring, so its pages are all resident before the
# baseline), reads /proc/PID/smaps_rollup, then has bench/idle_conns.py open CONNS
# connections one after another, each serving one keep-alive GET of 1 KiB and then held
# idle, and reads smaps_rollup again once every thread of the proxy sleeps and CONNS
# connections are established on its port. The figure is (after - before) / CONNS, in
# bytes, for Rss, Pss and Pss_Anon (the private heap); medians over the rounds. Prints
# PASS/FAIL against the target and exits 0 unless something could not run. Every server
# listens on 127.0.0.1 and is stopped by pid.
# Usage: bench/bench_memory.sh [BUILD_DIR]   (default build-bench, configured Release if new)
# Environment: CONNS (1000), THREADS (proxy threads, 2), ROUNDS (3).
# Target: ringproxy's Pss per idle connection <= haproxy's.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench_memory
. bench/lib.sh
BUILD=${1:-build-bench}
CONNS=${CONNS:-1000}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
RING_SIZE=1M  # small, so that the warm-up wraps it: its pages are in the baseline
need wrk haproxy cmake
bench_build "$BUILD" ringproxy ringlog_test_origin proxy_log_reader
PROXY=$BUILD/proxy/server/ringproxy
ORIGIN=$BUILD/support/ringlog_test_origin
READER=$BUILD/support/proxy_log_reader
URL_PATH=/size/1024
bench_workdir
start_origin
[ "$(ulimit -Hn)" -ge $((CONNS + 64)) ] || die "the hard limit of open files ($(ulimit -Hn)) is below CONNS + 64"
ulimit -n "$(ulimit -Hn)"

echo "memory per idle keep-alive connection: $(date -u +%FT%TZ), $(nproc) cores, load $(load)"
echo "  $CONNS connections, each after one GET $URL_PATH (1 KiB); proxies $THREADS threads; $ROUNDS rounds, medians"

# mem PID: "Rss Pss Pss_Anon" of PID in kB.
mem() { awk '$1 == "Rss:" {r = $2} $1 == "Pss:" {p = $2} $1 == "Pss_Anon:" {a = $2} END {print r, p, a}' "/proc/$1/smaps_rollup"; }
# settled PID PORT N: every thread of PID asleep and N connections established on PORT
# (at most 30 s; 1 if not reached).
settled() {
  /usr/bin/python3 - "$@" <<'PY'
import os, sys, time
pid, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def asleep():
    try:
        return all(open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[0] == "S"
                   for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return False
def established():
    c = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            next(f)
            for line in f:
                w = line.split()
                c += int(w[1].rsplit(":", 1)[1], 16) == port and w[3] == "01"
    return c
end = time.monotonic() + 30
while time.monotonic() < end:  # bounded poll on /proc state
    if established() == n and asleep() and asleep():
        sys.exit(0)
    time.sleep(0.1)
print(f"  (not settled: {established()} established, want {n})", file=sys.stderr)
sys.exit(1)
PY
}

write_haproxy_cfg() {  # write_haproxy_cfg PORT
  cat >"$WORK/haproxy.cfg" <<HAPROXY
global
  nbthread $THREADS
  maxconn $((CONNS * 2 + 100))
defaults
  mode http
  timeout connect 5s
  timeout client 300s
  timeout server 60s
  timeout http-keep-alive 300s
  http-reuse always
frontend fe
  bind 127.0.0.1:$1
  default_backend be
backend be
  server o 127.0.0.1:$OPORT
HAPROXY
}

# start NAME: starts the proxy NAME on a free port; sets PORT and PID.
start() {
  PORT=$(free_port)
  case $1 in
    haproxy)
      write_haproxy_cfg "$PORT"
      haproxy -f "$WORK/haproxy.cfg" -db >/dev/null 2>&1 &
      PID=$!
      pids+=("$PID")
      wait_port "$PORT" || die "haproxy did not start"
      ;;
    ringproxy-pass | ringproxy-hit)
      local cache=off
      [ "$1" = ringproxy-hit ] && cache=on
      start_ringproxy "$PROXY" "$1" "$PORT" "$OPORT" --cache "$cache" --timeout_idle 300
      PID=$LAST
      ;;
  esac
}
ring_wrapped() {  # ring_wrapped INSTANCE: the ring has been written past its size once
  "$READER" --stats "$RINGLOG_DIR/$1" | awk '$1 == "RING.bytes_written" {exit !($2 > 1048576)}'
}

declare -A RSS PSS ANON
measure() {  # measure NAME
  local name=$1 before after
  start "$name"
  for _ in 1 2 3 4 5; do
    wrk -t1 -c8 -d1s "http://127.0.0.1:$PORT$URL_PATH" >/dev/null
    [ "$name" = haproxy ] || ! ring_wrapped "$name" || break
  done
  [ "$name" = haproxy ] || ring_wrapped "$name" || echo "  ($name: the ring did not wrap in the warm-up)"
  settled "$PID" "$PORT" 0 || true
  before=$(mem "$PID")
  coproc HOLD { exec /usr/bin/python3 bench/idle_conns.py "$PORT" "$CONNS" "$URL_PATH"; }
  local held=""
  read -r held _ <&"${HOLD[0]}" || true
  [ "$held" = held ] || die "idle_conns.py could not hold $CONNS connections to $name"
  settled "$PID" "$PORT" "$CONNS" || true
  after=$(mem "$PID")
  local in_fd=${HOLD[1]}
  exec {in_fd}>&-  # idle_conns.py sees the end of its input: it closes them and exits
  wait "$HOLD_PID" || true
  stop "$PID"
  # shellcheck disable=SC2086 # the figures split into their words
  set -- $before $after
  RSS[$name]+="$(( ($4 - $1) * 1024 / CONNS )) "
  PSS[$name]+="$(( ($5 - $2) * 1024 / CONNS )) "
  ANON[$name]+="$(( ($6 - $3) * 1024 / CONNS )) "
  printf '    %-15s before %s kB, with %d idle: %s kB (Rss Pss Pss_Anon)\n' "$name" "$before" "$CONNS" "$after"
}

NAMES=(haproxy ringproxy-pass ringproxy-hit)
for r in $(seq "$ROUNDS"); do
  echo "  round $r:"
  for i in "${!NAMES[@]}"; do measure "${NAMES[$(( (i + r - 1) % ${#NAMES[@]} ))]}"; done
done

echo
echo "bytes per idle keep-alive connection (median; per round):"
# shellcheck disable=SC2086 # the lists split into their values
for n in "${NAMES[@]}"; do
  printf '  %-15s Rss %6s  Pss %6s  Pss_Anon %6s   (Pss per round: %s)\n' "$n" "$(median ${RSS[$n]})" \
    "$(median ${PSS[$n]})" "$(median ${ANON[$n]})" "${PSS[$n]}"
done
# shellcheck disable=SC2086
h=$(median ${PSS[haproxy]})
echo
for n in ringproxy-pass ringproxy-hit; do
  # shellcheck disable=SC2086
  p=$(median ${PSS[$n]})
  verdict=FAIL
  [ "$p" -le "$h" ] && verdict=PASS
  echo "  $n / haproxy 2.6, Pss per idle connection: $p / $h = $(ratio "$p" "$h")x  (target <= 1.0) $verdict"
done
