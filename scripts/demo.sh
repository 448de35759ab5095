#!/usr/bin/env bash
# The main job: build ringproxy and the readers, run ringproxy with its built-in demo
# origin on 127.0.0.1, drive a bounded amount of traffic through it (curl, then a
# 2-second wrk burst), and show the live log (`ringlog -g request`: each request with
# its backend fetch nested) and the counters (`ringlog-stat -1`). Nothing else needs
# to be installed; every process started here is stopped by pid at the end.
# Without the `ringlog` tool in the tree, the log part falls back to ringlog-demo.
# Environment: RINGLOG_DIR (default /dev/shm/ringlog), DEMO_PORT (default 18080).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
have_tail=0
if grep -qs 'ringlog-tail' readers/ringlog-tail/CMakeLists.txt; then have_tail=1; fi
targets="ringproxy ringlog-stat ringlog-demo"
[ $have_tail = 1 ] && targets="$targets ringlog-tail"
cmake --build build -j "$(nproc)" --target $targets
export RINGLOG_DIR=${RINGLOG_DIR:-/dev/shm/ringlog}
port=${DEMO_PORT:-18080}
inst=ringproxy-demo
proxy=./build/proxy/server/ringproxy
tail_bin=./build/readers/ringlog-tail/ringlog
base="http://127.0.0.1:$port"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "== ringproxy on 127.0.0.1:$port, built-in demo origin, instance '$inst' ($RINGLOG_DIR/$inst)"
"$proxy" -n "$inst" -a "127.0.0.1:$port" -t 2 --trusted 127.0.0.1 &
pids+=($!)
for _ in $(seq 100); do
  "$proxy" -n "$inst" adm ping >/dev/null 2>&1 && break
  sleep 0.1
done
"$proxy" -n "$inst" adm ping

if [ $have_tail = 1 ] && [ -x "$tail_bin" ]; then
  echo
  echo "== live: ringlog -n $inst -g request (the first 4 requests: a miss with its fetch, then a hit)"
  "$tail_bin" -n "$inst" -g request -k 4 &
  tail_pid=$!
  pids+=($tail_pid)
  sleep 0.3
fi

echo
echo "== traffic: curl (sizes and cacheability chosen by the URL), a traced request, a bad one"
for url in /1k /1k /64k /private/2k "/obj/300?ttl=5"; do
  curl -s -o /dev/null -w "  GET %{url_effective} -> %{http_code}, %{size_download} bytes\n" "$base$url"
done
curl -s -o /dev/null -H 'X-Ringlog-Trace: 1' -w "  GET %{url_effective} (traced) -> %{http_code}\n" "$base/traced/512"
printf 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n' |
  curl -s --max-time 2 telnet://127.0.0.1:$port 2>/dev/null | head -1 | sed 's/^/  smuggling attempt -> /' || true
if [ -n "${tail_pid:-}" ]; then wait "$tail_pid" 2>/dev/null || true; fi

if [ $have_tail = 1 ] && [ -x "$tail_bin" ]; then
  echo
  echo "== the traced request, from the ring: ringlog -n $inst -d -g request -q 'ReqURL ~ \"^/traced\"'"
  "$tail_bin" -n "$inst" -d -g request -q 'ReqURL ~ "^/traced"' | head -80
fi

echo
echo "== the cache: ringproxy -n $inst adm cache.info"
./build/proxy/server/ringproxy -n "$inst" adm cache.info | sed 's/^/  /'

if command -v wrk >/dev/null; then
  echo
  echo "== load: wrk -t2 -c16 -d2s $base/1k (bounded: 2 seconds)"
  wrk -t2 -c16 -d2s --latency "$base/1k" | sed -n '1,12p'
else
  echo "== load: 200 curl requests"
  for i in $(seq 200); do curl -s -o /dev/null "$base/$i"; done
fi

echo
echo "== ringlog-stat -1 -n $inst (counters; info level)"
./build/readers/ringlog-stat/ringlog-stat -1 -n "$inst" | grep -E '^(MAIN|VBE|RING|STAT)\.' | awk '$2 != 0' | head -40

if [ $have_tail != 1 ] || [ ! -x "$tail_bin" ]; then
  echo
  echo "== (no ringlog tool in this tree) the ring demo: writers + a live tail in another process"
  ./build/readers/ringlog-demo/ringlog-demo -n demo -w 4 -r 5 -d 3
fi

echo
echo "== SIGTERM: ringproxy finishes in-flight requests, flushes its log, exits 0"
kill -TERM "${pids[0]}"
wait "${pids[0]}" && echo "  ringproxy exited 0"
pids=("${pids[@]:1}")
