#!/usr/bin/env python3
"""Scripted tests of ringlog-forward against a real rsyslogd on loopback ports.

usage: forward_test.py CASE RINGLOG_FORWARD WRITER WORKDIR RINGLOG_STAT [RINGLOG]
cases: rsyslog_tcp, rsyslog_restart, rsyslog_udp, stall, sigterm, filters, cli

rsyslogd runs in the foreground (-n) with its own config, pid file and work
directory under WORKDIR, listening on 127.0.0.1 only; it is stopped by pid. Every
wait is bounded. Transactions carry their number in the URL (/seq/NNNNNN).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import procs  # noqa: E402
from checks import need  # noqa: E402
from procs import free_port, pdeathsig as die_with_parent  # noqa: E402

CASE, FWD, WRITER, WORK, STAT = sys.argv[1:6]
TAIL = sys.argv[6] if len(sys.argv) > 6 else None  # the `ringlog` tool, for the filters case
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
INST = os.path.join(WORK, "inst")
ENV = dict(os.environ, RINGLOG_DIR=INST)
CHILDREN = []


def fail(msg):
    print("FAIL:", msg)
    for p in CHILDREN:
        if p.poll() is None:
            p.kill()
    for f in sorted(os.listdir(WORK)):
        if f.endswith(".err") or f.endswith(".rs.log"):
            print(f"--- {f}:\n" + open(os.path.join(WORK, f), errors="replace").read()[-3000:])
    sys.exit(1)


def disconnected(port):
    """No connection to the collector's port is open any more (the forwarder has seen
    it go and closed its end)."""
    return not any(s["rport"] == port and s["state"] in (procs.TCP_ESTABLISHED, 0x08)  # 0x08: CLOSE_WAIT
                   for s in procs.tcp_sockets())


def wait_for(pred, timeout, what):
    if not procs.wait_for(pred, timeout):
        fail(f"timed out after {timeout} s waiting for {what() if callable(what) else what}")


class Rsyslog:
    """rsyslogd with imtcp/imudp inputs, each writing "%hostname% %app-name% %msgid% %msg%"."""

    def __init__(self, name, tcp=(), udp=()):
        self.dir = os.path.join(WORK, name)
        os.makedirs(self.dir, exist_ok=True)
        self.tcp, self.udp = dict(tcp), dict(udp)  # port -> output file
        self.proc = None
        conf = [f'global(workDirectory="{self.dir}" maxMessageSize="64k")',
                'template(name="t" type="string" string="%hostname% %app-name% %msgid% %msg%\\n")']
        if self.tcp:
            conf.append('module(load="imtcp")')
        if self.udp:
            conf.append('module(load="imudp")')
        for i, (port, out) in enumerate(list(self.tcp.items()) + list(self.udp.items())):
            kind = "imtcp" if port in self.tcp else "imudp"
            # A big receive buffer: a burst of datagrams must not overflow the socket
            # while a loaded machine has rsyslogd off the CPU (UDP drops silently).
            extra = ' rcvbufSize="8m"' if kind == "imudp" else ""
            conf.append(f'input(type="{kind}" port="{port}" address="127.0.0.1" ruleset="r{i}"{extra})')
            # TCP: no queue between imtcp and the file (Direct), so that a killed rsyslogd
            # loses only what its kernel acknowledged and it had not read yet.
            queue = ' queue.type="Direct"' if kind == "imtcp" else ""
            conf.append(f'ruleset(name="r{i}"{queue}) {{ action(type="omfile" file="{out}" template="t") }}')
        self.conf = os.path.join(self.dir, "rsyslog.conf")
        with open(self.conf, "w") as f:
            f.write("\n".join(conf) + "\n")
        self.pidfile = os.path.join(self.dir, "rsyslogd.pid")

    def start(self):
        if os.path.exists(self.pidfile):
            os.unlink(self.pidfile)
        log = open(os.path.join(WORK, os.path.basename(self.dir) + ".rs.log"), "a")
        self.proc = subprocess.Popen([need("rsyslogd"), "-n", "-f", self.conf, "-i", self.pidfile],
                                     stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        CHILDREN.append(self.proc)

        def ready():
            if self.proc.poll() is not None:
                fail(f"rsyslogd exited with {self.proc.returncode}")
            for port in self.tcp:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                except OSError:
                    return False
            return os.path.exists(self.pidfile)
        wait_for(ready, procs.PEER_START_SECONDS, "rsyslogd to listen")
        # imudp cannot be probed by connecting: send probe datagrams until one is written
        # (lines() leaves them out).
        for port, out in self.udp.items():
            probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

            def probed():  # one more datagram per poll until one is in the file
                probe.sendto(f"<14>1 2026-01-01T00:00:00Z probe probe - - - {PROBE}".encode(), ("127.0.0.1", port))
                return any(PROBE in l for l in _raw_lines(out))
            wait_for(probed, procs.PEER_START_SECONDS, f"rsyslogd's imudp on port {port} to write a probe")
            probe.close()

    def stop(self, sig=signal.SIGTERM):
        if self.proc:
            procs.stop(self.proc, sig, timeout=15)
        self.proc = None


PROBE = "imudp-readiness-probe"


def _raw_lines(path):
    try:
        with open(path, errors="replace") as f:
            return [l.rstrip("\n") for l in f]
    except FileNotFoundError:
        return []


def lines(path):
    return [l for l in _raw_lines(path) if PROBE not in l]


def seqs(path):
    return [int(m.group(1)) for m in (re.search(r"/seq/(\d{6})", l) for l in lines(path)) if m]


def create_ring(name, size):
    path = procs.ring_path(INST, name)
    subprocess.run([WRITER, "create", path, str(size)], check=True, timeout=30)
    return path


def forwarder(name, args, instance):
    err = open(os.path.join(WORK, name + ".err"), "w")
    p = subprocess.Popen([FWD, "-n", instance] + args, stdout=err, stderr=err, env=ENV,
                         preexec_fn=die_with_parent)
    CHILDREN.append(p)
    return p


def write(ring, first, count, rate, readers=1):
    r = subprocess.run([WRITER, "write", ring, str(first), str(count), str(rate), "20", str(readers)],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"writer: {r.stderr}")
    m = re.match(r"written (\d+) dropped (\d+)", r.stdout)
    return int(m.group(1)), int(m.group(2))


def stop(p, expect=0, timeout=30):
    rc = procs.stop(p, timeout=timeout)
    if rc is None:
        fail("the forwarder did not stop after SIGTERM")
    if expect is not None and rc != expect:
        fail(f"the forwarder exited with {rc}, expected {expect}")
    return rc


def stats_counters(path):
    """FORWARD.* counters of a stats file, as ringlog-stat -j shows them."""
    r = subprocess.run([STAT, "-n", path, "-j"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail(f"ringlog-stat: {r.stderr}")
    return {k: v["value"] for k, v in json.loads(r.stdout)["counters"].items() if k.startswith("FORWARD.")}


def stderr_of(name):
    return open(os.path.join(WORK, name + ".err"), errors="replace").read()


# ---------------------------------------------------------------------------------------

def case_rsyslog_tcp():
    # One forwarder with two destinations (TCP octet counting and UDP: each gets every
    # message), a second one with JSON over TCP with LF framing, on the same ring.
    n = 2000
    ring = create_ring("t", 8 << 20)
    pa, pb, pu = free_port(), free_port(), free_port(socket.SOCK_DGRAM)
    out_a, out_b, out_u = (os.path.join(WORK, x + ".log") for x in "abu")
    rs = Rsyslog("rs", tcp={pa: out_a, pb: out_b}, udp={pu: out_u})
    rs.start()
    f1 = forwarder("ncsa", ["-t", "10", "--output", "ncsa", "-F", "%m %U %s %{User-Agent}i", "--hostname", "web1",
                            f"tcp://127.0.0.1:{pa}", f"u=udp://127.0.0.1:{pu}"], "t")
    f2 = forwarder("json", ["-t", "10", "--output", "json", "--framing", "lf", "--app-name", "proxy",
                            "--stats", os.path.join(WORK, "json.stats"), f"b=tcp://127.0.0.1:{pb}"], "t")
    written, dropped = write(ring, 0, n, 5000, readers=2)
    if dropped:
        fail(f"the writer dropped {dropped} transactions")
    wait_for(lambda: all(len(lines(o)) >= n for o in (out_a, out_b, out_u)), 60,
             lambda: f"{n} lines in each file (have {[len(lines(o)) for o in (out_a, out_b, out_u)]}: tcp a, tcp b, udp)")
    c = stats_counters(os.path.join(INST, "t", "forward.stats"))
    key = f"FORWARD.tcp:127_0_0_1:{pa}."
    if c.get(key + "connected") != 1 or c.get("FORWARD.u.connected") != 1:
        fail(f"connected gauges while running: {c}")
    stop(f1)
    stop(f2)
    rs.stop()
    la, lb, lu = lines(out_a), lines(out_b), lines(out_u)
    if len(la) != n or len(lb) != n or len(lu) != n:
        fail(f"expected {n} lines, got {len(la)}, {len(lb)} and {len(lu)}")
    for i, (l, u) in enumerate(zip(la, lu)):
        want = f'web1 ringlog ncsa GET /seq/{i:06d} 200 forward-test \\"quoted\\"'
        if l != want or u != want:
            fail(f"ncsa line {i}: tcp {l!r}, udp {u!r}, expected {want!r}")
    for i, l in enumerate(lb):
        host, app, msgid, body = l.split(" ", 3)
        if app != "proxy" or msgid != "json":
            fail(f"json line {i}: header {host} {app} {msgid}")
        g = json.loads(body)
        recs = {r["tag"]: r["value"] for t in g["transactions"] for r in t["records"] if r["tag"] != "ReqHeader"}
        if recs.get("ReqURL") != f"/seq/{i:06d}":
            fail(f"json line {i}: {body[:200]}")
        uas = [r["value"] for t in g["transactions"] for r in t["records"] if r["tag"] == "ReqHeader"]
        if 'User-Agent: forward-test "quoted"' not in uas:
            fail(f"json line {i}: header not intact: {uas}")
    c = stats_counters(os.path.join(INST, "t", "forward.stats"))
    for k in (key, "FORWARD.u."):
        if c.get(k + "sent") != n or c.get(k + "lost") != 0 or c.get(k + "failed") != 0 or c.get(k + "queued") != 0:
            fail(f"counters: {c}")
    if c.get(key + "bytes", 0) <= n * 50:
        fail(f"bytes counter: {c}")
    c = stats_counters(os.path.join(WORK, "json.stats"))
    if c.get("FORWARD.b.sent") != n:
        fail(f"counters of the json forwarder: {c}")
    print(f"ok: {n} transactions as NCSA lines to TCP (octet counting) and UDP at once, and as JSON "
          f"(LF framing), intact and in order")


def case_rsyslog_restart():
    # A killed rsyslogd loses what its kernel acknowledged but it had not read: as much
    # as it fell behind. --replay covers two seconds of the writer's rate, so a
    # descheduled rsyslogd on a loaded machine is still inside the window.
    n, rate, replay = 6000, 1500, 3000
    ring = create_ring("r", 16 << 20)
    port = free_port()
    out = os.path.join(WORK, "out.log")
    rs = Rsyslog("rs", tcp={port: out})
    rs.start()
    f = forwarder("fwd", ["-t", "10", "-F", "%U", "--replay", str(replay), "--retry-min", "0.05",
                          "--retry-max", "0.4", f"tcp://127.0.0.1:{port}"], "r")
    w = subprocess.Popen([WRITER, "write", ring, "0", str(n), str(rate), "20"], stdout=subprocess.PIPE,
                         text=True, preexec_fn=die_with_parent)
    CHILDREN.append(w)
    wait_for(lambda: len(lines(out)) > n // 5, 30, "the first fifth")
    rs.stop(signal.SIGKILL)            # killed mid-stream, no chance to flush
    wait_for(lambda: disconnected(port), 20, "the forwarder to see its collector gone")
    rs.start()
    wait_for(lambda: len(lines(out)) > n // 2, 30, "half the lines")
    rs.stop(signal.SIGTERM)            # stopped mid-stream
    wait_for(lambda: disconnected(port), 20, "the forwarder to see its collector gone")
    rs.start()
    if w.wait(timeout=60) != 0:
        fail("writer failed")
    m = re.match(r"written (\d+) dropped (\d+)", w.stdout.read())
    if int(m.group(2)):
        fail(f"the writer dropped {m.group(2)}")
    wait_for(lambda: len(set(seqs(out))) >= n, 60, "every transaction")
    stop(f)
    rs.stop()
    got = seqs(out)
    missing = sorted(set(range(n)) - set(got))
    if missing:
        fail(f"{len(missing)} transactions lost, first {missing[:10]}")
    dups = len(got) - len(set(got))
    err = stderr_of("fwd")
    resent = sum(int(a) + int(b) for a, b in re.findall(
        r"(\d+) messages not acknowledged and (\d+) replayed will be sent again", err))
    c = stats_counters(os.path.join(INST, "r", "forward.stats"))
    key = f"FORWARD.tcp:127_0_0_1:{port}."
    if c[key + "reconnects"] < 2 or c[key + "lost"] != 0 or c[key + "sent"] != n:
        fail(f"counters: {c}")
    if c[key + "resent"] > resent:
        fail(f"FORWARD resent {c[key + 'resent']} is more than announced on stderr ({resent})")
    if dups > resent:
        fail(f"{dups} duplicates, more than the {resent} messages the forwarder said it would resend")
    # Duplicates sit right after a reconnect: the lines in file order go back at most by
    # the window, never further.
    prev = -1
    for s in got:
        if s < prev - (replay + 2000):
            fail(f"line order went back from {prev} to {s}, beyond the window")
        prev = max(prev, s)
    print(f"ok: {n} transactions across a SIGKILL and a SIGTERM of rsyslogd: none lost, "
          f"{dups} duplicates within the announced window of {resent}")


def case_rsyslog_udp():
    n = 1000
    ring = create_ring("u", 8 << 20)
    port = free_port(socket.SOCK_DGRAM)
    out = os.path.join(WORK, "udp.log")
    rs = Rsyslog("rs", udp={port: out})
    rs.start()
    f = forwarder("udp", ["-t", "10", "--output", "raw", "-i", "ReqURL", f"udp://127.0.0.1:{port}"], "u")
    write(ring, 0, n // 2, 2000)
    wait_for(lambda: len(lines(out)) >= n // 2, 60, f"{n // 2} datagrams")
    # The writer restarts and recreates the ring: the forwarder follows it.
    create_ring("u", 8 << 20)
    wait_for(lambda: "reattached" in stderr_of("udp"), 30, "the forwarder to reattach")
    write(ring, n // 2, n - n // 2, 2000)
    wait_for(lambda: len(lines(out)) >= n, 60, f"{n} datagrams")
    stop(f)
    rs.stop()
    got = lines(out)
    host = socket.gethostname()
    for i, l in enumerate(got):
        m = re.fullmatch(r"(\S+) ringlog raw +(\d+) ReqURL +c /seq/(\d{6})", l)
        if not m or int(m.group(3)) != i:
            fail(f"udp line {i}: {l!r}")
    if len(got) != n:
        fail(f"{len(got)} lines for {n} transactions")
    print(f"ok: {n} raw ReqURL records over UDP to imudp, in order, across a recreated ring ({host})")


def stall_run(policy):
    n = 3000
    ring = create_ring(policy, 256 << 10)
    port = free_port()
    out = os.path.join(WORK, policy + ".log")
    stats = os.path.join(INST, policy, "forward.stats")
    f = forwarder(policy, ["-t", "10", "-F", "%U", "--buffer", "4k", "--stall-fill", "40", "--on-stall", policy,
                           "--retry-min", "0.05", "--retry-max", "0.2", f"tcp://127.0.0.1:{port}"], policy)
    written, dropped = write(ring, 0, n, 2000)
    key = f"FORWARD.tcp:127_0_0_1:{port}."
    # 3000 transactions do not fit in the ring (about 1000) plus the 4k buffer: the
    # stall must have come, whenever the forwarder got the CPU. Wait for it to say so.
    said = "drop-oldest: gave up" if policy == "drop-oldest" else "keeping the pin"
    wait_for(lambda: said in stderr_of(policy), 60, f"'{said}' on the forwarder's stderr")
    c = stats_counters(stats)
    if c.get(key + "failed", 0) < 1 or c.get(key + "connected") != 0:
        fail(f"{policy}: a collector that is down counts no failed attempt: {c}")
    rs = Rsyslog("rs-" + policy, tcp={port: out})
    rs.start()
    if policy == "drop-oldest":
        # The pin moves on: writers keep their room (some may drop if the forwarder is
        # descheduled for long on a loaded machine; with block-writers about 2000 do).
        if dropped > n // 4:
            fail(f"drop-oldest: the writers dropped {dropped} transactions")
        # Every transaction ends delivered, given up (counted) or dropped by the writer.
        wait_for(lambda: len(lines(out)) + stats_counters(stats).get(key + "lost", 0) + dropped >= n, 60,
                 lambda: f"{n} delivered + lost + dropped (have {len(lines(out))} lines, {dropped} dropped, "
                         f"{stats_counters(stats)})")
        lost = stats_counters(stats)[key + "lost"]
        if not lost:
            fail(f"drop-oldest: nothing counted as lost, stderr: {stderr_of(policy)}")
    else:
        if not dropped:
            fail(f"block-writers: the writers dropped nothing, stderr: {stderr_of(policy)}")
        wait_for(lambda: len(lines(out)) >= n - dropped, 60, f"{n - dropped} lines")
        lost = stats_counters(stats)[key + "lost"]
        if lost:
            fail(f"block-writers: the forwarder gave up {lost} messages")
    # The collector is back and the backlog delivered: the end of the stall is said.
    wait_for(lambda: "stall over" in stderr_of(policy), 60, "'stall over' on the forwarder's stderr")
    stop(f)
    rs.stop()
    got = seqs(out)
    if got != sorted(set(got)):
        fail(f"{policy}: lines out of order or repeated")
    c = stats_counters(stats)
    if c[key + "lost"] + len(got) + dropped != n:
        fail(f"{policy}: {len(got)} delivered + {c[key + 'lost']} lost + {dropped} dropped by writers != {n}")
    return len(got), lost, dropped


def case_stall():
    got, lost, dropped = stall_run("drop-oldest")
    print(f"ok: drop-oldest: {got} delivered, {lost} given up and counted, writers dropped {dropped}")
    got, lost, dropped = stall_run("block-writers")
    print(f"ok: block-writers: {got} delivered, forwarder lost {lost}, writers dropped {dropped}")

def case_sigterm():
    # A backlog in the ring (the collector is down, the forwarder's buffer is full and
    # its pin holds the rest), then SIGTERM: the forwarder reads the ring up to where it
    # was at the signal and delivers it all once the collector is back, within
    # --flush-timeout, and exits 0.
    n = 2000
    ring = create_ring("s", 2 << 20)
    port = free_port()
    out = os.path.join(WORK, "s.log")
    stats = os.path.join(INST, "s", "forward.stats")
    key = f"FORWARD.tcp:127_0_0_1:{port}."
    f = forwarder("drain", ["-t", "10", "-F", "%U", "--buffer", "4k", "--flush-timeout", "120",
                            "--retry-min", "0.05", "--retry-max", "0.2", f"tcp://127.0.0.1:{port}"], "s")
    written, dropped = write(ring, 0, n, 0)
    if dropped:
        fail(f"the writer dropped {dropped} (the ring holds them all)")
    wait_for(lambda: stats_counters(stats).get(key + "failed", 0) >= 1, 60, "a failed connection attempt")
    f.send_signal(signal.SIGTERM)
    wait_for(lambda: "SIGTERM: reading the" in stderr_of("drain"), 60, "the forwarder to start its drain")
    m = re.search(r"SIGTERM: reading the (\d+) bytes left in the ring", stderr_of("drain"))
    if not int(m.group(1)):
        fail(f"nothing left in the ring at SIGTERM: {stderr_of('drain')}")
    rs = Rsyslog("rs", tcp={port: out})
    rs.start()
    try:
        rc = f.wait(timeout=150)
    except subprocess.TimeoutExpired:
        fail("the forwarder did not finish its drain")
    rs.stop()
    got = seqs(out)
    if rc != 0 or got != list(range(n)):
        fail(f"drain: exit {rc}, {len(got)} of {n} lines (in order: {got == sorted(got)})")
    c = stats_counters(stats)
    if c[key + "sent"] != n or c[key + "lost"] != 0:
        fail(f"drain counters: {c}")
    print(f"ok: SIGTERM with {m.group(1)} bytes unread in the ring and the collector down: all {n} "
          f"delivered once it came back, exit 0")

    # The same with a collector that never comes back: bounded by --flush-timeout, and
    # what is left is said (bytes unread in the ring, messages lost) and exit 1.
    ring = create_ring("s2", 2 << 20)
    port = free_port()
    stats = os.path.join(INST, "s2", "forward.stats")
    key = f"FORWARD.tcp:127_0_0_1:{port}."
    f = forwarder("drain2", ["-t", "10", "-F", "%U", "--buffer", "4k", "--flush-timeout", "0.5",
                             "--retry-min", "0.05", "--retry-max", "0.2", f"tcp://127.0.0.1:{port}"], "s2")
    write(ring, 0, n, 0)
    wait_for(lambda: stats_counters(stats).get(key + "queued", 0) > 0, 60, "the forwarder's buffer to fill")
    rc = stop(f, expect=None)
    err = stderr_of("drain2")
    c = stats_counters(stats)
    um = re.search(r"(\d+) bytes of messages written to the ring before the signal were left unread", err)
    lm = re.search(r"(\d+) messages not delivered before --flush-timeout; counted as lost", err)
    if rc != 1 or not um or not lm or int(lm.group(1)) != c[key + "lost"] or c[key + "sent"] != 0:
        fail(f"collector never back: exit {rc}, counters {c}, stderr {err!r}")
    print(f"ok: collector never back: {um.group(1)} bytes left unread and {lm.group(1)} messages lost, "
          f"said and counted, exit 1")


def case_filters():
    # -q selects transactions, -i/-x records, exactly as ringlog does: the JSON bodies are
    # the lines of `ringlog -d -j` with the same options, byte for byte.
    if not TAIL:
        fail("the filters case needs the ringlog tool (6th argument)")
    n = 300
    ring = create_ring("q", 8 << 20)
    pj, pr = free_port(), free_port()
    out_j, out_r = os.path.join(WORK, "j.log"), os.path.join(WORK, "r.log")
    rs = Rsyslog("rs", tcp={pj: out_j, pr: out_r})
    rs.start()
    # -C: caseless regexes, as ringlog's -C.
    jsel = ["-C", "-q", 'ReqURL ~ "^/SEQ/0000[0-4]"', "-x", "ReqHeader", "-x", "Resp*,Timestamp"]
    rsel = ["-q", 'RespStatus == 200 and ReqURL ~ "[05]$"', "-i", "ReqURL", "-i", "RespStatus"]
    fj = forwarder("fj", ["-t", "10", "--output", "json", "--framing", "lf",
                          "--stats", os.path.join(WORK, "j.stats")] + jsel + [f"tcp://127.0.0.1:{pj}"], "q")
    fr = forwarder("fr", ["-t", "10", "--output", "raw", "--stats", os.path.join(WORK, "r.stats")] + rsel +
                   [f"tcp://127.0.0.1:{pr}"], "q")
    written, dropped = write(ring, 0, n, 5000, readers=2)
    if dropped:
        fail(f"the writer dropped {dropped}")
    jwant = [i for i in range(n) if i < 50]
    rwant = [i for i in range(n) if i % 5 == 0]
    wait_for(lambda: len(lines(out_j)) >= len(jwant) and len(lines(out_r)) >= 2 * len(rwant), 60,
             lambda: f"{len(jwant)} json and {2 * len(rwant)} raw lines (have {len(lines(out_j))}, {len(lines(out_r))})")
    stop(fj)
    stop(fr)
    rs.stop()
    # (ringlog itself takes one -x: its shared option setup refuses a second one.)
    ref = subprocess.run([TAIL, "-n", "q", "-d", "-j", "-C", "-q", jsel[2], "-x", "ReqHeader,Resp*,Timestamp"],
                         capture_output=True, text=True, env=ENV, timeout=60)
    if ref.returncode != 0:
        fail(f"ringlog -d -j: {ref.returncode} {ref.stderr}")
    want_bodies = ref.stdout.splitlines()
    bodies = [l.split(" ", 3)[3] for l in lines(out_j)]
    if len(want_bodies) != len(jwant) or bodies != want_bodies:
        fail(f"json: {len(bodies)} bodies, ringlog -j has {len(want_bodies)}; first difference: "
             f"{next(((a, b) for a, b in zip(bodies, want_bodies) if a != b), None)}")
    urls, tags = [], set()
    for b in bodies:
        for t in json.loads(b)["transactions"]:
            for r in t["records"]:
                tags.add(r["tag"])
                if r["tag"] == "ReqURL":
                    urls.append(r["value"])
    if urls != [f"/seq/{i:06d}" for i in jwant] or tags & {"ReqHeader", "RespStatus", "RespReason", "Timestamp"}:
        fail(f"json: -q/-x not applied: urls {urls[:5]}..., tags {sorted(tags)}")
    got = lines(out_r)
    want = []
    for i in rwant:
        want += [f"ReqURL c /seq/{i:06d}", "RespStatus c 200"]
    norm = [re.sub(r"^\S+ ringlog raw +\d+ (\S+) +", r"\1 ", l) for l in got]
    if norm != want:
        fail(f"raw: -q/-i not applied: {len(got)} lines, first {got[:4]}")
    print(f"ok: -q/-x with json ({len(bodies)} bodies identical to ringlog -d -j), -q/-i with raw "
          f"({len(got)} records)")



def run(args, timeout=30):
    return subprocess.run([FWD] + args, capture_output=True, text=True, env=ENV, timeout=timeout)


def case_cli():
    r = run(["--help"])
    if r.returncode != 0 or "--on-stall" not in r.stdout or "Exit codes" not in r.stdout:
        fail(f"--help: {r.returncode} {r.stdout}")
    # Each bad command line: exit 2 and a message that names what is wrong.
    bad = [([], "destination"), (["tcp://127.0.0.1"], "port is missing"), (["http://x:1"], "tcp://HOST:PORT"),
           (["udp://h"], "port is missing"), (["tcp://h:0"], "bad port"), (["tcp://h:65536"], "bad port"),
           (["tcp://h:1/x"], "bad port"), (["tcp://:514"], "bad host"), (["udp://[::1]514"], "[IPV6]:PORT"),
           (["a b=tcp://h:1"], "destination name"), (["a=tcp://h:1", "a=udp://h:2"], "two destinations"),
           (["--output", "xml", "tcp://h:1"], "--output"), (["-F", "%{", "tcp://h:1"], "format"),
           (["--framing", "cr", "tcp://h:1"], "--framing"), (["--on-stall", "wait", "tcp://h:1"], "--on-stall"),
           (["--bogus", "tcp://h:1"], "--bogus"), (["-q", "ReqURL ~", "tcp://h:1"], "-q"),
           (["-q", 'ReqURL ~ "(a|b"', "tcp://h:1"], "missing closing parenthesis"),
           (["--buffer", "12q", "tcp://h:1"], "--buffer"), (["--udp-max", "100", "udp://h:1"], "--udp-max"),
           (["--retry-min", "5", "--retry-max", "1", "tcp://h:1"], "--retry-max"),
           (["--stall-fill", "5", "tcp://h:1"], "--stall-fill"), (["--stats", "x", "--no-stats", "tcp://h:1"], "--no-stats"),
           (["--output", "json", "-F", "%U", "tcp://h:1"], "-F"), (["-i", "ReqURL", "tcp://h:1"], "-i"),
           (["-g", "raw", "tcp://h:1"], "--output ncsa needs"), (["--facility", "local9", "tcp://h:1"], "local9"),
           (["--severity", "loud", "tcp://h:1"], "loud")]
    for args, want in bad:
        r = run(args)
        if r.returncode != 2 or "ringlog-forward:" not in r.stderr or want not in r.stderr or "Traceback" in r.stderr:
            fail(f"{args}: exit {r.returncode}, stderr {r.stderr!r} (expected exit 2 and {want!r})")
    r = run(["-n", "nosuch", "-t", "0", "--no-stats", "tcp://127.0.0.1:9"])
    if r.returncode != 1 or "nosuch" not in r.stderr:
        fail(f"missing ring: exit {r.returncode}, stderr {r.stderr!r}")
    os.makedirs(INST, exist_ok=True)
    notring = os.path.join(INST, "notring")
    with open(notring, "wb") as f:
        f.write(b"this is not a ring\n" * 512)
    r = run(["-n", notring, "--no-stats", "tcp://127.0.0.1:9"])
    if r.returncode != 3 or "not a usable ringlog ring" not in r.stderr:
        fail(f"a file that is not a ring: exit {r.returncode} (expected 3), stderr {r.stderr!r}")
    r = run(["-Q", os.path.join(INST, "no-such-queries"), "--no-stats", "tcp://127.0.0.1:9"])
    if r.returncode != 1 or "-Q: cannot read" not in r.stderr:
        fail(f"an unreadable -Q file: exit {r.returncode} (expected 1), stderr {r.stderr!r}")
    # SIGTERM with a collector that never answers: bounded by --flush-timeout, counted.
    ring = create_ring("c", 1 << 20)
    port = free_port()
    f = forwarder("flush", ["-t", "10", "--flush-timeout", "0.5", "--retry-min", "0.05", f"tcp://127.0.0.1:{port}"], "c")
    write(ring, 0, 10, 0)
    key = f"FORWARD.tcp:127_0_0_1:{port}."
    wait_for(lambda: stats_counters(os.path.join(INST, "c", "forward.stats")).get(key + "queued") == 10, 60,
             "the 10 messages in the forwarder's buffer (FORWARD.queued)")
    c = stats_counters(os.path.join(INST, "c", "forward.stats"))
    if c.get(key + "failed", 0) < 1 or c.get(key + "sent") != 0:
        fail(f"collector down: counters {c}")
    rc = stop(f, expect=None)
    err = stderr_of("flush")
    if rc != 1 or "10 messages not delivered" not in err:
        fail(f"flush timeout: exit {rc}, stderr {err!r}")
    c = stats_counters(os.path.join(INST, "c", "forward.stats"))
    if c.get(key + "lost") != 10 or c.get(key + "queued") != 0:
        fail(f"flush timeout counters: {c}")
    # A second forwarder on the instance without a counters file of its own is refused
    # (exit 1): replacing the file would hide the running one's counters.
    pa = free_port()
    fa = forwarder("first", ["-t", "10", f"a=tcp://127.0.0.1:{pa}"], "c")
    cstats = os.path.join(INST, "c", "forward.stats")
    wait_for(lambda: "FORWARD.a.failed" in stats_counters(cstats), 60, "the first forwarder's counters")
    r = run(["-n", "c", "-t", "0", "b=tcp://127.0.0.1:9"])
    if r.returncode != 1 or "--stats FILE" not in r.stderr or "FORWARD.a.failed" not in stats_counters(cstats):
        fail(f"second forwarder on one counters file: exit {r.returncode}, stderr {r.stderr!r}")
    stop(fa)
    print("ok: usage errors exit 2, a missing ring 1, undelivered messages at exit are counted and exit 1, "
          "a second forwarder on one counters file is refused")


{"rsyslog_tcp": case_rsyslog_tcp, "rsyslog_restart": case_rsyslog_restart, "rsyslog_udp": case_rsyslog_udp,
 "stall": case_stall, "sigterm": case_sigterm, "filters": case_filters, "cli": case_cli}[CASE]()
for p in CHILDREN:
    if p.poll() is None:
        p.kill()
