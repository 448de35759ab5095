#!/usr/bin/env bash
# Installs the Debian packages ringlog needs to build, test and benchmark.
# Idempotent: does nothing when everything is already there.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libcli11-dev libncurses-dev libgtest-dev libgmock-dev libbenchmark-dev liburing-dev
  clang libclang-rt-14-dev          # libFuzzer and sanitizer runtimes
  python3 python3-matplotlib python3-prometheus-client
  tmux curl procps
  zlib1g-dev                        # ringproxy gzip filter
  libpcre2-dev                      # every regular expression (queries, -I/-X, purges), as Varnish
  haproxy varnish rsyslog wrk       # real peers for tests and benchmarks (started on loopback by the tests)
  strace valgrind                   # system-call counts and instruction counts in bench/
  lttng-tools liblttng-ust-dev      # LTTng-UST, a peer of bench_ring (its own session daemon)
  libspdlog-dev                     # spdlog's async logger, a peer of bench_ring
  dpkg-dev fakeroot systemd logrotate adduser passwd util-linux  # the .deb (cpack, dpkg-shlibdeps), systemd-analyze/sysusers, the ringlog group test
  libcpp-httplib-dev                # ringlog-stat --listen: the HTTP server of the scrape endpoint
  prometheus                        # the real Prometheus server scraping it in tests/stats (started on loopback)
  spin                              # the ring's protocol model checker (tests/model)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
