#!/usr/bin/env bash
# ringproxy cache benchmark against Debian's varnishd 7.1 (a script, never a timed test).
#
# Part 1: cache hits, 1 KiB objects, wrk on loopback, in one run:
#   ringproxy (cache on, THREADS workers, full logging = its default tag mask, a
#   `ringlog -n INST -g request > /dev/null` reader attached) against varnishd
#   (-s malloc,256m, the same ringlog_test_origin as backend, a `varnishlog -g request
#   > /dev/null` reader attached). Same URL, both warmed first so every run is hits;
#   ROUNDS rounds, the order alternating each round; req/s, p50/p99, the ratio per round
#   and the median ratio. Both hit counters are read around every run so a run that was
#   not all hits shows.                     (target: >= 1.5x varnishd req/s, p99 not worse)
# Part 2 (seeds/000): a 64 MiB object in pass mode, a cache fronting a cache: the inner
#   one holds the object (a hit), the outer one passes every request to it. ringproxy:
#   writev and io_uring, with and without --crc32 (both proxies); varnishd: the same
#   two-instance setup (outer `return (pass)`), no CRC filter (debug.chkcrc32 is not in
#   Varnish 7.1). Throughput with wrk -t1 -c1, then system calls per response with
#   `strace -c -f -p PID` on each process around PASS_REQS sequential curl requests.
#                     (target: io_uring >= 5x fewer syscalls/response than writev at equal
#                      or better throughput, ringproxy >= varnishd)
# Every server listens on 127.0.0.1 and is stopped by pid (trap); exits non-zero when a
# tool is missing or a server does not start, 0 otherwise (targets are printed, never
# asserted).
# Usage: bash bench/bench_cache.sh [BUILD_DIR]  (default build-bench, configured Release if new)
# Environment: DURATION (s per part-1 run, 8), CONNS (32), THREADS (ringproxy workers, 2),
#   ROUNDS (3), PASS_DURATION (s per part-2 throughput run, 8), PASS_REQS (requests under
#   strace, 5), PART (1, 2 or both; default both), READERS (1: attach the log readers in
#   part 1, the default; 0: none, to see what the readers cost), P2_TRANSPORTS (order of
#   the part-2 ringproxy runs, default "writev io_uring"), PASS_EXTRA (more ringproxy
#   options for both part-2 proxies and both transports, e.g. "--pass-window 16M").
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench_cache
. bench/lib.sh
BUILD=${1:-build-bench}
DURATION=${DURATION:-8}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
PASS_DURATION=${PASS_DURATION:-8}
PASS_REQS=${PASS_REQS:-5}
PART=${PART:-both}
READERS=${READERS:-1}
P2_TRANSPORTS=${P2_TRANSPORTS:-writev io_uring}

need wrk curl varnishd varnishlog varnishstat strace cmake ps
bench_build "$BUILD" ringproxy ringlog_test_origin ringlog-stat ringlog-tail
PROXY=$BUILD/proxy/server/ringproxy
ORIGIN=$BUILD/support/ringlog_test_origin
STAT=$BUILD/readers/ringlog-stat/ringlog-stat
RLOG=$BUILD/readers/ringlog-tail/ringlog
for b in "$PROXY" "$ORIGIN" "$STAT" "$RLOG"; do
  [ -x "$b" ] || die "$b was not built"
done
bench_workdir
start_origin

# start_proxy INSTANCE PORT BACKEND_PORT EXTRA...: a ringproxy; its pid in $LAST.
start_proxy() { start_ringproxy "$PROXY" "$@"; }
# start_varnish NAME PORT VCL_FILE EXTRA...: a varnishd in the foreground (-F), its own -n
# directory, no CLI port (-T none), no jail; the manager's pid in $LAST.
start_varnish() {
  local name=$1 port=$2 vcl=$3
  shift 3
  varnishd -F -n "$WORK/$name" -j none -T none -a "127.0.0.1:$port" -f "$vcl" "$@" >"$WORK/$name.out" 2>&1 &
  LAST=$!
  pids+=($LAST)
  wait_port "$port" || { cat "$WORK/$name.out" >&2; die "varnishd $name did not start"; }
}
varnish_counter() { varnishstat -n "$WORK/$1" -1 -f "$2" | awk -v n="$2" '$1 == n {print $2}'; }
proxy_counter() { "$STAT" -n "$1" -1 | awk -v n="$2" '$1 == n {print $2}'; }

