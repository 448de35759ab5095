#!/usr/bin/env python3
"""End-to-end tests of ringproxy's tunnels with real clients: CONNECT through curl -p
(--proxytunnel), a WebSocket-style Upgrade and "pipe" requests against peers started
here (an HTTP origin that answers 101 and then echoes, a raw echo/source server for
CONNECT targets). Byte-exact MB payloads both ways, half-close, abrupt close on each
side, a slow reader, pool exhaustion falling back to copying, refused CONNECTs
(403/405/400) and no fd left behind after many tunnels. Log records and counters are
read through the library's reader API (support/proxy_log_reader).

usage: tunnel_e2e_test.py RINGPROXY LOG_READER WORKDIR CASE
Every server listens on 127.0.0.1 only; ringproxy is stopped by pid; loops are bounded;
nothing asserts on times.
"""
import http.server
import os
import random
import socket
import socketserver
import sys
import select
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import e2e  # noqa: E402
from e2e import (LocalHTTPServer, LocalTCPServer, check, free_port, read_head, recs, recv_until,  # noqa: E402
                 rst_close, send_then_reset, unread, wait_for)
import procs  # noqa: E402

# Set by main() from argv.
PROXY = READER = WORKDIR = CASE = None
MB = 1 << 20


def payload(n, seed):
    return random.Random(seed).randbytes(n)


def recv_exact(s, n):
    out = bytearray()
    while len(out) < n:
        b = s.recv(min(1 << 20, n - len(out)))
        if not b:
            break
        out += b
    return bytes(out)


def recv_all(s, between=None, chunk=1 << 16):
    """Reads until EOF or a reset; between(), if given, runs after each chunk (a slow
    reader waits there)."""
    out = bytearray()
    while True:
        try:
            b = s.recv(chunk)
        except ConnectionResetError:
            return bytes(out), "reset"
        if not b:
            return bytes(out), "eof"
        out += b
        if between:
            between()


# ---- peers ---------------------------------------------------------------------------

def echo(s):
    """Sends back every byte until EOF, then half-closes (shutdown WR)."""
    while True:
        b = s.recv(1 << 16)
        if not b:
            break
        s.sendall(b)
    s.shutdown(socket.SHUT_WR)


def RawServer():
    """CONNECT target. The first line the client sends picks the behaviour:
    'echo\\n'   echo every byte until EOF, then half-close (shutdown WR) and close
    'source N\\n' send N bytes of payload(N, 7), then close
    'reset N\\n'  send N bytes, then close with a reset
    """
    return LocalTCPServer(RawHandler)


class RawHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        line = recv_until(s, b"\n")
        if not line.endswith(b"\n"):
            return
        words = line.decode().split()
        try:
            if words[0] == "echo":
                echo(s)
            elif words[0] == "source":
                s.sendall(payload(int(words[1]), 7))
            elif words[0] == "reset":
                send_then_reset(s, payload(int(words[1]), 7))
        except OSError:
            pass


