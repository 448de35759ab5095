#!/usr/bin/env python3
"""ringlog-stat --listen, the Prometheus scrape endpoint, against real peers: Debian's
prometheus server scraping it after traffic through ringproxy, and raw-socket clients
that misbehave. Every server listens on 127.0.0.1 only and is stopped by pid.

usage: stat_listen_test.py CASE RINGLOG_STAT DEMO_WRITER RINGPROXY ORIGIN LOG_READER WORKDIR
  cli           --listen's command-line errors (exit 2), a port in use (exit 1), several -n
  http          GET/HEAD /metrics, 404 elsewhere, 405 for other methods, 400/413/414, gzip
  slow_clients  silent, trickling and non-reading clients do not hold up other scrapes
  restart       an instance whose ringproxy stops, vanishes and restarts is followed
  prometheus    a real Prometheus (1 s scrape interval) sees what ringlog-stat -1 prints
"""
import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import e2e  # noqa: E402
import procs  # noqa: E402
from checks import need, skip  # noqa: E402
from e2e import CHILDREN, Origin, Proxy, check, read_response, request, stop, wait_for  # noqa: E402

CASE, STAT, WRITER, PROXY_BIN, ORIGIN_BIN, READER, WORK = sys.argv[1:8]

# What the server promises (ringlog-stat(1)): a connection that sends nothing is closed
# after this many seconds.
SILENT_CLOSE_SECONDS = 5