echo "ringproxy cache benchmark: $(date -u +%FT%TZ), $(nproc) cores, load $(load)"
echo "  $(git log -1 --format='main at %h %s' 2>/dev/null || true)"
echo "  $(varnishd -V 2>&1 | head -1)"

# ---------------------------------------------------------------------------------------
# Part 1: cache hits, 1 KiB objects.
# ---------------------------------------------------------------------------------------
part1() {
  local url_path=/cache/bench1k/max-age=600/size=1024
  local RPORT VPORT rp vp
  RPORT=$(free_port)
  start_proxy bench-cache "$RPORT" "$OPORT"   # cache on (the default), default tag mask
  rp=$LAST
  VPORT=$(free_port)
  cat >"$WORK/hits.vcl" <<VCL
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$OPORT"; }
sub vcl_backend_response {
  if (beresp.ttl <= 0s) { set beresp.ttl = 600s; }
}
VCL
  start_varnish varnish-hits "$VPORT" "$WORK/hits.vcl" -s malloc,256m -t 600
  vp=$LAST
  # Log readers for the whole part, so both pay for one.
  if [ "$READERS" = 1 ]; then
    "$RLOG" -n bench-cache -g request >/dev/null 2>"$WORK/ringlog-reader.err" &
    pids+=($!)
    varnishlog -n "$WORK/varnish-hits" -g request >/dev/null 2>"$WORK/varnishlog-reader.err" &
    pids+=($!)
  fi
  sleep 1
  # Warm: the first request fetches, the next ones must hit.
  local port code
  for port in "$RPORT" "$VPORT"; do
    for _ in 1 2 3; do
      code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$url_path")
      [ "$code" = 200 ] || die "warm-up through 127.0.0.1:$port answered $code"
    done
  done
  wrk -t 2 -c "$CONNS" -d 1s "http://127.0.0.1:$RPORT$url_path" >/dev/null
  wrk -t 2 -c "$CONNS" -d 1s "http://127.0.0.1:$VPORT$url_path" >/dev/null

  echo
  echo "Part 1: cache hits, 1 KiB object $url_path, wrk -t2 -c$CONNS -d${DURATION}s --latency"
  echo "  ringproxy: $THREADS workers, cache on, default tag mask (full logging), ringlog -g request reader: $([ "$READERS" = 1 ] && echo attached || echo none)"
  echo "  varnishd: -s malloc,256m, default thread pools, varnishlog -g request reader: $([ "$READERS" = 1 ] && echo attached || echo none)"
  echo "  $ROUNDS rounds, order alternating"
  local -a R_RPS V_RPS RATIOS R_P99 V_P99
  local round name port h0 h1 m0 m1 first second
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then first=ringproxy; second=varnishd; else first=varnishd; second=ringproxy; fi
    echo "  round $round (load $(load)):"
    for name in $first $second; do
      if [ "$name" = ringproxy ]; then port=$RPORT; else port=$VPORT; fi
      if [ "$name" = ringproxy ]; then
        h0=$(proxy_counter bench-cache MAIN.cache_hit); m0=$(proxy_counter bench-cache MAIN.cache_miss)
      else
        h0=$(varnish_counter varnish-hits MAIN.cache_hit); m0=$(varnish_counter varnish-hits MAIN.cache_miss)
      fi
      wrk_run -t 2 -c "$CONNS" -d "${DURATION}s" --latency "http://127.0.0.1:$port$url_path"
      if [ "$name" = ringproxy ]; then
        h1=$(proxy_counter bench-cache MAIN.cache_hit); m1=$(proxy_counter bench-cache MAIN.cache_miss)
      else
        h1=$(varnish_counter varnish-hits MAIN.cache_hit); m1=$(varnish_counter varnish-hits MAIN.cache_miss)
      fi
      printf '    %-10s %10s req/s  p50 %-9s p99 %-9s  %s requests, cache_hit +%s, cache_miss +%s\n' \
        "$name" "$WRK_RPS" "$WRK_P50" "$WRK_P99" "$WRK_REQS" "$((h1 - h0))" "$((m1 - m0))"
      if [ -n "$WRK_ERRORS" ]; then echo "      ($name: $WRK_ERRORS)"; fi
      if [ "$name" = ringproxy ]; then R_RPS+=("$WRK_RPS"); R_P99+=("$(secs "$WRK_P99")"); else V_RPS+=("$WRK_RPS"); V_P99+=("$(secs "$WRK_P99")"); fi
    done
    RATIOS+=("$(ratio "${R_RPS[-1]}" "${V_RPS[-1]}")")
    echo "    ringproxy/varnishd req/s: ${RATIOS[-1]}x, p99 ringproxy/varnishd: $(ratio "${R_P99[-1]}" "${V_P99[-1]}")x"
  done
  echo "  Part 1 summary: ringproxy/varnishd req/s per round: ${RATIOS[*]}; median $(median "${RATIOS[@]}")x (target >= 1.5)"
  echo "    median p99: ringproxy $(median "${R_P99[@]}") s, varnishd $(median "${V_P99[@]}") s (target: not worse)"
  echo "    varnishd totals: $(varnishstat -n "$WORK/varnish-hits" -1 -f MAIN.cache_hit -f MAIN.cache_miss -f MAIN.client_req | awk '{printf "%s %s  ", $1, $2}')"
  echo "    ringproxy totals: $("$STAT" -n bench-cache -1 | awk '$1 ~ /^MAIN\.(cache_hit|cache_miss|client_req)$/ {printf "%s %s  ", $1, $2}')"
  echo "    ringproxy cache.info: $("$PROXY" -n bench-cache adm cache.info 2>&1 | tr '\n' ' ')"
  local rd
  for rd in "$WORK/ringlog-reader.err" "$WORK/varnishlog-reader.err"; do
    if [ -s "$rd" ]; then echo "    $(basename "$rd" .err) said: $(sort "$rd" | uniq -c | head -5 | tr -s ' \n' ' ')"; fi
  done
  stop "$rp"
  stop "$vp"
}

