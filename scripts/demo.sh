#!/usr/bin/env bash
# The main job. Until ringproxy exists: build, then run ringlog-demo, which creates a
# ring, writes to it from several threads and tails it live from another process.
# Extra arguments go to ringlog-demo (see ringlog-demo --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target ringlog-demo
export RINGLOG_DIR=${RINGLOG_DIR:-/dev/shm/ringlog}
if [ $# -eq 0 ]; then
  echo "== a live tail: 4 writer threads, 5 msg/s each, passive reader in another process"
  ./build/readers/ringlog-demo/ringlog-demo -n demo -w 4 -r 5 -d 3
  echo
  echo "== flat out into a small ring with a pinned (lossless) reader: writers drop, never overwrite"
  ./build/readers/ringlog-demo/ringlog-demo -n demo -s 65536 -w 4 -r 0 -d 2 -p --quiet
  echo
  echo "== flat out with a passive reader: it reports what it lost, writers never wait"
  ./build/readers/ringlog-demo/ringlog-demo -n demo -s 65536 -w 4 -r 0 -d 2 --quiet 2>&1 | sort | uniq -c | sort -rn | head -5
else
  exec ./build/readers/ringlog-demo/ringlog-demo "$@"
fi
