# shellcheck shell=bash disable=SC2034  # sets variables for the scripts that source it
# bench/lib.sh: what the benchmark scripts share (sourced, never run):
#   set -euo pipefail; BENCH_NAME=bench_x; . "$(dirname "$0")/lib.sh"
# A scratch directory with the instances (RINGLOG_DIR) and a list of the pids started,
# all stopped by pid and removed on exit; free loopback ports; the build step; wrk's
# figures; medians and ratios; starting ringlog_test_origin and ringproxy; the set-up and
# the keep-alive GETs of the per-request counts.
# Every server listens on 127.0.0.1.
BENCH_NAME=${BENCH_NAME:-$(basename "$0" .sh)}

die() { echo "$BENCH_NAME: $*" >&2; exit 1; }

# need TOOL...: each must be on PATH.
need() {
  local t
  for t in "$@"; do command -v "$t" >/dev/null || die "$t is missing (scripts/install-deps.sh)"; done
  [ -x /usr/bin/python3 ] || die "/usr/bin/python3 is missing"
}

# bench_build BUILD TARGET...: configures BUILD (Release) if it is new, builds the targets
# (from the top of the source tree).
bench_build() {
  local build=$1
  shift
  [ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j "$(nproc)" --target "$@" >/dev/null
}

# bench_workdir: WORK (a fresh directory under /tmp, readable by varnishd's workers),
# RINGLOG_DIR (a fresh directory under /dev/shm, where ringproxy keeps its rings by
# default, /dev/shm/ringlog; under WORK where there is no /dev/shm), the pid list
# `pids`; on exit every pid in it is stopped and both directories removed. A ring file
# on a disk file system costs the kernel's writeback of every page the ring writes
# (full logging / haproxy: ~8 % fewer req/s with the ring on ext4, 2026-12-02).
bench_workdir() {
  WORK=$(mktemp -d "/tmp/$BENCH_NAME.XXXXXX")
  chmod 755 "$WORK"
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    RINGLOG_DIR=$(mktemp -d "/dev/shm/$BENCH_NAME.XXXXXX")
    chmod 755 "$RINGLOG_DIR"
  else
    RINGLOG_DIR=$WORK/instances
    mkdir -p "$RINGLOG_DIR"
  fi
  export RINGLOG_DIR
  pids=()
  CGROUPS=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}
bench_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for p in "${CGROUPS[@]}"; do rmdir "$p" 2>/dev/null || true; done
  rm -rf "$WORK" "$RINGLOG_DIR"
}
# stop PID: SIGTERM one process we started, wait for it, drop it from the list.
stop() {
  local p=$1 q keep=()
  kill "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  for q in "${pids[@]}"; do [ "$q" = "$p" ] || keep+=("$q"); done
  pids=("${keep[@]}")
}

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_port PORT: until 127.0.0.1:PORT accepts a connection (at most 15 s).
wait_port() { for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

load() { cut -d' ' -f1-3 /proc/loadavg; }
# ratio A B: A/B to two decimals ("-" when B is 0).
ratio() { /usr/bin/python3 -c "print('%.2f' % ($1 / $2) if float($2) else '-')"; }
# secs VALUE: a wrk latency (us, ms, s) in seconds, 4 significant digits.
secs() {
  /usr/bin/python3 -c '
import sys
x = sys.argv[1]
for u, m in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
    if x.endswith(u):
        print("%.4g" % (float(x[:-len(u)]) * m)); break
else:
    print("%.4g" % float(x))' "$1"
}
# median VALUE...: the median as given ("-" for none); values are plain numbers or wrk
# latencies (us, ms, s), compared in seconds.
median() {
  /usr/bin/python3 -c '
import sys
def sec(x):
    for u, m in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if x.endswith(u):
            return float(x[:-len(u)]) * m
    return float(x)
v = sorted(sys.argv[1:], key=sec)
print(v[len(v) // 2] if v else "-")' "$@"
}

# wrk_run ARGS...: one wrk run; sets WRK_OUT (its output), WRK_RPS, WRK_P50, WRK_P99 (with
# --latency), WRK_REQS and WRK_ERRORS (its Non-2xx / socket error lines on one line, or "").
wrk_run() {
  WRK_OUT=$(wrk "$@")
  WRK_RPS=$(awk '/^Requests\/sec/ {print $2}' <<<"$WRK_OUT")
  WRK_P50=$(awk '$1 == "50%" {print $2}' <<<"$WRK_OUT")
  WRK_P99=$(awk '$1 == "99%" {print $2}' <<<"$WRK_OUT")
  WRK_REQS=$(awk '/requests in/ {print $1}' <<<"$WRK_OUT")
  WRK_ERRORS=$(grep 'Non-2xx\|Socket errors' <<<"$WRK_OUT" | tr '\n' ' ' || true)
}

# cpu_ns PID: the CPU time (user and system, nanoseconds) the threads of process PID have
# run so far: the sum of their /proc schedstat run times (nanosecond resolution, where
# /proc/PID/stat counts 10 ms ticks). Threads that have exited are not in it: the
# servers measured keep theirs for the whole run.
cpu_ns() {
  local f t total=0
  for f in /proc/"$1"/task/*/schedstat; do
    read -r t _ <"$f" 2>/dev/null || continue
    total=$((total + t))
  done
  echo "$total"
}

# cpu_ticks PID: "UTIME STIME" of process PID (all its threads, clock ticks), from
# /proc/PID/stat: the split between user space and the kernel.
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12, $13}'; }

# cpu_cap PERCENT PID...: puts each process (all its threads) into a cpu cgroup of its own
# limited to PERCENT % of one CPU, with the largest weight (so that the quota, not the
# machine's other work, bounds it). cgroup v2 (cpu.max, cpu.weight) or v1 (cfs quota,
# shares); needs root. Sets CPU_CAP_HOW to what it used, or to why it could not; fails
# then. The groups are removed on exit.
cpu_cap() {
  local pct=$1 pid d kind
  shift
  if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
    kind=v2 CG_ROOT=/sys/fs/cgroup
    grep -qw cpu "$CG_ROOT/cgroup.subtree_control" || echo +cpu >"$CG_ROOT/cgroup.subtree_control" 2>/dev/null || true
  elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    kind=v1 CG_ROOT=/sys/fs/cgroup/cpu
  else
    CPU_CAP_HOW="no cpu cgroup controller here"
    return 1
  fi
  for pid in "$@"; do
    d=$CG_ROOT/$BENCH_NAME-$$-$pid
    if ! mkdir "$d" 2>/dev/null; then
      CPU_CAP_HOW="cannot create a cgroup under $CG_ROOT (not root?)"
      return 1
    fi
    CGROUPS+=("$d")
    if [ $kind = v2 ]; then
      echo "$((pct * 1000)) 100000" >"$d/cpu.max" && echo 10000 >"$d/cpu.weight"
    else
      echo 100000 >"$d/cpu.cfs_period_us" && echo "$((pct * 1000))" >"$d/cpu.cfs_quota_us" &&
        echo 262144 >"$d/cpu.shares"
    fi || { CPU_CAP_HOW="cannot set the quota of $d"; return 1; }
    echo "$pid" >"$d/cgroup.procs" || { CPU_CAP_HOW="cannot move pid $pid into $d"; return 1; }
  done
  CPU_CAP_HOW="cgroup $kind cpu quota ${pct}000/100000 us, one group per process"
}

# start_origin: ringlog_test_origin ($ORIGIN, one thread) on a free port, in OPORT.
start_origin() {
  OPORT=$(free_port)
  "$ORIGIN" -p "$OPORT" -t 1 >/dev/null &
  pids+=("$!")
  wait_port "$OPORT" || die "ringlog_test_origin did not start"
}

# start_fast_origin [BYTES]: haproxy answering every request itself (`http-request return`,
# one thread) with a BYTES-byte body (1024), on a free port in OPORT, its pid in LAST. An
# origin this cheap bounds neither proxy in front of it, unlike ringlog_test_origin.
start_fast_origin() {
  local bytes=${1:-1024}
  OPORT=$(free_port)
  /usr/bin/python3 - "$OPORT" "$bytes" >"$WORK/fast-origin.cfg" <<'PY'
import sys
port, n = sys.argv[1], int(sys.argv[2])
print("global\n  nbthread 1\n  maxconn 4000\ndefaults\n  mode http\n  timeout client 60s\n"
      "  timeout connect 5s\n  timeout server 60s\nfrontend origin\n  bind 127.0.0.1:%s\n"
      "  http-request return status 200 content-type text/plain string %s" % (port, "x" * n))
PY
  haproxy -f "$WORK/fast-origin.cfg" -db >/dev/null 2>&1 &
  pids+=("$!")
  LAST=$!
  wait_port "$OPORT" || die "the haproxy origin did not start"
}

# haproxy_cfg PORT BACKEND_PORT [httplog]: a haproxy 2.6 proxy configuration with THREADS
# threads in front of one server; with "httplog", `option httplog` for every request into a
# 32 MiB ring "reqlog" (HAProxy's own shared-memory-style log buffer), readable on the
# stats socket $WORK/haproxy-PORT.sock.
haproxy_cfg() {
  local port=$1 be=$2 log=${3:-}
  printf 'global\n  nbthread %s\n  maxconn 4000\n  stats socket %s mode 600\n' "$THREADS" "$WORK/haproxy-$port.sock"
  if [ "$log" = httplog ]; then
    printf '  log ring@reqlog local0\nring reqlog\n  format rfc5424\n  maxlen 1200\n  size 33554432\n'
  fi
  printf 'defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n'
  printf '  http-reuse always\n'
  if [ "$log" = httplog ]; then printf '  log global\n  option httplog\n'; fi
  printf 'frontend fe\n  bind 127.0.0.1:%s\n  default_backend be\nbackend be\n  server o 127.0.0.1:%s\n' "$port" "$be"
}
# start_haproxy PORT BACKEND_PORT [httplog]: haproxy_cfg's proxy, started and waited for.
start_haproxy() {
  haproxy_cfg "$@" >"$WORK/haproxy-$1.cfg"
  haproxy -f "$WORK/haproxy-$1.cfg" -db >/dev/null 2>&1 &
  pids+=("$!")
  LAST=$!
  wait_port "$1" || die "haproxy on port $1 did not start"
}
# haproxy_ring_events PORT: how many log lines haproxy on PORT holds in its ring "reqlog".
haproxy_ring_events() {
  /usr/bin/python3 - "$WORK/haproxy-$1.sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"show events reqlog\n")
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(sum(1 for line in data.splitlines() if line.strip()))
PY
}

# per_request_setup BUILD TOOL...: the set-up of the scripts that count per proxied request
# (proxy-syscalls.sh, proxy-instructions.sh): TOOL..., haproxy, curl and cmake on PATH;
# ringproxy built in BUILD, its path in PROXY; bench_workdir; THREADS=1; the fast origin
# with 1 KiB bodies (OPORT).
per_request_setup() {
  local build=$1
  shift
  need "$@" haproxy curl cmake
  bench_build "$build" ringproxy
  PROXY=$build/proxy/server/ringproxy
  THREADS=1
  bench_workdir
  start_fast_origin 1024
}
# keepalive_gets PORT COUNT: COUNT keep-alive GETs of 1 KiB on one connection (one curl);
# fails unless all are 200.
keepalive_gets() {
  local ok
  ok=$(curl -s -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$1/size/1024?n=[1-$2]" | grep -c '^200$' || true)
  [ "$ok" = "$2" ] || die "port $1: $ok of $2 requests answered 200"
}

# start_ringproxy BIN INSTANCE PORT BACKEND_PORT EXTRA...: a ringproxy with THREADS workers,
# one backend, a ring of RING_SIZE (256M); stderr in $WORK/INSTANCE.err, its pid in LAST.
start_ringproxy() {
  local bin=$1 inst=$2 port=$3 be=$4
  shift 4
  "$bin" -n "$inst" -a "127.0.0.1:$port" -t "$THREADS" -b "o=127.0.0.1:$be" --health-path /size/0 \
    --ring-size "${RING_SIZE:-256M}" "$@" 2>"$WORK/$inst.err" &
  LAST=$!
  pids+=("$LAST")
  wait_port "$port" || { cat "$WORK/$inst.err" >&2; die "ringproxy $inst did not start"; }
}
