"""Shared harness of the ringproxy end-to-end suites (tests/server, tests/tunnel,
tests/cache): ringproxy and the test origin as child processes, HTTP on raw
sockets, log records and counters through support's proxy_log_reader, and the
case runner. Parses no argv: each script reads its own in main() and calls
configure() before running a case.

Every server listens on 127.0.0.1 only and is stopped by pid (children also get
PR_SET_PDEATHSIG); every wait is bounded.
"""
import fcntl
import json
import os
import signal
import socket
import socketserver
import struct
import subprocess
import termios
import threading
from http.server import ThreadingHTTPServer

import checks
from checks import FAILURES, cases_of, check, need
from procs import free_port, kill_all, pdeathsig, stop, wait_for, wait_port

__all__ = ["FAILURES", "check", "free_port", "stop", "wait_for", "wait_port", "configure", "CHILDREN", "Proxy",
           "Origin", "curl", "tags", "recs", "Resp", "read_response", "read_head", "connect", "request_bytes",
           "request", "recv_until", "rst_close", "send_then_reset", "unread", "unsent", "LocalTCPServer", "LocalHTTPServer", "cases_of", "run_cases"]

# Set by configure().
PROXY = ORIGIN = READER = WORKDIR = RINGLOG_DIR = None
LABEL = "e2e"
CHILDREN = []  # every process started here; what a case leaves running is killed after it


def configure(workdir, proxy, reader, origin=None, label="e2e"):
    """The binaries under test and the work directory (made if missing); instances go to
    WORKDIR/instances (RINGLOG_DIR), named "LABEL-PID-N"."""
    global PROXY, ORIGIN, READER, WORKDIR, RINGLOG_DIR, LABEL
    PROXY, ORIGIN, READER, WORKDIR, LABEL = proxy, origin, reader, workdir, label
    os.makedirs(WORKDIR, exist_ok=True)
    RINGLOG_DIR = os.path.join(WORKDIR, "instances")
    os.environ["RINGLOG_DIR"] = RINGLOG_DIR


# ---- processes ------------------------------------------------------------------------------

