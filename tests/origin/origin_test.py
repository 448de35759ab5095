#!/usr/bin/python3
"""Scripted test of ringlog_test_origin: every URL of its scheme, keep-alive,
pipelining, framing, the request counts, the exit codes. Raw sockets, so that the
bytes on the wire (framing, close) are what is checked.

usage: origin_test.py PATH_TO_ringlog_test_origin
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

ORIGIN = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def content(n, off=0):
    return bytes(97 + (i + i // 26 + i // 676 + i // 17576) % 26 for i in range(off, off + n))


def start(*args):
    p = subprocess.Popen([ORIGIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = p.stdout.readline().decode()
    assert line.startswith("ringlog_test_origin listening on 127.0.0.1:"), line
    return p, int(line.rsplit(":", 1)[1])


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def read_until(self, sep):
        while sep not in self.buf:
            self._fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_n(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_to_eof(self):
        try:
            while True:
                self._fill()
        except EOFError:
            pass
        out, self.buf = self.buf, b""
        return out

    def response(self, head_request=False):
        """Reads one response: (status, headers dict (lower-case, last wins), body, raw head)."""
        head = self.read_until(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        hdrs = {}
        for l in lines[1:]:
            if l:
                k, v = l.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        if head_request or status in (204, 304) or 100 <= status < 200:
            return status, hdrs, b"", head
        if hdrs.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size_line = self.read_until(b"\r\n")
                n = int(size_line.split(b";")[0], 16)
                if n == 0:
                    while self.read_until(b"\r\n") != b"\r\n":
                        pass
                    break
                body += self.read_n(n)
                check(self.read_n(2) == b"\r\n", "chunk data ends with CRLF")
            return status, hdrs, body, head
        if "content-length" in hdrs:
            return status, hdrs, self.read_n(int(hdrs["content-length"])), head
        return status, hdrs, self.read_to_eof(), head

    def close(self):
        self.s.close()


def get(port, path, extra=b"", method=b"GET"):
    c = Conn(port)
    c.send(method + b" " + path + b" HTTP/1.1\r\nHost: t\r\n" + extra + b"\r\n")
    r = c.response(head_request=method == b"HEAD")
    c.close()
    return r


def stats(port):
    return json.loads(get(port, b"/stats")[2])


def main():
    p, port = start("--threads", "2")
    try:
        check(get(port, b"/stats/reset")[0] == 200, "stats reset")
        # /size/N: deterministic content, HEAD keeps the length.
        for n in (0, 1, 26, 1000, 100000, 3 * 1024 * 1024 + 7):
            st, h, body, _ = get(port, b"/size/%d" % n)
            check(st == 200 and body == content(n), f"/size/{n} content")
            check(h.get("content-length") == str(n), f"/size/{n} length")
        st, h, body, _ = get(port, b"/size/500", method=b"HEAD")
        check(st == 200 and h["content-length"] == "500" and body == b"", "HEAD /size")
        # /chunked/N/CS: real chunk framing, sizes as asked.
        c = Conn(port)
        c.send(b"GET /chunked/100/30 HTTP/1.1\r\nHost: t\r\n\r\n")
        c.read_until(b"\r\n\r\n")
        raw = c.read_until(b"0\r\n\r\n")
        check(raw.startswith(b"1e\r\n" + content(30) + b"\r\n1e\r\n"), "/chunked framing")
        check(b"\r\na\r\n" + content(10, 90) + b"\r\n0\r\n\r\n" in raw, "/chunked last piece")
        c.close()
        st, h, body, _ = get(port, b"/chunked/200000")
        check(h.get("transfer-encoding") == "chunked" and body == content(200000), "/chunked default size")
        # Keep-alive: one connection, several requests.
        get(port, b"/stats/reset")
        c = Conn(port)
        for i in range(5):
            c.send(b"GET /size/10 HTTP/1.1\r\nHost: t\r\n\r\n")
            st, h, body, _ = c.response()
            check(st == 200 and body == content(10), "keep-alive response %d" % i)
        c.close()
        s = stats(port)
        check(s["urls"].get("/size/10") == 5, "five requests counted")
        check(s["connections"] == 2, "keep-alive: one connection (+1 for /stats): %r" % s["connections"])
        # Pipelining: answered in order, including a slow one first.
        c = Conn(port)
        c.send(b"GET /slow/head/200/size/3 HTTP/1.1\r\nHost: t\r\n\r\n"
               b"GET /size/5 HTTP/1.1\r\nHost: t\r\n\r\n"
               b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nabcd"
               b"GET /status/404 HTTP/1.1\r\nHost: t\r\n\r\n")
        r1, r2, r3, r4 = c.response(), c.response(), c.response(), c.response()
        check(r1[2] == content(3) and r2[2] == content(5), "pipelined order")
        check(r3[2].endswith(b"\r\n\r\nabcd") and r3[2].startswith(b"POST /echo HTTP/1.1\r\n"), "pipelined echo")
        check(r4[0] == 404, "pipelined 404")
        c.close()
        # /close: close-delimited body, then EOF.
        c = Conn(port)
        c.send(b"GET /close/777 HTTP/1.1\r\nHost: t\r\n\r\n")
        st, h, body, _ = c.response()
        check(st == 200 and "content-length" not in h and h.get("connection") == "close", "/close head")
        check(body == content(777), "/close body")
        c.close()
        # /status
        for code in (200, 201, 404, 418, 500, 503, 599):
            st, h, body, _ = get(port, b"/status/%d" % code)
            check(st == code and body == b"status %d\n" % code, f"/status/{code}")
        st, h, body, _ = get(port, b"/status/204")
        check(st == 204 and "content-length" not in h, "/status/204 no body")
        check(get(port, b"/status/99")[0] == 400, "/status/99 refused")
        # /echo: CL and chunked, Expect: 100-continue.
        c = Conn(port)
        req_head = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nX-T: y\r\n\r\n"
        c.send(req_head + b"3\r\nabc\r\n2;e=1\r\nde\r\n0\r\nTr: 1\r\n\r\n")
        st, h, body, _ = c.response()
        check(h.get("transfer-encoding") == "chunked", "/echo chunked answer")
        check(body == req_head + b"abcde" and h.get("x-echo-body-bytes") == "5", "/echo chunked body")
        c.send(b"PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
        st, h, body, _ = c.response()
        check(st == 100, "100 Continue before the body")
        c.send(b"xyz")
        st, h, body, _ = c.response()
        check(st == 200 and body.endswith(b"\r\n\r\nxyz") and h["content-length"] == str(len(body)), "/echo CL")
        c.close()
        # /slow: delays are lower bounds, never upper ones.
        t0 = time.monotonic()
        st, h, body, _ = get(port, b"/slow/head/300")
        check(st == 200 and time.monotonic() - t0 >= 0.25, "/slow/head waits")
        c = Conn(port)
        c.send(b"GET /slow/body/100/4 HTTP/1.1\r\nHost: t\r\n\r\n")
        t0 = time.monotonic()
        c.read_until(b"\r\n\r\n")
        check(c.read_n(4) == content(4) and time.monotonic() - t0 >= 0.3, "/slow/body trickles")
        c.close()
        # A half-closed client still gets its pipelined answers.
        c = Conn(port)
        c.send(b"GET /slow/head/500/size/2 HTTP/1.1\r\nHost: t\r\n\r\nGET /size/3 HTTP/1.1\r\nHost: t\r\n\r\n")
        c.s.shutdown(socket.SHUT_WR)
        r1, r2 = c.response(), c.response()
        check(r1[2] == content(2) and r2[2] == content(3), "answers after a half-close")
        check(c.read_to_eof() == b"", "closed after the half-close answers")
        c.close()
        # /cache variants and conditional requests.
        get(port, b"/stats/reset")
        url = b"/cache/o1/max-age=60/s-maxage=30/etag=v1/lm/vary=Accept-Language,X-V/cookie/age=5"
        st, h, body, _ = get(port, url, b"Accept-Language: fr\r\n")
        check(st == 200 and h["cache-control"] == "max-age=60, s-maxage=30", "cache-control")
        check(h["etag"] == '"v1"' and h["vary"] == "Accept-Language, X-V", "etag/vary")
        check(h["last-modified"] == "Tue, 14 Nov 2023 22:13:20 GMT" and h["age"] == "5", "last-modified/age")
        check(h["set-cookie"] == "origin=1" and h["x-fetch-count"] == "1", "cookie/count")
        check(body == b"cache o1 fetch 1\nAccept-Language: fr\nX-V: (none)\n", "vary body: %r" % body)
        st, h, body, _ = get(port, url, b'If-None-Match: "x", W/"v1"\r\n')
        check(st == 304 and body == b"" and h["x-fetch-count"] == "2", "If-None-Match -> 304")
        st, h, _, _ = get(port, url, b"If-Modified-Since: Tue, 14 Nov 2023 22:13:20 GMT\r\n")
        check(st == 304, "If-Modified-Since equal -> 304")
        st, h, _, _ = get(port, url, b"If-Modified-Since: Tue, 14 Nov 2023 22:13:19 GMT\r\n")
        check(st == 200, "If-Modified-Since earlier -> 200")
        st, h, _, _ = get(port, url, b'If-None-Match: "zz"\r\nIf-Modified-Since: Tue, 14 Nov 2023 22:13:20 GMT\r\n')
        check(st == 200, "If-None-Match wins over If-Modified-Since")
        st, h, body, _ = get(port, b"/cache/o2/no-store/private/status=404/size=300/chunked")
        check(st == 404 and h["cache-control"] == "no-store, private" and body == content(300)
              and h["transfer-encoding"] == "chunked", "cache variant 2")
        st, h, _, _ = get(port, b"/cache/o3/expires=100/weak-etag=w")
        check("expires" in h and h["etag"] == 'W/"w"', "expires / weak etag")
        check(get(port, b"/cache/o4/bogus")[0] == 400, "unknown cache directive")
        s = stats(port)
        check(s["urls"][url.decode()] == 5, "cache fetches counted: %r" % s["urls"])
        # /hang: no answer.
        c = Conn(port)
        c.s.settimeout(0.3)
        c.send(b"GET /hang HTTP/1.1\r\nHost: t\r\n\r\n")
        try:
            d = c.s.recv(100)
            check(False, "/hang answered %r" % d)
        except socket.timeout:
            pass
        c.close()
        # /drop: fewer bytes than announced, then EOF; /drop/head: nothing at all.
        c = Conn(port)
        c.send(b"GET /drop/100 HTTP/1.1\r\nHost: t\r\n\r\n")
        raw = c.read_to_eof()
        check(b"Content-Length: 100\r\n" in raw and raw.endswith(b"\r\n\r\n" + content(50)), "/drop truncated")
        c.close()
        c = Conn(port)
        c.send(b"GET /drop/head HTTP/1.1\r\nHost: t\r\n\r\n")
        check(c.read_to_eof() == b"", "/drop/head sends nothing")
        c.close()
        # A request the parser refuses: 400 and close.
        get(port, b"/stats/reset")
        c = Conn(port)
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
        st, h, body, _ = c.response()
        check(st == 400 and h.get("connection") == "close" and b"conflicting" in body, "bad request 400")
        check(c.read_to_eof() == b"", "closed after 400")
        c.close()
        check(stats(port)["bad_requests"] == 1, "bad request counted")
        check(get(port, b"/nothing/here")[0] == 404, "404")
        # HTTP/1.0 without keep-alive: the origin closes after the response.
        c = Conn(port)
        c.send(b"GET /size/3 HTTP/1.0\r\n\r\n")
        st, h, body, _ = c.response()
        check(body == content(3) and h.get("connection") == "close" and c.read_to_eof() == b"", "1.0 close")
        c.close()
        c = Conn(port)
        for i in range(2):
            c.send(b"GET /size/4 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            st, h, body, _ = c.response()
            check(body == content(4) and h.get("connection") == "keep-alive", "1.0 keep-alive %d" % i)
        c.close()
        # Exit codes: a taken port and a bad flag are usage errors (2).
        # SO_REUSEPORT lets a second origin bind the same port; that is wanted for
        # threads, so check a port held by a plain socket instead.
        s2 = socket.socket()
        s2.bind(("127.0.0.1", 0))
        s2.listen()
        q = subprocess.run([ORIGIN, "--port", str(s2.getsockname()[1])], capture_output=True, timeout=10)
        check(q.returncode == 2 and b"cannot listen" in q.stderr, "port in use -> 2: %r" % (q.returncode,))
        s2.close()
        q = subprocess.run([ORIGIN, "--bogus"], capture_output=True, timeout=10)
        check(q.returncode == 2, "bad flag -> 2")
        q = subprocess.run([ORIGIN, "--help"], capture_output=True, timeout=10)
        check(q.returncode == 0 and b"--port" in q.stdout, "--help")
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = -9
    check(rc == 0, "SIGTERM -> exit 0 (got %r)" % rc)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("all origin checks passed")


if __name__ == "__main__":
    main()