# ---------------------------------------------------------------------------------------
# Part 2: seeds/000, a 64 MiB object in pass mode, a cache fronting a cache.
# ---------------------------------------------------------------------------------------
BIG=/cache/bench64m/size=67108864   # no Cache-Control: the inner cache's default TTL applies

# syscalls_per_response URL LABEL PID...: attach `strace -c -f` to every PID (one strace
# each), make PASS_REQS sequential requests to URL, detach; prints per process the system
# calls and send calls per response and the most frequent calls; sets SYSCALLS and SENDS
# (all processes, per response).
syscalls_per_response() {
  local url=$1 label=$2
  shift 2
  local p spids=() i
  for p in "$@"; do
    strace -c -S calls -f -p "$p" -o "$WORK/strace.$p" 2>/dev/null &
    spids+=($!)
    pids+=($!)
  done
  sleep 1   # attached
  for i in $(seq "$PASS_REQS"); do
    curl -s -o /dev/null --max-time 120 "$url" || echo "      (curl $i failed)"
  done
  for p in "${spids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${spids[@]}"; do stop "$p"; done
  local total=0 sends=0 calls sc
  for p in "$@"; do
    calls=$(awk '$NF == "total" {print $4}' "$WORK/strace.$p")
    calls=${calls:-0}
    total=$((total + calls))
    # send-side calls: what the transport issues to move the body
    sc=$(awk '$NF ~ /^(writev|sendmsg|sendto|sendfile|io_uring_enter)$/ && $4 ~ /^[0-9]+$/ {n += $4} END {print n + 0}' "$WORK/strace.$p")
    sends=$((sends + sc))
    printf '      %-22s pid %-7s %8.1f syscalls/response, %6.1f send calls  top: %s\n' "$label" "$p" \
      "$(/usr/bin/python3 -c "print($calls / $PASS_REQS)")" "$(/usr/bin/python3 -c "print($sc / $PASS_REQS)")" \
      "$(awk -v n="$PASS_REQS" 'NR > 2 && $NF != "total" && $NF != "------" && $4 ~ /^[0-9]+$/ {printf "%s %.1f, ", $NF, $4 / n}' "$WORK/strace.$p" | cut -c1-160)"
    label=""
  done
  SYSCALLS=$(/usr/bin/python3 -c "print('%.1f' % ($total / $PASS_REQS))")
  SENDS=$(/usr/bin/python3 -c "print('%.1f' % ($sends / $PASS_REQS))")
}
# pass_throughput URL: wrk -t1 -c1; sets MBS and PRPS.
pass_throughput() {
  wrk_run -t 1 -c 1 -d "${PASS_DURATION}s" --timeout 60s "$1"
  PRPS=$WRK_RPS
  MBS=$(awk '/^Transfer\/sec/ {v = $2; if (v ~ /GB$/) x = v * 1024; else if (v ~ /MB$/) x = v + 0; else if (v ~ /KB$/) x = v / 1024; else x = v / 1048576; printf "%.0f", x}' <<<"$WRK_OUT")
  if [ -n "$WRK_ERRORS" ]; then echo "      (wrk: $WRK_ERRORS)"; fi
}