class Stat:
    """ringlog-stat --listen on a port of its own choosing (127.0.0.1:0), its stderr
    collected line by line; ready once it says where it serves."""

    def __init__(self, *names, extra=()):
        cmd = [STAT, "--listen", "127.0.0.1:0"]
        for n in names:
            cmd += ["-n", n]
        self.proc = subprocess.Popen(cmd + list(extra), stderr=subprocess.PIPE, text=True,
                                     preexec_fn=procs.pdeathsig)
        CHILDREN.append(self.proc)
        self.lines = []
        threading.Thread(target=self._collect, daemon=True).start()
        m = wait_for(lambda: self.proc.poll() is not None or self.serving(), 30)
        if self.proc.poll() is not None or not m:
            raise RuntimeError(f"ringlog-stat --listen did not start: {self.log()}")
        self.port = int(m.group(1))

    def _collect(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def serving(self):
        for line in list(self.lines):
            m = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", line)
            if m:
                return m
        return None

    def log(self):
        return "\n".join(self.lines)

    def said(self, pattern, timeout=10):
        """True once a line of its stderr matches pattern. What a scrape tells is written
        before its response is sent, but this process takes the line from the pipe in
        another thread, maybe after the response: wait for that thread to have it."""
        return wait_for(lambda: any(re.search(pattern, l) for l in list(self.lines)), timeout)

    def scrape(self):
        """GET /metrics: (status, {(sample name, frozenset of labels): value}); the body
        is parsed by prometheus_client's text parser (an invalid one fails the check)."""
        r = request(self.port, "/metrics")
        return r.status, parse(r.body.decode()) if r.status == 200 else {}

    def stop(self):
        rc = stop(self.proc)
        check(rc == 0, f"ringlog-stat --listen exits 0 on SIGTERM (got {rc}): {self.log()[-2000:]}")
        check("Sanitizer" not in self.log() and "runtime error:" not in self.log(), "no sanitizer report",
              self.log()[-3000:])


def parse(text):
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[(s.name, frozenset(s.labels.items()))] = s.value
    except Exception as e:  # noqa: BLE001 - an exposition the parser refuses is a failed check
        check(False, f"the exposition parses: {e}", text[:2000])
    return out


def value(samples, name, inst, **labels):
    return samples.get((name, frozenset({"ringlog_instance": inst, **labels}.items())))


def one_value(name, inst):
    """The value ringlog-stat -1 prints for counter `name` of instance `inst` (None if absent)."""
    r = subprocess.run([STAT, "-1", "-n", inst, "-f", name], capture_output=True, text=True, timeout=30)
    for line in r.stdout.splitlines():
        w = line.split()
        if w and w[0] == name:
            return float(w[1])
    return None


def writer(name, *extra):
    ready = os.path.join(WORK, name + ".ready")
    p = procs.start_ready([WRITER, "--dir", procs.instance_dir(e2e.RINGLOG_DIR, name), "--ready", ready, *extra],
                          ready, "demo writer", preexec_fn=procs.pdeathsig)
    CHILDREN.append(p)
    return p


def traffic(proxy, n, path="/size/100"):
    """n requests through the proxy, each answered 200 in full."""
    for i in range(n):
        r = request(proxy.port, f"{path}?i={i}")
        check(r.status == 200 and len(r.body) == 100, f"request {i} through ringproxy: {r}")


def same_name_proxy(old, backends):
    """A ringproxy with the instance name of `old`: a restarted one."""
    Proxy.n -= 1
    p = Proxy(backends)
    check(p.instance == old.instance, f"restarted ringproxy has the same instance name ({p.instance})")
    return p


def raw_exchange(port, data):
    """Sends bytes on a new connection and reads the one response (head and body)."""
    s = e2e.connect(port)
    try:
        s.sendall(data)
        f = s.makefile("rb")
        method = data.split(b" ", 1)[0].decode("latin-1")
        return read_response(f, method) or e2e.Resp(0, "closed", {}, b"", True)
    finally:
        s.close()


def read_to_end(s, chunk=4096, pause=0.0):
    """Everything a socket receives until the peer closes, chunk bytes per recv and,
    for a slow reader, pause seconds between them (its pace, not a synchronisation)."""
    data = b""
    while True:
        b = s.recv(chunk)
        if not b:
            return data
        data += b
        if pause:
            time.sleep(pause)


def still_open(s):
    """True while the peer has neither closed nor reset the connection (nothing to read
    yet, no EOF)."""
    timeout = s.gettimeout()
    s.setblocking(False)  # with a timeout set, python would wait for data before recv
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.settimeout(timeout)


def server_sockets(port):
    """Established connections the server on port holds (its side of them)."""
    return [t for t in procs.tcp_sockets() if t["lport"] == port and t["state"] == procs.TCP_ESTABLISHED]


# ---- cases --------------------------------------------------------------------------

def case_cli():
    def run(*args):
        return subprocess.run([STAT, *args], capture_output=True, text=True, timeout=30)

    for args in (["--listen"], ["--listen", "nonsense"], ["--listen", "127.0.0.1"], ["--listen", "127.0.0.1:99999"],
                 ["--listen", "::1:9123"], ["--listen", "127.0.0.1:x"], ["--listen", "127.0.0.1:0", "-1"],
                 ["--listen", "127.0.0.1:0", "--prometheus"], ["--listen", "127.0.0.1:0", "-t", "1"],
                 ["-n", "a", "-n", "b", "-1"], ["-n", "a", "-n", "b", "-j"], ["-n", "a", "-n", "a", "--prometheus"],
                 ["-n", "", "-n", "default", "--listen", "127.0.0.1:0"]):
        r = run(*args)
        check(r.returncode == 2 and "ringlog-stat:" in r.stderr and "--help" in r.stderr,
              f"{args}: exit 2 with a message (got {r.returncode}: {r.stderr!r})")

    # A port somebody else listens on: exit 1, saying so (httplib's SO_REUSEPORT is off).
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    r = run("--listen", f"127.0.0.1:{port}", "-n", "x")
    check(r.returncode == 1 and "cannot listen" in r.stderr and "in use" in r.stderr,
          f"a port in use: exit 1 ({r.returncode}: {r.stderr!r})")
    busy.close()
    r = run("--listen", "192.0.2.1:0", "-n", "x")  # TEST-NET-1: no address of this host
    check(r.returncode == 1 and "cannot listen" in r.stderr, f"an address not of this host: exit 1 ({r.stderr!r})")

    # --prometheus with several -n: the exposition --listen serves, once.
    w1, w2 = writer("one", "--fixed"), writer("two", "--fixed")
    try:
        r = run("--prometheus", "-n", "one", "-n", "two")
        check(r.returncode == 0, f"--prometheus -n one -n two exits 0: {r.stderr}")
        s = parse(r.stdout)
        check(value(s, "ringlog_main_client_req_total", "one") == 1000 and
              value(s, "ringlog_main_client_req_total", "two") == 1000, "both instances, told apart by ringlog_instance")
        check(value(s, "ringlog_vbe_req_total", "two", ident="web2") == 20, "ident after ringlog_instance")
        check(value(s, "ringlog_up", "one") == 1 and value(s, "ringlog_writer_running", "two") == 1, "ringlog_up")
        check(r.stdout.count("# TYPE ringlog_main_client_req_total ") == 1 and
              r.stdout.count("# HELP ringlog_main_client_req_total ") == 1, "HELP and TYPE once across instances")
        check(not any(k for k in s if ("instance", "one") in k[1]), "no label named instance (Prometheus's own)")
        r = run("--prometheus", "-n", "one", "-n", "nosuch")
        check(r.returncode == 1 and "nosuch" in r.stderr, f"--prometheus with a missing instance exits 1 ({r.stderr!r})")
    finally:
        stop(w1), stop(w2)


def case_http():
    w = writer("web", "--fixed")
    st = Stat("web")
    port = st.port
    r = request(port, "/metrics")
    check(r.status == 200 and r.h("content-type") == "text/plain; version=0.0.4; charset=utf-8",
          f"GET /metrics: 200 text/plain version 0.0.4 ({r.status} {r.h('content-type')})")
    s = parse(r.body.decode())
    check(value(s, "ringlog_main_client_req_total", "web") == 1000, "GET /metrics: the counters")
    text = r.body.decode()
    types = re.findall(r"^# TYPE (\S+) ", text, re.M)
    check(types and len(types) == len(set(types)), "one TYPE line per family")
    check(all(re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", t) for t in types), "valid metric names")
    r2 = request(port, "/metrics?debug=1")
    check(r2.status == 200 and b"ringlog_up" in r2.body, "a query string is ignored")

    h = request(port, "/metrics", method="HEAD")
    check(h.status == 200 and h.h("content-type", "").startswith("text/plain") and int(h.h("content-length", "0")) > 0,
          f"HEAD /metrics: 200 with the head of GET ({h})")
    # Nothing after the head: the connection ends right there (Connection: close).
    s_ = e2e.connect(port)
    s_.sendall(e2e.request_bytes(port, "/metrics", method="HEAD"))
    head = e2e.recv_until(s_, b"\r\n\r\n")
    rest = read_to_end(s_)
    s_.close()
    check(head.startswith(b"HTTP/1.1 200") and rest == b"", f"HEAD sends no body ({len(rest)} bytes after the head)")

    for path in ("/", "/metricsx", "/metrics/", "/favicon.ico", "/api/v1/query", "/%2e%2e/etc/passwd"):
        r = request(port, path)
        check(r.status == 404 and b"/metrics" in r.body, f"GET {path}: 404 ({r.status} {r.body!r})")
    r = request(port, "/", method="HEAD")
    check(r.status == 404, f"HEAD /: 404 ({r.status})")
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        r = request(port, "/metrics", method=method, body=b"x=1")
        check(r.status == 405 and "GET" in r.h("allow", ""), f"{method} /metrics: 405 with Allow ({r})")
    r = request(port, "/metrics", method="OPTIONS")
    check(r.status == 204 and "GET" in r.h("allow", ""), f"OPTIONS /metrics: 204 with Allow ({r})")

    # Malformed or oversized requests: a 4xx answer, and the server goes on serving.
    bad = {
        "garbage request line": b"garbage\r\n\r\n",
        "unknown method": b"BREW /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        "bad version": b"GET /metrics HTTP/9.9\r\nHost: x\r\n\r\n",
        "URL too long": b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        "header too long": b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 10000 + b"\r\n\r\n",
        "body too large": b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"c" * 100000,
        "bad content length": b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    }
    for what, data in bad.items():
        try:
            r = raw_exchange(port, data)
            status = r.status
        except (OSError, ValueError, IndexError) as e:
            status = f"no response ({e})"
        check(isinstance(status, int) and 400 <= status < 500, f"{what}: a 4xx answer (got {status})")
        r = request(port, "/metrics")
        check(r.status == 200, f"after {what}: GET /metrics still 200")
    r = raw_exchange(port, bad["body too large"])
    check(r.status == 413, f"a body over 8 KiB: 413 ({r.status})")
    r = raw_exchange(port, bad["URL too long"])
    check(r.status == 414, f"a URL over 8 KiB: 414 ({r.status})")

    # Keep-alive: several scrapes on one connection (Prometheus keeps its connection).
    s_ = e2e.connect(port)
    f = s_.makefile("rb")
    ok = 0
    for _ in range(3):
        s_.sendall(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        r = read_response(f)
        ok += r is not None and r.status == 200 and b"ringlog_up" in r.body
    s_.close()
    check(ok == 3, f"three scrapes on one kept-alive connection ({ok})")

    # gzip when asked for, as Prometheus does.
    r = request(port, "/metrics", headers=[("Accept-Encoding", "gzip")])
    check(r.status == 200 and r.h("content-encoding") == "gzip", f"Accept-Encoding gzip: gzipped ({r.headers})")
    if r.h("content-encoding") == "gzip":
        check(value(parse(gzip.decompress(r.body).decode()), "ringlog_main_client_req_total", "web") == 1000,
              "the gzipped exposition")
    st.stop()
    stop(w)


def case_slow_clients():
    names = ["slow0", "slow1"]
    writers = [writer(n, "--fixed") for n in names]
    st = Stat(*names)
    port = st.port

    def server_side(client):
        """The server's end of a client's connection (any state), or None."""
        lp = client.getsockname()[1]
        return next((t for t in procs.tcp_sockets() if t["lport"] == port and t["rport"] == lp), None)

    def full(s):
        return all(value(s, "ringlog_main_client_req_total", n) == 1000 for n in names)

    # Clients that trickle a request and never finish it: one byte every 0.2 s, far less
    # than the server's timeout between bytes, so they stay as long as this case runs.
    stop_trickle = threading.Event()
    tricklers = [e2e.connect(port) for _ in range(4)]

    def trickle():
        msg = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 4000
        i = 0
        while not stop_trickle.is_set() and i < len(msg):
            for s in tricklers:
                try:
                    s.send(msg[i:i + 1])
                except OSError:
                    pass
            i += 1
            stop_trickle.wait(0.2)  # the pace of a slow client, not a synchronisation
    t = threading.Thread(target=trickle, daemon=True)
    t.start()

    # A round: clients that send nothing and clients that ask and do not read yet, then
    # scrapes beside them. Whether the scrapes waited on them shows in whether they are
    # still there afterwards; that is decided only when the round took less time than the
    # server allows a silent client (else it may rightly have closed them), otherwise the
    # round is run again.
    decided = False
    silent, readers = [], []
    for attempt in range(5):
        t0 = time.monotonic()
        readers = []
        for _ in range(2):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.connect(("127.0.0.1", port))
            s.sendall(f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            readers.append(s)
        silent = [e2e.connect(port) for _ in range(8)]

        def all_held():
            srv = [server_side(c) for c in tricklers + silent + readers]
            return (all(x is not None for x in srv) and procs.accept_queue(port) == 0 and
                    all(x["state"] == procs.TCP_ESTABLISHED for x in srv[:12]) and all(x["tx_queue"] > 0 for x in srv[12:]))
        # The server has taken every connection, and has sent the readers bytes they have
        # not taken (on loopback the kernel's send buffer takes the whole exposition, so
        # their workers are free again; the other 12 each keep one).
        check(wait_for(all_held, 20), "the server holds 4 trickling, 8 silent and 2 non-reading clients")
        for i in range(3):
            status, s = st.scrape()
            check(status == 200 and full(s), f"scrape {i} answered in full beside the slow clients ({status})")
        threads = len(os.listdir(f"/proc/{st.proc.pid}/task"))
        silent_open = [still_open(s) for s in silent]
        if time.monotonic() - t0 < SILENT_CLOSE_SECONDS - 1:
            check(all(silent_open), f"silent clients still connected after the scrapes ({silent_open})")
            check(all(still_open(s) for s in tricklers), "trickling clients still connected after the scrapes")
            check(threads >= 2 + 12, f"a worker thread per silent or trickling connection ({threads} threads)")
            decided = True
            break
        print(f"round {attempt} took {time.monotonic() - t0:.1f} s: run again", flush=True)
        for s in silent + readers:
            s.close()
    if not decided:
        skip("this machine is too slow to tell: 5 rounds each took longer than the server's silent-client timeout")

    # The readers now read, a little at a time, and get the whole exposition.
    for k, s in enumerate(readers):
        s.settimeout(30)
        data = read_to_end(s, 512, pause=0.002)
        head, _, body = data.partition(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 200") and full(parse(body.decode())),
              f"slow reader {k} gets the whole exposition ({len(data)} bytes)")
        s.close()

    # The server gives up on clients that send nothing (it does not keep them forever).
    check(wait_for(lambda: not any(still_open(s) for s in silent), SILENT_CLOSE_SECONDS * 6),
          "the server closes connections that send nothing")
    for s in silent:
        s.close()
    stop_trickle.set()
    t.join(5)
    for s in tricklers:
        s.close()
    status, s = st.scrape()
    check(status == 200 and full(s), "scrapes still answered afterwards")
    st.stop()
    for w in writers:
        stop(w)


def case_restart():
    o = Origin()
    a = Proxy([o.backend()])
    name, later = a.instance, a.instance + "-later"
    st = Stat(name, later)
    traffic(a, 3)
    check(wait_for(lambda: one_value("MAIN.client_req", name) == 3), "ringlog-stat -1 counts the 3 requests")
    status, s = st.scrape()
    check(status == 200 and value(s, "ringlog_up", name) == 1 and value(s, "ringlog_writer_running", name) == 1,
          f"running ringproxy: up ({status})")
    check(value(s, "ringlog_main_client_req_total", name) == 3, "its client_req")
    check(value(s, "ringlog_up", later) == 0 and value(s, "ringlog_writer_running", later) == 0 and
          not any(("ringlog_instance", later) in k[1] for k in s if k[0] not in ("ringlog_up", "ringlog_writer_running")),
          "an absent instance: ringlog_up 0 and no counters, the scrape still 200")

    # The writer stops: its files stay (its groups leave with it, the ring's counters stay).
    a.stop()
    status, s = st.scrape()
    check(status == 200 and value(s, "ringlog_up", name) == 1 and value(s, "ringlog_writer_running", name) == 0 and
          value(s, "ringlog_ring_msgs_written_total", name) is not None,
          "stopped ringproxy: files still read, writer not running",
          {k: v for k, v in s.items() if ("ringlog_instance", name) in k[1] and not k[0].startswith("ringlog_main")})

    # Its files go away: down, and the scrape goes on.
    shutil.rmtree(a.dir)
    status, s = st.scrape()
    check(status == 200 and value(s, "ringlog_up", name) == 0 and
          value(s, "ringlog_main_client_req_total", name) is None, f"removed instance: down ({status})")

    # A ringproxy starts again under the same name: new files, new counts.
    b = same_name_proxy(a, [o.backend()])
    traffic(b, 2)
    check(wait_for(lambda: one_value("MAIN.client_req", name) == 2), "ringlog-stat -1 counts the new 2 requests")
    status, s = st.scrape()
    check(status == 200 and value(s, "ringlog_up", name) == 1 and value(s, "ringlog_writer_running", name) == 1 and
          value(s, "ringlog_main_client_req_total", name) == 2, "restarted ringproxy: up, its own counts")

    # Restarted again without the files going away: they are replaced under the reader
    # (new inodes), which must follow.
    b.stop()
    c = same_name_proxy(b, [o.backend()])
    traffic(c, 1)
    check(wait_for(lambda: one_value("MAIN.client_req", name) == 1), "ringlog-stat -1 counts the 1 new request")
    status, s = st.scrape()
    check(status == 200 and value(s, "ringlog_writer_running", name) == 1 and
          value(s, "ringlog_main_client_req_total", name) == 1, "files replaced in place: the new ones are read")
    check(st.said(rf"instance '{re.escape(name)}' is up \(reopened"), "the reopening is told on stderr", st.log())
    check(st.said(rf"instance '{re.escape(name)}' is down"), "the absence is told on stderr", st.log())

    # The absent instance appears.
    w = writer(later, "--fixed")
    status, s = st.scrape()
    check(status == 200 and value(s, "ringlog_up", later) == 1 and
          value(s, "ringlog_main_client_req_total", later) == 1000, "an instance that appears later is read")
    check(st.proc.poll() is None, "one ringlog-stat process all along")
    st.stop()
    stop(w)
    c.stop()
    o.stop()


def case_prometheus():
    prom = need("prometheus")
    o = Origin()
    p1, p2 = Proxy([o.backend()]), Proxy([o.backend()])
    traffic(p1, 7)
    traffic(p2, 3)
    # Traffic has stopped: the counts are final once ringlog-stat -1 shows every request.
    check(wait_for(lambda: one_value("MAIN.client_req", p1.instance) == 7 and
                   one_value("MAIN.client_req", p2.instance) == 3), "ringlog-stat -1 counts 7 and 3 requests")
    want = {p1.instance: one_value("MAIN.client_req", p1.instance), p2.instance: one_value("MAIN.client_req", p2.instance)}
    st = Stat(p1.instance, p2.instance)

    pdir = os.path.join(WORK, "prometheus")
    shutil.rmtree(pdir, ignore_errors=True)
    os.makedirs(os.path.join(pdir, "data"))
    cfg = os.path.join(pdir, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: ringlog\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{st.port}']\n")
    pport = procs.free_port()
    plog = open(os.path.join(pdir, "prometheus.log"), "w+")
    pp = subprocess.Popen([prom, f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(pdir, 'data')}",
                           f"--web.listen-address=127.0.0.1:{pport}", "--log.level=info"],
                          stdout=plog, stderr=subprocess.STDOUT, preexec_fn=procs.pdeathsig, cwd=pdir)
    CHILDREN.append(pp)

    def query(q):
        url = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                doc = json.load(r)
        except OSError:
            return None
        return doc["data"]["result"] if doc.get("status") == "success" else None

    def prom_log():
        plog.seek(0)
        return plog.read()[-3000:]

    try:
        why = procs.wait_started(f"prometheus (127.0.0.1:{pport})", pp, lambda: procs.port_open(pport), prom_log)
        check(not why, "prometheus starts", why)
        # Wait for a scrape of both instances (every scrape is after the traffic).
        res = wait_for(lambda: (lambda r: r if r and len(r) == 2 else None)(query("ringlog_main_client_req_total")), 60)
        check(res, f"Prometheus has client_req of both instances: {res}", prom_log())
        for r in res or []:
            m = r["metric"]
            got = float(r["value"][1])
            print(f"Prometheus: client_req {m.get('ringlog_instance')} = {got}; ringlog-stat -1: "
                  f"{want.get(m.get('ringlog_instance'))}")
            check(m.get("ringlog_instance") in want and got == want[m["ringlog_instance"]],
                  f"Prometheus's value equals ringlog-stat -1's for {m.get('ringlog_instance')} ({got})")
            check(m.get("instance") == f"127.0.0.1:{st.port}" and m.get("job") == "ringlog" and
                  "exported_instance" not in m, f"the target's own labels kept beside ringlog_instance: {m}")
        up = query('up{job="ringlog"}')
        check(up and len(up) == 1 and up[0]["value"][1] == "1", f"up is 1: {up}")
        rup = query("ringlog_up")
        check(rup and sorted(r["metric"]["ringlog_instance"] for r in rup if r["value"][1] == "1") == sorted(want),
              f"ringlog_up 1 for both instances: {rup}")
        healthy = query('ringlog_vbe_healthy{ident="o1"}')
        check(healthy and len(healthy) == 2 and all(r["value"][1] == "1" for r in healthy),
              f"a per-backend gauge with its ident label: {healthy}")
        # The scrape itself, as Prometheus took it (up is 0 for an exposition it refuses).
        samples = query('scrape_samples_scraped{job="ringlog"}')
        check(samples and float(samples[0]["value"][1]) > 100, f"Prometheus took the samples: {samples}")
    finally:
        rc = stop(pp)
        check(rc == 0, f"prometheus stops on SIGTERM (exit {rc})", prom_log())
    st.stop()
    p1.stop()
    p2.stop()
    o.stop()


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    e2e.configure(WORK, PROXY_BIN, READER, origin=ORIGIN_BIN, label=CASE)
    sys.exit(e2e.run_cases(e2e.cases_of(globals()), CASE))