class Proxy:
    """A ringproxy on a free loopback port, `-n LABEL-PID-N`, a 16 MiB ring. Ready when
    its admin socket answers ping (made after the listeners are bound; a test connection
    to the port would count as a session). Subclasses add options (options()) and
    helpers; probe = False leaves the backends' health probes at ringproxy's defaults."""
    n = 0
    probe = True  # probe backends at /status/200 (ringlog_test_origin) every 0.2 s unless args say

    def __init__(self, backends=(), args=(), threads=2):
        Proxy.n += 1
        args = list(args)
        self.instance = f"{LABEL}-{os.getpid()}-{Proxy.n}"
        self.port = free_port()
        cmd = [PROXY, "-a", f"127.0.0.1:{self.port}", "-n", self.instance, "-t", str(threads), "--ring-size", "16M"]
        if self.probe:
            cmd += ["--health-path", "/status/200"]
            if "--health_interval" not in args:
                cmd += ["--health_interval", "0.2"]
        cmd += self.options()
        for b in backends:
            cmd += ["-b", b]
        cmd += args
        self.cmd = cmd
        self.err = open(os.path.join(WORKDIR, self.instance + ".stderr"), "w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.err, preexec_fn=pdeathsig)
        CHILDREN.append(self.proc)
        self.dir = os.path.join(RINGLOG_DIR, self.instance)
        self.adm_args = args[args.index("--admin-socket"):][:2] if "--admin-socket" in args else []
        wait_for(lambda: self.proc.poll() is not None or self.adm("ping")[0] == 0, 20)
        if self.proc.poll() is not None or self.adm("ping")[0] != 0:
            stop(self.proc)
            self.err.seek(0)
            raise RuntimeError(f"ringproxy did not start (exit {self.proc.returncode}): {self.err.read().strip()}\n"
                               f"  command: {' '.join(cmd)}")

    def options(self):
        """Options a suite adds to every ringproxy it starts."""
        return []

    def adm(self, *words):
        r = subprocess.run([PROXY, "-n", self.instance, *self.adm_args, "adm", *words], capture_output=True,
                           text=True, timeout=30)
        return r.returncode, r.stdout + r.stderr

    def stats(self):
        out = subprocess.run([READER, "--stats", self.dir], capture_output=True, text=True, timeout=30,
                             check=True).stdout
        return {l.split()[0]: int(l.split()[1]) for l in out.splitlines() if l.strip()}

    def stat(self, name):
        return self.stats().get(name, -1)

    def txns(self):
        out = subprocess.run([READER, os.path.join(self.dir, "ring")], capture_output=True, text=True, timeout=60,
                             check=True).stdout
        return [json.loads(l) for l in out.splitlines() if l.strip()]

    def settle(self, reqs, timeout=15, sessions=0):
        """Waits until `reqs` request transactions (and `sessions` sessions) have ended (a
        request ends after its last byte is sent, a moment after the client has read it)
        and every fetch seen has ended too (its Length comes at its end); returns all
        transactions. Not reaching that is a failed check."""
        def counts(t):
            return (len([x for x in t if x["type"] == "req" and x["ended"]]),
                    len([x for x in t if x["type"] == "sess" and x["ended"]]),
                    [x for x in t if x["type"] == "bereq" and not x["ended"]])

        def ready():
            t = self.txns()
            n, s, busy = counts(t)
            return t if n >= reqs and s >= sessions and not busy else None
        t = wait_for(ready, timeout)
        if not t:
            t = self.txns()
            n, s, busy = counts(t)
            check(False, f"{reqs} request and {sessions} session transactions logged, got {n} and {s}; "
                         f"fetches not ended: {[recs(x, 'BereqURL') for x in busy]}")
        return t

    def stop(self, sig=signal.SIGTERM):
        """Stops it by pid; a sanitizer report or an assertion in its stderr, or an exit
        code other than 0, is a failed check. Returns the exit code."""
        rc = stop(self.proc, sig)
        self.err.seek(0)
        text = self.err.read()
        check("Sanitizer" not in text and "runtime error:" not in text and "Assertion" not in text,
              f"no sanitizer report or assertion: {text[-3000:]}")
        check(rc == 0, f"ringproxy exits 0 (got {rc}): {text[-2000:]}")
        return rc

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def host(self):
        return f"127.0.0.1:{self.port}"


class Origin:
    """ringlog_test_origin on a free (or the given) loopback port."""

    def __init__(self, port=None):
        self.port = port or free_port()
        self.proc = subprocess.Popen([ORIGIN, "-p", str(self.port)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, preexec_fn=pdeathsig)
        CHILDREN.append(self.proc)
        if not wait_port(self.port, self.proc):
            raise RuntimeError("origin did not start: " + self.proc.stderr.read().decode(errors="replace"))

    def backend(self, name="o1"):
        return f"{name}=127.0.0.1:{self.port}"

    def stats(self):
        """The origin's own counts (GET /stats): {"urls": {url: fetches}, ...}."""
        return json.loads(request(self.port, "/stats").body)

    def count(self, url):
        return self.stats()["urls"].get(url, 0)

    def stop(self):
        check(stop(self.proc) == 0, "origin exits 0")


def curl(*args, max_time=30, timeout=60):
    """curl with the arguments (the test is skipped where curl is not installed)."""
    return subprocess.run([need("curl"), "-s", "-S", "--max-time", str(max_time), *args], capture_output=True,
                          timeout=timeout)


# ---- log records -------------------------------------------------------------------------------

def tags(t):
    return [r[0] for r in t["records"]]


def recs(t, tag):
    return [r[1] for r in t["records"] if r[0] == tag]


# ---- HTTP on raw sockets ------------------------------------------------------------------------

class Resp:
    def __init__(self, status, reason, headers, body, closed):
        self.status, self.reason, self.headers, self.body, self.closed = status, reason, headers, body, closed

    def h(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def __repr__(self):
        return f"<{self.status} {self.headers} {self.body[:80]!r}{'...' if len(self.body) > 80 else ''}>"


def read_response(f, method="GET"):
    """One response from a buffered socket reader: Content-Length, chunked or
    close-delimited body; none for HEAD, 1xx, 204 and 304. Header names lower case,
    repeated fields joined with ", ". None at EOF."""
    line = f.readline()
    if not line:
        return None
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    status = int(parts[1])
    reason = parts[2] if len(parts) > 2 else ""
    headers = {}
    while True:
        l = f.readline()
        if l in (b"\r\n", b"\n", b""):
            break
        k, v = l.decode("latin-1").split(":", 1)
        k = k.strip().lower()
        headers[k] = headers[k] + ", " + v.strip() if k in headers else v.strip()
    body = b""
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return Resp(status, reason, headers, body, False)
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b""):
                    pass
                break
            chunk = f.read(size)
            body += chunk
            if len(chunk) < size:
                break
            f.readline()
    elif "content-length" in headers:
        n = int(headers["content-length"])
        while len(body) < n:
            b = f.read(n - len(body))
            if not b:
                break
            body += b
    else:
        while True:
            b = f.read(65536)
            if not b:
                break
            body += b
    return Resp(status, reason, headers, body, False)


def recv_until(s, end):
    """Reads from socket s byte by byte up to and including `end` (or EOF), so nothing
    after it is consumed."""
    out = b""
    while not out.endswith(end):
        b = s.recv(1)
        if not b:
            break
        out += b
    return out


def read_head(s):
    """Reads a response head from socket s byte by byte, so nothing after it is consumed
    (the body, or a tunnel's first bytes, stay in the socket): (status, head bytes);
    status 0 if there is no status line."""
    head = recv_until(s, b"\r\n\r\n")
    parts = head.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0), head


def connect(port, source=None, timeout=30):
    """A TCP connection to 127.0.0.1:port (from the address source, if given)."""
    s = socket.socket()
    if source:
        s.bind((source, 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def request_bytes(port, path, method="GET", headers=(), body=b""):
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{k}: {v}" for k, v in headers]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def request(port, path, method="GET", headers=(), body=b"", source=None, timeout=30):
    """One request on its own connection (Connection: close). Never raises for a
    network error: returns a Resp with status 0 and the error as its reason."""
    try:
        s = connect(port, source, timeout)
        try:
            s.sendall(request_bytes(port, path, method, headers, body))
            f = s.makefile("rb")
            r = read_response(f, method)
            return r or Resp(0, "connection closed without a response", {}, b"", True)
        finally:
            s.close()
    except OSError as e:
        return Resp(0, f"{type(e).__name__}: {e}", {}, b"", True)


def unsent(s):
    """Bytes in a socket's send queue not yet acknowledged by the peer (SIOCOUTQ)."""
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]


def unread(s):
    """Bytes received on a socket and not yet read (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def send_then_reset(s, data):
    """Sends data, waits until the peer's kernel has all of it (nothing left unsent),
    then resets the connection: the peer gets every byte, then the RST."""
    s.sendall(data)
    wait_for(lambda: unsent(s) == 0)
    rst_close(s)


def rst_close(s):
    """Closes a socket with a RST (SO_LINGER 0): the peer is gone, not just done."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, (1).to_bytes(4, "little") + (0).to_bytes(4, "little"))
    s.close()


# ---- peers written in python (origins the test origin cannot play) -----------------------------

class _Local:
    """A threading server on a free 127.0.0.1 port, serving from a daemon thread."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler):
        super().__init__(("127.0.0.1", 0), handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self):
        self.shutdown()
        self.server_close()


class LocalTCPServer(_Local, socketserver.ThreadingTCPServer):
    pass


class LocalHTTPServer(_Local, ThreadingHTTPServer):
    pass


# ---- the case runner -------------------------------------------------------------------------

def run_cases(cases, case, title=""):
    """checks.run_cases, killing what a case leaves running after it."""
    return checks.run_cases(cases, case, title, cleanup=lambda: kill_all(CHILDREN))