part2() {
  echo
  echo "Part 2 (seeds/000): 64 MiB object $BIG, passed by an outer cache to an inner one that holds it"
  echo "  ringproxy: inner --default-ttl 600 (the object is a hit there), outer --default-ttl 0 (the"
  echo "  object is uncacheable there: hit-for-pass, every GET a pass through a transient object);"
  echo "  both $THREADS workers, same --transport and --crc32${PASS_EXTRA:+ and $PASS_EXTRA}. varnishd: inner -t 600 -s malloc,256m,"
  echo "  outer vcl_recv return (pass). Throughput: wrk -t1 -c1 -d${PASS_DURATION}s; syscalls: strace -c -f"
  echo "  on each process around $PASS_REQS sequential curl requests (MiB/s below = MiB per second)."
  local tr crc ip op IPORT XPORT inst label code
  declare -gA P2_MBS P2_SC P2_SEND
  for tr in $P2_TRANSPORTS; do
    for crc in no yes; do
      label="ringproxy $tr crc=$crc"
      # shellcheck disable=SC2206  # PASS_EXTRA is a list of options
      local extra=(--transport "$tr" ${PASS_EXTRA:-})
      [ "$crc" = yes ] && extra+=(--crc32)
      IPORT=$(free_port)
      start_proxy "bench-inner-$tr-$crc" "$IPORT" "$OPORT" --default-ttl 600 "${extra[@]}"
      ip=$LAST
      XPORT=$(free_port)
      start_proxy "bench-outer-$tr-$crc" "$XPORT" "$IPORT" --default-ttl 0 "${extra[@]}"
      op=$LAST
      for _ in 1 2 3; do
        code=$(curl -s -o /dev/null --max-time 120 -w '%{http_code}' "http://127.0.0.1:$XPORT$BIG")
        [ "$code" = 200 ] || die "$label: warm-up answered $code"
      done
      local ih0 im0 op0
      ih0=$(proxy_counter "bench-inner-$tr-$crc" MAIN.cache_hit)
      im0=$(proxy_counter "bench-inner-$tr-$crc" MAIN.cache_miss)
      echo "    $label (load $(load)):"
      pass_throughput "http://127.0.0.1:$XPORT$BIG"
      echo "      throughput: $MBS MiB/s, $PRPS responses/s"
      syscalls_per_response "http://127.0.0.1:$XPORT$BIG" "outer, inner:" "$op" "$ip"
      echo "      both processes: $SYSCALLS syscalls/response, $SENDS send calls (writev, sendmsg, sendto, io_uring_enter)"
      echo "      inner cache_hit +$(($(proxy_counter "bench-inner-$tr-$crc" MAIN.cache_hit) - ih0)), cache_miss +$(($(proxy_counter "bench-inner-$tr-$crc" MAIN.cache_miss) - im0));" \
        "outer: $("$STAT" -n "bench-outer-$tr-$crc" -1 | awk '$1 ~ /^MAIN\.(cache_hit|cache_miss|cache_hitpass|s_pass|cache_pass)$/ {printf "%s %s ", $1, $2}')"
      P2_MBS[$label]=$MBS
      P2_SC[$label]=$SYSCALLS
      P2_SEND[$label]=$SENDS
      stop "$op"
      stop "$ip"
    done
  done

  label="varnishd pass"
  IPORT=$(free_port)
  cat >"$WORK/inner.vcl" <<VCL
vcl 4.1;
backend origin { .host = "127.0.0.1"; .port = "$OPORT"; .first_byte_timeout = 60s; .between_bytes_timeout = 60s; }
VCL
  start_varnish varnish-inner "$IPORT" "$WORK/inner.vcl" -s malloc,256m -t 600
  ip=$LAST
  XPORT=$(free_port)
  cat >"$WORK/outer.vcl" <<VCL
vcl 4.1;
backend inner { .host = "127.0.0.1"; .port = "$IPORT"; .first_byte_timeout = 60s; .between_bytes_timeout = 60s; }
sub vcl_recv { return (pass); }
VCL
  start_varnish varnish-outer "$XPORT" "$WORK/outer.vcl" -s malloc,256m
  op=$LAST
  for _ in 1 2 3; do
    code=$(curl -s -o /dev/null --max-time 120 -w '%{http_code}' "http://127.0.0.1:$XPORT$BIG")
    [ "$code" = 200 ] || die "$label: warm-up answered $code"
  done
  # The child process (the one that serves) of each manager.
  local ic oc
  ic=$(ps --ppid "$ip" -o pid= | head -1 | tr -d ' ')
  oc=$(ps --ppid "$op" -o pid= | head -1 | tr -d ' ')
  local vh0
  vh0=$(varnish_counter varnish-inner MAIN.cache_hit)
  echo "    $label (load $(load)):"
  pass_throughput "http://127.0.0.1:$XPORT$BIG"
  echo "      throughput: $MBS MiB/s, $PRPS responses/s"
  syscalls_per_response "http://127.0.0.1:$XPORT$BIG" "outer, inner (child):" "$oc" "$ic"
  echo "      both processes: $SYSCALLS syscalls/response, $SENDS send calls (writev, sendmsg, sendto, io_uring_enter)"
  echo "      inner cache_hit +$(($(varnish_counter varnish-inner MAIN.cache_hit) - vh0)); outer s_pass $(varnish_counter varnish-outer MAIN.s_pass)"
  P2_MBS[$label]=$MBS
  P2_SC[$label]=$SYSCALLS
  P2_SEND[$label]=$SENDS
  stop "$op"
  stop "$ip"

  echo "  Part 2 summary (MiB/s, syscalls per response in both processes):"
  for label in "ringproxy writev crc=no" "ringproxy io_uring crc=no" "ringproxy writev crc=yes" "ringproxy io_uring crc=yes" "varnishd pass"; do
    printf '    %-28s %6s MiB/s  %8s syscalls/response  %7s send calls/response\n' "$label" "${P2_MBS[$label]}" "${P2_SC[$label]}" "${P2_SEND[$label]}"
  done
  for crc in no yes; do
    echo "    io_uring/writev crc=$crc: throughput $(ratio "${P2_MBS[ringproxy io_uring crc=$crc]}" "${P2_MBS[ringproxy writev crc=$crc]}")x," \
      "syscalls writev/io_uring $(ratio "${P2_SC[ringproxy writev crc=$crc]}" "${P2_SC[ringproxy io_uring crc=$crc]}")x," \
      "send calls writev/io_uring $(ratio "${P2_SEND[ringproxy writev crc=$crc]}" "${P2_SEND[ringproxy io_uring crc=$crc]}")x (target: >= 5x fewer)"
  done
  echo "    ringproxy io_uring crc=no / varnishd throughput: $(ratio "${P2_MBS[ringproxy io_uring crc=no]}" "${P2_MBS[varnishd pass]}")x," \
    "writev crc=no / varnishd: $(ratio "${P2_MBS[ringproxy writev crc=no]}" "${P2_MBS[varnishd pass]}")x (target >= 1)"
}

case $PART in
  1) part1 ;;
  2) part2 ;;
  both) part1; part2 ;;
  *) die "PART must be 1, 2 or both" ;;
esac
echo
echo "done: $(date -u +%FT%TZ), load $(load)"