class OriginHandler(http.server.BaseHTTPRequestHandler):
    """HTTP origin: GET /bytes/N, POST|PUT /echo (and /piped/echo), and any GET with
    'Upgrade: echo': 101, then a raw echo until EOF ('Upgrade: reset' sends 100000
    bytes and resets the connection)."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        up = self.headers.get("Upgrade", "")
        if up in ("echo", "reset") and "upgrade" in self.headers.get("Connection", "").lower():
            self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + up.encode() +
                             b"\r\nConnection: Upgrade\r\n\r\n")
            self.wfile.flush()
            s = self.connection
            try:
                if up == "reset":
                    send_then_reset(s, payload(100000, 9))
                    self.close_connection = True
                    return
                echo(s)
            except OSError:
                pass
            self.close_connection = True
            return
        if self.path.startswith("/bytes/"):
            n = int(self.path.split("/")[2])
            body = payload(n, n)
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Path", self.path)
        self.end_headers()
        self.wfile.write(body)

    do_PUT = do_POST

    def do_HEAD(self):  # ringproxy's health probe
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def Origin():
    return LocalHTTPServer(OriginHandler)


# ---- the proxy -----------------------------------------------------------------------

class Proxy(e2e.Proxy):
    """ringproxy with the backends' health probes at its defaults (the python origin
    answers HEAD on any path)."""
    probe = False

    def pipes(self, n, timeout=15):
        """Waits for n ended pipe transactions; returns them."""
        def ready():
            t = [x for x in self.txns() if x["reason"] == "pipe" and x["ended"]]
            return t if len(t) >= n else None
        return wait_for(ready, timeout) or [x for x in self.txns() if x["reason"] == "pipe"]

    def idle(self, timeout=15):
        return wait_for(lambda: self.stat("MAIN.pipe_active") == 0, timeout)

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


def acct(t):
    """PipeAcct: (client hdr, backend hdr, bytes from client, bytes to client)."""
    a = recs(t, "PipeAcct")
    return tuple(int(x) for x in a[0].split()) if a else None


def connect(port, target):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    status, head = read_head(s)
    return s, status, head


def curl(*args):
    return e2e.curl(*args, max_time=60, timeout=90)


def exchange(s, up, expect_down_len, first=b""):
    """Sends `up` (after `first`) in a thread and half-closes; reads until EOF."""
    def send():
        try:
            s.sendall(first + up)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    th = threading.Thread(target=send)
    th.start()
    got, how = recv_all(s)
    th.join()
    return got, how


# ---- cases ---------------------------------------------------------------------------

def case_connect_curl():
    raw, origin = RawServer(), Origin()
    p = Proxy(args=["--connect-port", str(origin.port), "--connect-port", str(raw.port)])
    try:
        # Download through the tunnel with curl -p (curl speaks HTTP inside it).
        out = os.path.join(WORKDIR, "down.bin")
        r = curl("-p", "-x", f"http://127.0.0.1:{p.port}", f"http://127.0.0.1:{origin.port}/bytes/{5 * MB}", "-o", out)
        check(r.returncode == 0, f"curl -p download: {r.returncode} {r.stderr!r}")
        check(open(out, "rb").read() == payload(5 * MB, 5 * MB), "download through CONNECT differs")
        # Upload (and the same bytes back) with --proxytunnel.
        up = os.path.join(WORKDIR, "up.bin")
        open(up, "wb").write(payload(4 * MB, 11))
        r = curl("--proxytunnel", "-x", f"http://127.0.0.1:{p.port}", "--data-binary", f"@{up}",
                 f"http://127.0.0.1:{origin.port}/echo", "-o", out)
        check(r.returncode == 0, f"curl --proxytunnel upload: {r.returncode} {r.stderr!r}")
        check(open(out, "rb").read() == payload(4 * MB, 11), "upload echoed through CONNECT differs")
        # Raw: 6 MB up and 6 MB back at once, half-closed by the client.
        s, status, head = connect(p.port, f"127.0.0.1:{raw.port}")
        check(status == 200, f"CONNECT status {status}: {head!r}")
        data = payload(6 * MB, 12)
        got, how = exchange(s, data, len(data), first=b"echo\n")
        s.close()
        check(got == data, f"raw echo through CONNECT: {len(got)} of {len(data)} bytes, {how}")
        # Slow reader: 8 MB from the target, 64 KiB at a time; after each read it waits
        # until the proxy has refilled its socket and gone back to sleep (every thread
        # asleep), so that the tunnel stops and resumes over and over.
        s, status, _ = connect(p.port, f"127.0.0.1:{raw.port}")
        s.sendall(b"source %d\n" % (8 * MB))
        def refilled():  # readable: data with the proxy asleep again, or the end
            return select.select([s], [], [], 0)[0] and (unread(s) == 0 or procs.sleeping(p.proc.pid))
        got, how = recv_all(s, between=lambda: wait_for(refilled, 10))
        s.close()
        check(got == payload(8 * MB, 7), f"slow reader: {len(got)} bytes, {how}")
        check(p.idle(), "tunnels still open")
        st = p.stats()
        check(st.get("MAIN.pipe_sess") == 4, f"pipe_sess {st.get('MAIN.pipe_sess')}")
        check(st.get("MAIN.pipe_splice_bytes", 0) >= 31 * MB, f"pipe_splice_bytes {st.get('MAIN.pipe_splice_bytes')}")
        check(st.get("MAIN.pipe_fallback") == 0, f"pipe_fallback {st.get('MAIN.pipe_fallback')}")
        pipes = p.pipes(4)
        check(len(pipes) == 4, f"{len(pipes)} pipe transactions")
        reqs = {t["vxid"]: t for t in p.txns() if t["type"] == "req"}
        for t in pipes:
            check(recs(t, "BereqMethod") == ["CONNECT"], f"pipe txn BereqMethod {recs(t, 'BereqMethod')}")
            labels = [x.split(":")[0] for x in recs(t, "Timestamp")]
            check(labels == ["Pipe", "PipeSess"], f"pipe timestamps {labels}")
            check(t["records"][-1][0] in ("End",) or t["ended"], "pipe txn not ended")
            parent = reqs.get(t["parent"])
            check(parent is not None and recs(parent, "ReqMethod") == ["CONNECT"], "pipe txn's parent is not the CONNECT")
        accts = sorted(acct(t) for t in pipes)
        # Bytes to the client include the 39-byte "200 Connection established" head.
        hello = len("HTTP/1.1 200 Connection established\r\n\r\n")
        check(any(a[2] == 6 * MB + 5 and a[3] == 6 * MB + hello for a in accts), f"PipeAcct of the echo: {accts}")
        check(any(a[3] == 8 * MB + hello for a in accts), f"PipeAcct of the slow reader: {accts}")
    finally:
        p.stop()


def case_connect_copy():
    raw = RawServer()
    p = Proxy(args=["--connect-port", str(raw.port), "--tunnel-copy"])
    try:
        s, status, _ = connect(p.port, f"127.0.0.1:{raw.port}")
        check(status == 200, f"CONNECT status {status}")
        data = payload(5 * MB, 13)
        got, how = exchange(s, data, len(data), first=b"echo\n")
        s.close()
        check(got == data, f"copy tunnel echo: {len(got)} of {len(data)}, {how}")
        check(p.idle(), "tunnel still open")
        st = p.stats()
        check(st.get("MAIN.pipe_splice_bytes") == 0, f"pipe_splice_bytes {st.get('MAIN.pipe_splice_bytes')}")
        check(st.get("MAIN.pipe_copy_bytes", 0) >= 10 * MB, f"pipe_copy_bytes {st.get('MAIN.pipe_copy_bytes')}")
        check(st.get("MAIN.pipe_fallback") == 0, "copy by option is not a fallback")
        t = p.pipes(1)
        check(t and any(n.startswith("tunnel copy (splice off)") for n in recs(t[0], "Notice")), "Notice of copy mode")
    finally:
        p.stop()


def case_connect_denied():
    raw = RawServer()
    closed = free_port()
    p = Proxy(args=["--connect-port", str(raw.port), "--connect-port", str(closed)])
    q = Proxy(args=["--connect-port", str(raw.port), "--connect-from", "10.0.0.0/8"])
    try:
        s, status, _ = connect(p.port, f"127.0.0.1:{raw.port + 1 if raw.port + 1 != closed else raw.port + 2}")
        check(status == 403, f"CONNECT to a port not allowed: {status}")
        s.close()
        r = curl("-p", "-x", f"http://127.0.0.1:{p.port}", "http://127.0.0.1:1/")
        check(r.returncode != 0 and b"403" in r.stderr, f"curl -p to port 1: {r.returncode} {r.stderr!r}")
        s, status, _ = connect(q.port, f"127.0.0.1:{raw.port}")
        check(status == 405, f"CONNECT from a client not allowed: {status}")
        s.close()
        s, status, _ = connect(p.port, "nohost")
        check(status == 400, f"CONNECT to a malformed target: {status}")
        s.close()
        # Allowed but nobody listens: 503 and a FetchError in the pipe transaction.
        s, status, _ = connect(p.port, f"127.0.0.1:{closed}")
        check(status == 503, f"CONNECT to a closed port: {status}")
        s.close()
        check(wait_for(lambda: p.stat("MAIN.pipe_denied") == 3, 15), f"pipe_denied {p.stat('MAIN.pipe_denied')}")
        check(wait_for(lambda: q.stat("MAIN.pipe_denied") == 1, 15), f"q pipe_denied {q.stat('MAIN.pipe_denied')}")
        errs = [e for t in p.txns() + q.txns() if t["type"] == "req" for e in recs(t, "Error")]
        check(any("port" in e and "not allowed" in e for e in errs), f"Error for the port: {errs}")
        check(any("not allowed from" in e for e in errs), f"Error for the client: {errs}")
        check(any("CONNECT target" in e for e in errs), f"Error for the target: {errs}")
        statuses = [recs(t, "RespStatus") for t in p.txns() + q.txns() if t["type"] == "req"]
        check(["403"] in statuses and ["405"] in statuses and ["400"] in statuses, f"RespStatus {statuses}")
        fe = [e for t in p.pipes(1) for e in recs(t, "FetchError")]
        check(any("refused" in e.lower() for e in fe), f"FetchError {fe}")
    finally:
        p.stop()
        q.stop()


def upgrade(port, kind="echo", path="/ws"):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: {kind}\r\n\r\n".encode())
    status, head = read_head(s)
    return s, status, head


def case_upgrade():
    origin = Origin()
    p = Proxy(backends=[f"127.0.0.1:{origin.port}"])
    try:
        s, status, head = upgrade(p.port)
        check(status == 101 and b"upgrade: echo" in head.lower(), f"Upgrade answer: {head!r}")
        data = payload(6 * MB, 21)
        got, how = exchange(s, data, len(data))
        s.close()
        check(got == data, f"upgrade echo: {len(got)} of {len(data)} bytes, {how}")
        check(how == "eof", f"the origin's half-close reached the client as {how}")
        check(p.idle(), "tunnel still open")
        t = p.pipes(1)
        check(len(t) == 1, "one pipe transaction")
        if t:
            a = acct(t[0])
            check(a is not None and a[2] == 6 * MB and a[3] >= 6 * MB, f"PipeAcct {a}")
            check(any("tunnel end eof" in n for n in recs(t[0], "Notice")), f"Notices {recs(t[0], 'Notice')}")
        reqs = [x for x in p.txns() if x["type"] == "req"]
        check(any(recs(x, "RespStatus") == ["101"] for x in reqs), "req with RespStatus 101")
        # A tunnel still open at shutdown is closed, and ringproxy exits cleanly.
        s, status, _ = upgrade(p.port)
        check(status == 101, f"second Upgrade: {status}")
        s.sendall(b"ping")
        check(recv_exact(s, 4) == b"ping", "echo before shutdown")
    finally:
        p.stop()
    got, how = recv_all(s)
    check(got == b"" and how in ("eof", "reset"), f"open tunnel at shutdown: {len(got)} bytes, {how}")
    s.close()


def case_abrupt():
    origin = Origin()
    p = Proxy(backends=[f"127.0.0.1:{origin.port}"])
    try:
        # The client resets while the origin is echoing.
        s, status, _ = upgrade(p.port)
        check(status == 101, f"Upgrade status {status}")
        s.sendall(payload(MB, 31))
        got = recv_exact(s, 100000)
        check(got == payload(MB, 31)[:100000], "echo before the reset")
        rst_close(s)
        # The origin resets after sending 100000 bytes.
        s, status, _ = upgrade(p.port, kind="reset")
        check(status == 101, f"Upgrade status {status}")
        got, how = recv_all(s)
        s.close()
        check(got == payload(100000, 9), f"bytes before the origin's reset: {len(got)}")
        check(how in ("reset", "eof"), f"client saw {how}")
        check(p.idle(), "tunnels still open after resets")
        t = p.pipes(2)
        ends = [n for x in t for n in recs(x, "Notice") if n.startswith("tunnel end")]
        check(len([e for e in ends if e.startswith("tunnel end error")]) == 2, f"ends {ends}")
        check(any("client" in e for e in ends) and any("backend" in e for e in ends), f"ends {ends}")
    finally:
        p.stop()


def case_pipe():
    origin = Origin()
    p = Proxy(backends=[f"127.0.0.1:{origin.port}"], args=["--pipe-url", "/piped"])
    try:
        up = os.path.join(WORKDIR, "pipe-up.bin")
        out = os.path.join(WORKDIR, "pipe-down.bin")
        open(up, "wb").write(payload(3 * MB, 41))
        r = curl("--data-binary", f"@{up}", f"http://127.0.0.1:{p.port}/piped/echo", "-o", out, "-D", "-")
        check(r.returncode == 0, f"curl through pipe: {r.returncode} {r.stderr!r}")
        check(open(out, "rb").read() == payload(3 * MB, 41), "pipe echo differs")
        check(b"x-path: /piped/echo" in r.stdout.lower(), f"origin saw the raw URL: {r.stdout[:300]!r}")
        r = curl(f"http://127.0.0.1:{p.port}/bytes/100000", "-o", out)
        check(r.returncode == 0 and open(out, "rb").read() == payload(100000, 100000),
              f"a normal request still works: {r.returncode} {r.stderr!r} {os.path.getsize(out)} bytes")
        check(p.idle(), "pipe still open")
        st = p.stats()
        check(st.get("MAIN.pipe_sess") == 1, f"pipe_sess {st.get('MAIN.pipe_sess')}")
        t = p.pipes(1)
        check(len(t) == 1 and acct(t[0]) and acct(t[0])[2] > 3 * MB, f"PipeAcct {t and acct(t[0])}")
    finally:
        p.stop()


def case_pool_exhaustion():
    origin = Origin()
    # One worker, room for one tunnel's two pipes: the second tunnel copies.
    p = Proxy(backends=[f"127.0.0.1:{origin.port}"], args=["--tunnel-pipes", "2"], threads=1)
    try:
        socks = []
        for _ in range(3):
            s, status, _ = upgrade(p.port)
            check(status == 101, f"Upgrade status {status}")
            socks.append(s)
        results = [None] * 3

        def run(i):
            data = payload(3 * MB, 50 + i)
            got, how = exchange(socks[i], data, len(data))
            results[i] = got == data
        th = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for x in th:
            x.start()
        for x in th:
            x.join(120)
        for s in socks:
            s.close()
        check(results == [True] * 3, f"byte-exact with fallback: {results}")
        check(p.idle(), "tunnels still open")
        st = p.stats()
        check(st.get("MAIN.pipe_fallback") == 2, f"pipe_fallback {st.get('MAIN.pipe_fallback')}")
        check(st.get("MAIN.pipe_splice_bytes", 0) >= 6 * MB and st.get("MAIN.pipe_copy_bytes", 0) >= 12 * MB,
              f"splice {st.get('MAIN.pipe_splice_bytes')} copy {st.get('MAIN.pipe_copy_bytes')}")
        notes = [n for t in p.pipes(3) for n in recs(t, "Notice")]
        check(len([n for n in notes if "pipe pool exhausted" in n]) == 2, f"notices {notes}")
    finally:
        p.stop()


def case_fd_leak():
    raw = RawServer()
    p = Proxy(args=["--connect-port", str(raw.port), "--tunnel-pipes", "8"], threads=1)
    try:
        def one(i):
            s, status, _ = connect(p.port, f"127.0.0.1:{raw.port}")
            if status != 200:
                return False
            if i % 5 == 4:  # abrupt
                s.sendall(b"echo\nxyz")
                recv_exact(s, 3)
                rst_close(s)
                return True
            got, _ = exchange(s, b"x" * 3000, 3000, first=b"echo\n")
            s.close()
            return got == b"x" * 3000
        check(one(0), "first tunnel")
        check(p.idle(), "first tunnel still open")
        base = p.fds()
        ok = 0
        for i in range(1, 601):
            ok += one(i)
        check(ok == 600, f"{ok} of 600 tunnels worked")
        check(p.idle(30), "tunnels still open")
        after = wait_for(lambda: p.fds() <= base + 16 and p.fds(), 10) or p.fds()
        # Idle pipes kept by the pool (at most 8 pipes here: 16 fds) are not a leak.
        check(after <= base + 16, f"fds: {base} before, {after} after 600 tunnels")
        check(p.stat("MAIN.pipe_sess") == 601, f"pipe_sess {p.stat('MAIN.pipe_sess')}")
    finally:
        p.stop()


def main():
    global PROXY, READER, WORKDIR, CASE
    PROXY, READER, WORKDIR, CASE = sys.argv[1:5]
    e2e.configure(WORKDIR, PROXY, READER, label=f"tun-{CASE}")
    return e2e.run_cases(e2e.cases_of(globals()), CASE)


if __name__ == "__main__":
    sys.exit(main())
