#!/bin/bash
# The .deb's units started under a real systemd: a Debian 12 root (debootstrap, kept
# between runs), the package installed into it with apt (dependencies included), the
# root booted with systemd-nspawn -b, and in it, with the units' hardening as shipped:
#   ringproxy.service       starts, answers curl on 127.0.0.1:8080, stops with status 0
#   ringlog-ncsa.service    starts (forking, pid file), writes /var/log/ringlog/ncsa.log,
#                           reopens it on `systemctl reload` (ExecReload, SIGHUP), stops
#   ringlog-forward.service starts, delivers to a local TCP collector (nc), stops
#   the ring                read by a member of the group ringlog; anyone else gets
#                           "permission denied"
# A manual check, not a ctest case: it needs root, systemd-nspawn, the network (for
# debootstrap and apt) and minutes. Exit 0 all passed, 1 a check failed, 77 it cannot
# run here (not root, no systemd-nspawn/debootstrap, no network).
#
# usage: nspawn_boot.sh DEB [ROOT]   (ROOT default /var/tmp/ringlog-nspawn-root)
#   DEB: build/tests/packaging/work/deb/ringlog.deb (ctest -R packaging_tests/deb_build)
set -u
DEB=${1:?usage: nspawn_boot.sh DEB [ROOT]}
ROOT=${2:-/var/tmp/ringlog-nspawn-root}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
skip() { echo "SKIP: $*"; exit 77; }
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; return 1; fi; }

[ "$(id -u)" = 0 ] || skip "needs root"
command -v systemd-nspawn >/dev/null || skip "no systemd-nspawn (apt-get install systemd-container)"
[ -f "$DEB" ] || { echo "no package at $DEB"; exit 1; }

# --- the root: Debian 12 minbase with systemd, made once ---
if [ ! -x "$ROOT/usr/lib/systemd/systemd" ]; then
	command -v debootstrap >/dev/null || skip "no debootstrap (apt-get install debootstrap)"
	echo "debootstrap bookworm into $ROOT"
	rm -rf "$ROOT.tmp"
	nice -n 10 debootstrap --variant=minbase \
		--include=systemd,systemd-sysv,dbus,curl,logrotate,procps,netcat-openbsd \
		bookworm "$ROOT.tmp" "$MIRROR" >"$ROOT.debootstrap.log" 2>&1 ||
		skip "debootstrap failed (network?), see $ROOT.debootstrap.log"
	mv "$ROOT.tmp" "$ROOT"
fi

# --- the package, with its dependencies, into the root (not booted: apt only) ---
cp "$DEB" "$ROOT/root/ringlog.deb"
for p in netcat-openbsd; do  # a root made by an older version of this script
	[ -e "$ROOT/var/lib/dpkg/info/$p.list" ] || extra="${extra:-} $p"
done
systemd-nspawn -q -D "$ROOT" --register=no --keep-unit --pipe -- /bin/sh -c \
	"apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall /root/ringlog.deb ${extra:-}" \
	>"$ROOT.apt.log" 2>&1 || { echo "apt-get install of the package failed:"; tail -20 "$ROOT.apt.log"; exit 1; }
ok "apt-get install ringlog.deb with its dependencies"
# A member of the group ringlog and a user outside it, to read the ring.
systemd-nspawn -q -D "$ROOT" --register=no --keep-unit --pipe -- /bin/sh -c \
	'getent passwd member >/dev/null || useradd -m -G ringlog member;
	 getent passwd outsider >/dev/null || useradd -m outsider;
	 printf "DESTINATIONS=\"tcp://127.0.0.1:5140\"\nOPTIONS=\"\"\n" >/etc/default/ringlog-forward' \
	>/dev/null 2>&1 || bad "users member and outsider"

# --- boot ---
CONSOLE=$ROOT.console.log
systemd-nspawn -q -D "$ROOT" --register=no --keep-unit -M ringlog-units -b --console=passive \
	>"$CONSOLE" 2>&1 &
NSPAWN=$!
cleanup() {
	if kill -0 "$NSPAWN" 2>/dev/null; then
		kill -TERM "$NSPAWN"  # nspawn shuts the container down (SIGRTMIN+3 to its init)
		for _ in $(seq 300); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$NSPAWN" 2>/dev/null && kill -KILL "$NSPAWN"
	fi
}
trap cleanup EXIT
LEADER=
for _ in $(seq 300); do
	LEADER=$(ps -o pid= --ppid "$NSPAWN" | head -1 | tr -d ' ')
	[ -n "$LEADER" ] && [ "$(readlink /proc/"$LEADER"/exe 2>/dev/null)" != "$(readlink /proc/$NSPAWN/exe)" ] && break
	kill -0 "$NSPAWN" 2>/dev/null || break
	sleep 0.1
done
[ -n "$LEADER" ] || { echo "the container did not start:"; cat "$CONSOLE"; exit 1; }
ct() { nsenter -t "$LEADER" -a -- /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
# until: run a command in the container until it succeeds (at most $1 tenths of a second)
until_ct() { local n=$1; shift; for _ in $(seq "$n"); do ct "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
# logged URL FILE: request http://127.0.0.1:8080/URL-<n> until FILE shows one (a reader
# started by systemctl start follows the ring from when it attaches, which the start
# does not wait for; nor does a reload wait for the reopen)
logged() {
	local i
	for i in $(seq 100); do
		ct curl -sf -o /dev/null "http://127.0.0.1:8080/$1-$i"
		ct grep -q "/$1-" "$2" 2>/dev/null && return 0
		sleep 0.2
	done
	return 1
}
until_ct 600 test -S /run/systemd/private || { echo "no systemd in the container:"; cat "$CONSOLE"; exit 1; }
state=$(ct timeout 120 systemctl is-system-running --wait 2>&1)
echo "container booted: $state (init pid $LEADER on the host)"
[ "$state" = running ] || ct systemctl --failed --no-legend

active() { [ "$(ct systemctl is-active "$1")" = active ]; }
status() { ct systemctl status --no-pager -n 20 "$1"; }

# --- ringproxy ---
ct systemctl start ringproxy.service
check "ringproxy.service active" active ringproxy.service || status ringproxy.service
check "ringproxy answers curl http://127.0.0.1:8080/" until_ct 100 curl -sf -o /dev/null http://127.0.0.1:8080/
check "ring and stats files in /dev/shm/ringlog/default, group ringlog" \
	ct sh -c 'ls -l /dev/shm/ringlog/default/ | grep -q " ringproxy ringlog "'

# --- ringlog-ncsa ---
ct systemctl start ringlog-ncsa.service
check "ringlog-ncsa.service active" active ringlog-ncsa.service || status ringlog-ncsa.service
check "ringlog-ncsa writes /var/log/ringlog/ncsa.log" logged nspawn-1 /var/log/ringlog/ncsa.log
ct mv /var/log/ringlog/ncsa.log /var/log/ringlog/ncsa.log.1
ct systemctl reload ringlog-ncsa.service
check "ringlog-ncsa.service active after reload" active ringlog-ncsa.service
check "reload (SIGHUP) reopens ncsa.log" logged nspawn-2 /var/log/ringlog/ncsa.log

# --- ringlog-forward, to a collector on 127.0.0.1:5140 ---
ct sh -c 'rm -f /tmp/collected; nohup nc -lk 127.0.0.1 5140 >/tmp/collected 2>/dev/null </dev/null & echo $! >/tmp/nc.pid'
until_ct 50 sh -c 'ss -ltn 2>/dev/null | grep -q :5140 || grep -qi ":13F4 " /proc/net/tcp'
ct systemctl start ringlog-forward.service
check "ringlog-forward.service active" active ringlog-forward.service || status ringlog-forward.service
check "ringlog-forward delivers to the collector" logged nspawn-3 /tmp/collected || {
	ct sh -c 'ls -l /tmp/collected; cat /proc/net/tcp | head; ringlog-stat -n default -1 2>&1 | grep -i forward'; }

# --- the ring: a member reads it, an outsider is refused ---
r=$(ct setpriv --reuid=member --regid=member --init-groups -- ringlog -d -g raw 2>&1)
check "member of ringlog reads the ring (ringlog -d)" grep -q nspawn-1 <<<"$r"
r=$(ct setpriv --reuid=outsider --regid=outsider --init-groups -- ringlog -d 2>&1)
check "outsider: ringlog -d says permission denied" grep -qi "permission denied" <<<"$r"
echo "     outsider sees: $(head -1 <<<"$r")"

# --- stop: each exits by itself on SIGTERM, status 0 ---
for u in ringlog-forward ringlog-ncsa ringproxy; do
	ct systemctl stop "$u.service"
	res=$(ct systemctl show -P Result "$u.service")
	code=$(ct systemctl show -P ExecMainStatus "$u.service")
	check "$u.service stopped: Result=$res ExecMainStatus=$code" [ "$res" = success ] && [ "$code" = 0 ]
done
ct sh -c 'kill $(cat /tmp/nc.pid)' 2>/dev/null
echo "journal of the units:"
ct journalctl -b --no-pager -q -u ringproxy -u ringlog-ncsa -u ringlog-forward | tail -40

[ "$fails" = 0 ] && { echo "PASS"; exit 0; }
echo "$fails check(s) failed"; exit 1
