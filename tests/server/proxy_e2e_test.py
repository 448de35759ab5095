#!/usr/bin/env python3
"""End-to-end tests of ringproxy with real clients (curl, wrk, raw sockets) and a real
origin process (ringlog_test_origin) on loopback. Log records and counters are read
through the library's reader API (proxy_log_reader: Reader + Grouper, StatsReader).

usage: proxy_e2e_test.py RINGPROXY ORIGIN LOG_READER WORKDIR CASE
CASE: one of the functions named case_* below (without the prefix), or "all".
Every server started here listens on 127.0.0.1 only and is stopped by pid; request
loops are bounded. Nothing asserts on times: timeouts are set small and only their
effects are checked.
"""
import os
import signal
import socket
import socketserver
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import e2e  # noqa: E402
from e2e import (CHILDREN, LocalTCPServer, Origin, Proxy, check, curl, free_port, read_response, recs, stop,  # noqa: E402
                 tags, wait_for, wait_port)
from checks import need  # noqa: E402
import procs  # noqa: E402

# Set by main() from argv.
PROXY = ORIGIN = READER = WORKDIR = CASE = None


def raw(port, data, timeout=5.0, until_close=True):
    """Sends bytes, reads until the server closes (or the timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    end = time.time() + timeout
    try:
        while time.time() < end:
            b = s.recv(65536)
            if not b:
                return out, True
            out += b
            if not until_close:
                break
    except socket.timeout:
        return out, False
    finally:
        s.close()
    return out, False


# ---- cases --------------------------------------------------------------------------

def case_basic():
    """GET, keep-alive, Via/XFF, hop-by-hop removal, records in Varnish's order."""
    o = Origin()
    p = Proxy([f"o1=127.0.0.1:{o.port}"])
    r = curl("-i", "-H", "Connection: keep-alive, X-Hop", "-H", "X-Hop: secret", "-H", "Keep-Alive: 5",
             p.url("/size/1024"), p.url("/size/2048"))
    out = r.stdout
    check(r.returncode == 0, f"curl ok ({r.stderr})")
    check(out.count(b"HTTP/1.1 200") == 2, "two 200 responses")
    check(b"Via: 1.1 ringproxy" in out or b"via: 1.1 ringproxy" in out.lower(), "Via added to the response")
    txns = p.settle(2, sessions=1)
    reqs = [t for t in txns if t["type"] == "req"]
    bereqs = [t for t in txns if t["type"] == "bereq"]
    sess = [t for t in txns if t["type"] == "sess"]
    check(len(reqs) == 2 and len(bereqs) == 2, f"2 requests and 2 fetches logged, got {len(reqs)} {len(bereqs)}")
    check(len(sess) == 1, f"one session for a keep-alive pair, got {len(sess)}")
    if reqs:
        t = reqs[0]
        order = [x for x in tags(t) if x != "ReqHeader" and x != "RespHeader"]
        want = ["Begin", "Timestamp", "Timestamp", "ReqStart", "ReqMethod", "ReqURL", "ReqProtocol", "Link",
                "Timestamp", "Timestamp", "RespProtocol", "RespStatus", "RespReason", "Timestamp", "ReqAcct", "End"]
        check(order == want, f"request record order {order}")
        ts = [x.split(":")[0] for x in recs(t, "Timestamp")]
        check(ts == ["Start", "Req", "Fetch", "Process", "Resp"], f"request timestamps {ts}")
        check(recs(t, "ReqURL") == ["/size/1024"], "ReqURL")
        check(recs(t, "RespStatus") == ["200"], "RespStatus")
        acct = recs(t, "ReqAcct")[0].split()
        check(acct[4] == "1024", f"ReqAcct body bytes sent {acct}")
        link = recs(t, "Link")[0].split()
        check(link[0] == "bereq" and int(link[1]) in [b["vxid"] for b in bereqs], f"Link to the fetch {link}")
    if bereqs:
        b = [x for x in bereqs if recs(x, "BereqURL") == ["/size/1024"]][0]
        check(b["parent"] == reqs[0]["vxid"], "fetch's parent is the request")
        hdrs = recs(b, "BereqHeader")
        check(any(h.lower().startswith("x-forwarded-for: 127.0.0.1") for h in hdrs), f"XFF sent {hdrs}")
        check(any(h.lower().startswith("via: 1.1 ringproxy") for h in hdrs), "Via sent")
        check(not any(h.lower().startswith(("x-hop", "keep-alive", "connection")) for h in hdrs),
              f"hop-by-hop fields removed {hdrs}")
        check("BackendOpen" in tags(b) and "BereqAcct" in tags(b) and "BerespStatus" in tags(b), "fetch records")
        check(recs(b, "BerespStatus") == ["200"], "BerespStatus")
    for b in bereqs:  # a new connection, then a pooled one: each logs Connected, as Varnish
        seq = [x[0] if x[0] != "Timestamp" else x[1].split(":")[0] for x in b["records"]
               if x[0] in ("Timestamp", "BackendOpen")]
        check(seq[:4] == ["Start", "Connected", "BackendOpen", "Bereq"],
              f"{recs(b, 'BereqURL')}: Timestamp Connected once the connection is had, before BackendOpen: {seq}")
    if sess:
        s = sess[0]
        check(tags(s)[1] == "Timestamp" or "SessOpen" in tags(s), "SessOpen")
        check(len(recs(s, "Link")) == 2, "session links its two requests")
        check(recs(s, "SessClose")[0].split()[0] in ("REM_CLOSE", "RX_CLOSE_IDLE"), f"SessClose {recs(s, 'SessClose')}")
    st = p.stats()
    check(st["MAIN.client_req"] == 2 and st["MAIN.sess_conn"] == 1, "MAIN.client_req / sess_conn")
    check(st["MAIN.client_resp_2xx"] == 2, "2xx counted")
    check(st["MAIN.backend_conn"] == 1 and st["MAIN.backend_reuse"] == 1, "backend connection reused")
    check(st["VBE.o1.req"] == 2, "VBE.o1.req")
    check(st["MAIN.s_resp_bodybytes"] == 3072, "body bytes counted")
    check(p.stop() == 0, "clean exit")
    o.stop()


def case_pipeline():
    """Pipelined requests answered in order, on one connection; HTTP/1.0; HEAD."""
    o = Origin()
    p = Proxy([f"127.0.0.1:{o.port}"])
    s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
    reqs = b"".join(b"GET /size/%d HTTP/1.1\r\nHost: x\r\n\r\n" % n for n in (3, 1, 2, 500))
    reqs += b"HEAD /size/7 HTTP/1.1\r\nHost: x\r\n\r\n"
    s.sendall(reqs)
    f = s.makefile("rb")
    sizes = []
    for _ in range(4):
        r = read_response(f)
        sizes.append(len(r.body) if r else None)
    check(sizes == [3, 1, 2, 500], f"pipelined responses in order {sizes}")
    r = read_response(f, "HEAD")
    check(r and r.status == 200 and r.h("content-length") == "7", f"HEAD keeps the length {r}")
    s.close()
    # HTTP/1.0 client, chunked origin response: body until close, no chunked framing.
    out, closed = raw(p.port, b"GET /chunked/3000 HTTP/1.0\r\nHost: x\r\n\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    check(closed and len(body) == 3000 and b"chunked" not in head.lower(), f"HTTP/1.0 gets a close-delimited body {head}")
    txns = p.settle(6)
    st = p.stats()
    check(st["MAIN.sess_pipeline"] >= 1, "pipelined requests counted")
    check(st["MAIN.client_req"] == 6, f"6 requests {st['MAIN.client_req']}")
    p.stop()
    o.stop()


def case_bodies():
    """Chunked both ways, large bodies, Expect: 100-continue."""
    o = Origin()
    p = Proxy([f"127.0.0.1:{o.port}"])
    r = curl(p.url("/chunked/100000"), "-o", os.path.join(WORKDIR, "c.bin"), "-w", "%{size_download}")
    check(r.stdout == b"100000", f"chunked response relayed ({r.stdout})")
    r = curl(p.url("/size/20000000"), "-o", "/dev/null", "-w", "%{size_download}")
    check(r.stdout == b"20000000", f"20 MB response relayed ({r.stdout})")
    blob = os.path.join(WORKDIR, "blob.bin")
    with open(blob, "wb") as fh:
        fh.write(os.urandom(3 * 1024 * 1024 + 17))
    r = curl("--data-binary", "@" + blob, "-H", "Expect: 100-continue", p.url("/echo"), "-o",
             os.path.join(WORKDIR, "echo1.bin"))
    data = open(blob, "rb").read()
    echoed = open(os.path.join(WORKDIR, "echo1.bin"), "rb").read()
    check(r.returncode == 0 and echoed.endswith(data) and b"\r\nContent-Length: %d\r\n" % len(data) in echoed
          and b"Expect" not in echoed.split(b"\r\n\r\n")[0],
          "3 MB Content-Length body echoed after 100-continue (Expect not forwarded)")
    r = curl("--data-binary", "@" + blob, "-H", "Transfer-Encoding: chunked", p.url("/echo"), "-o",
             os.path.join(WORKDIR, "echo2.bin"))
    echoed = open(os.path.join(WORKDIR, "echo2.bin"), "rb").read()
    check(r.returncode == 0 and echoed.endswith(data), "3 MB chunked request body echoed")
    out, _ = raw(p.port, b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                          b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 200") and out.endswith(b"\r\nhello world\r\n0\r\n\r\n"),
          f"chunked request with extensions decoded {out[-60:]}")
    txns = p.settle(5)
    st = p.stats()
    check(st["MAIN.s_req_bodybytes"] >= 2 * (3 * 1024 * 1024 + 17), "request body bytes counted")
    p.stop()
    o.stop()


SMUGGLING = {
    "cl_and_te": b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "two_cl": b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
    "bad_chunk_size": b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    "obs_fold": b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  folded\r\n\r\n",
    "bare_cr": b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
    "bad_name": b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n",
    "te_not_chunked": b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
    "space_before_colon": b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length : 0\r\n\r\n",
}


def case_smuggling():
    """Every smuggling shape: 400, an Error record, the connection closed, nothing sent on."""
    o = Origin()
    p = Proxy([f"127.0.0.1:{o.port}"])
    for name, data in SMUGGLING.items():
        # A valid request pipelined behind must never reach the origin.
        out, closed = raw(p.port, data + b"GET /size/1 HTTP/1.1\r\nHost: x\r\n\r\n")
        check(out.startswith(b"HTTP/1.1 400"), f"{name}: 400 ({out[:40]})")
        check(closed, f"{name}: connection closed")
        check(out.count(b"HTTP/1.1") == 1, f"{name}: nothing answered after the 400")
    txns = p.settle(len(SMUGGLING))
    reqs = [t for t in txns if t["type"] == "req"]
    errs = [t for t in reqs if recs(t, "RespStatus") == ["400"]]
    check(len(errs) == len(SMUGGLING), f"{len(errs)} 400s logged")
    check(all(recs(t, "Error") for t in errs), "each 400 has an Error record")
    sess = [t for t in txns if t["type"] == "sess"]
    check(all(recs(s, "SessClose")[0].split()[0] == "RX_BAD" for s in sess), "SessClose RX_BAD")
    st = p.stats()
    check(st["MAIN.client_req_400"] == len(SMUGGLING), f"client_req_400 {st['MAIN.client_req_400']}")
    # Only the bodies accepted before the framing error may have reached the origin: the
    # bad chunk size one (its head was fine). The trailing GETs never did.
    check(st.get("VBE.127_0_0_1_%d.req" % o.port, 0) <= 1, "smuggled requests not forwarded")
    p.stop()
    o.stop()


def case_limits():
    """431 / 414 / 400 with Error records; limits changed at run time."""
    p = Proxy()  # demo origin
    out, closed = raw(p.port, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 414") and closed, f"long URL: 414 ({out[:30]})")
    out, closed = raw(p.port, b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(101)) + b"\r\n")
    check(out.startswith(b"HTTP/1.1 431") and closed, f"101 fields: 431 ({out[:30]})")
    out, closed = raw(p.port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 70000 + b"\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 431") and closed, f"70 kB header block: 431 ({out[:30]})")
    out, closed = raw(p.port, b"GET / HTTP/1.1\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 400") and closed, "no Host: 400")
    rc, txt = p.adm("param.set", "max_url", "64")
    check(rc == 0, f"param.set max_url ({txt})")
    out, _ = raw(p.port, b"GET /" + b"a" * 100 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 414"), "max_url applies without restart")
    rc, txt = p.adm("param.set", "max_headers", "4")
    check(rc == 0, f"param.set max_headers ({txt})")
    out, _ = raw(p.port, b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 431"), "max_headers applies without restart")
    # Six connections, each closed by the proxy: a session ends (SessClose) after its
    # socket is closed, so the client may see the close before it is logged. Wait for
    # the sessions too, not only the requests.
    txns = p.settle(6, sessions=6)
    errs = [t for t in txns if t["type"] == "req" and recs(t, "Error")]
    check(len(errs) == 6, f"6 Error records, got {len(errs)}")
    st = p.stats()
    check(st["MAIN.client_req_414"] == 2 and st["MAIN.client_req_431"] == 3 and st["MAIN.client_req_400"] == 1,
          f"limit counters {st['MAIN.client_req_414']} {st['MAIN.client_req_431']} {st['MAIN.client_req_400']}")
    sess = [t for t in txns if t["type"] == "sess"]
    check(sum(1 for s in sess if recs(s, "SessClose")[0].startswith("RX_OVERFLOW")) == 5, "SessClose RX_OVERFLOW")
    p.stop()


def case_timeouts():
    """Header (slowloris), idle and send timeouts: each closes with its SessClose reason."""
    p = Proxy(args=["--timeout_header", "0.3", "--timeout_idle", "0.4", "--timeout_send", "0.5"])
    s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # never finished
    check(s.recv(100) == b"", "partial head: closed by the header timeout")
    s.close()
    s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
    s.sendall(b"GET /10 HTTP/1.1\r\nHost: x\r\n\r\n")
    f = s.makefile("rb")
    r = read_response(f)
    check(r and r.status == 200, "request before idling")
    check(f.read(1) == b"", "idle keep-alive: closed by the idle timeout")
    s.close()
    s = socket.create_connection(("127.0.0.1", p.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /500m HTTP/1.1\r\nHost: x\r\n\r\n")  # 500 MB, never read
    closed = wait_for(lambda: p.stats()["MAIN.sess_timeout_send"] >= 1, 20)
    check(closed, "unread response: closed by the send timeout")
    s.close()
    txns = wait_for(lambda: p.txns() if len([t for t in p.txns() if t["type"] == "sess"]) >= 3 else None) or []
    reasons = sorted(recs(t, "SessClose")[0].split()[0] for t in txns if t["type"] == "sess")
    check(reasons == ["RX_CLOSE_IDLE", "RX_TIMEOUT", "TX_ERROR"], f"SessClose reasons {reasons}")
    st = p.stats()
    check(st["MAIN.sess_timeout_hdr"] == 1 and st["MAIN.sess_timeout_idle"] == 1 and st["MAIN.sess_timeout_send"] == 1,
          "timeout counters")
    p.stop()


def case_backend_errors():
    """connect failure -> 503 and the backend is skipped until a probe passes; first
    byte timeout -> 504; between bytes timeout -> cut response; dropped connection -> 502."""
    dead = free_port()
    p = Proxy([f"dead=127.0.0.1:{dead}"], args=["--connect_timeout", "1", "--health_interval", "60"])
    r = curl("-o", "/dev/null", "-w", "%{http_code}", p.url("/size/10"))
    check(r.stdout == b"503", f"connect refused: 503 ({r.stdout})")
    r = curl("-o", "/dev/null", "-w", "%{http_code}", p.url("/size/10"))
    check(r.stdout == b"503", "sick backend skipped: 503")
    rc, txt = p.adm("backend.list")
    check(rc == 0 and "sick" in txt, f"backend.list shows it sick: {txt}")
    # The origin comes up on that port: the next passing probe brings the backend back.
    o = Origin(dead)
    p.adm("param.set", "health_interval", "0.2")
    ok = wait_for(lambda: curl("-o", "/dev/null", "-w", "%{http_code}", p.url("/size/10")).stdout == b"200", 10)
    check(ok, "backend used again after a passing probe")
    rc, txt = p.adm("backend.health", "dead")
    check(rc == 0 and "healthy" in txt and "H" in txt, f"backend.health: {txt}")
    p.adm("param.set", "first_byte_timeout", "0.3")
    r = curl("-o", "/dev/null", "-w", "%{http_code}", p.url("/hang"))
    check(r.stdout == b"504", f"first byte timeout: 504 ({r.stdout})")
    r = curl("-o", "/dev/null", "-w", "%{http_code}", p.url("/drop/head"))
    check(r.stdout == b"502", f"origin drops the connection: 502 ({r.stdout})")
    r = curl("-o", "/dev/null", "-w", "%{http_code}", p.url("/drop/1000"))
    check(r.returncode != 0, f"origin cuts the body: the response is cut too ({r.stdout})")
    p.adm("param.set", "between_bytes_timeout", "0.3")
    r = curl("-o", "/dev/null", "-w", "%{http_code} %{size_download}", p.url("/slow/body/1000/5"))
    check(r.returncode != 0, f"between bytes timeout: response cut ({r.stdout} rc={r.returncode})")
    txns = p.settle(7)
    fe = [x for t in txns if t["type"] == "bereq" for x in recs(t, "FetchError")]
    check(any("connect" in x for x in fe), f"FetchError for the connect failure {fe}")
    check(any("first byte timeout" in x for x in fe), "FetchError for the first byte timeout")
    check(any("between bytes timeout" in x for x in fe), "FetchError for the between bytes timeout")
    check(any("closed before a response" in x for x in fe), "FetchError for the dropped connection")
    check(any("body cut short" in x for x in fe), "FetchError for the cut body")
    st = p.stats()
    check(st["MAIN.fetch_no_backend"] >= 1, "no healthy backend counted")
    check(st["MAIN.fetch_timeout_first_byte"] == 1 and st["MAIN.fetch_timeout_between_bytes"] == 1, "timeouts counted")
    check(st["VBE.dead.fail"] >= 1 and st["VBE.dead.sick"] >= 1 and st["VBE.dead.healthy"] == 1, "VBE counters")
    p.stop()
    o.stop()


class BadChunkHandler(socketserver.BaseRequestHandler):
    """An origin whose chunked body breaks after its first chunk: "5 hello", then a
    chunk size of "zz". Holds the connection until the proxy closes it."""

    def handle(self):
        s = self.request
        s.settimeout(10)
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                b = s.recv(65536)
                if not b:
                    return
                head += b
            s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nCache-Control: max-age=60\r\n\r\n"
                      b"5\r\nhello\r\nzz\r\n")
            while s.recv(65536):
                pass
        except OSError:
            pass


def case_bad_backend_chunk():
    """A backend's broken chunked body, delivered directly (--cache off) and through the
    cache: the client's response is cut, FetchError says why, fetch_failed counts it."""
    origin = LocalTCPServer(BadChunkHandler)
    for args in (["--cache", "off"], []):
        p = Proxy([f"bad=127.0.0.1:{origin.port}"], args=args)
        r = curl("-o", "/dev/null", "-w", "%{http_code}", p.url("/bad"))
        check(r.returncode != 0, f"{args or 'cache'}: response cut (rc={r.returncode}, {r.stdout})")
        txns = p.settle(1)
        fe = [x for t in txns if t["type"] == "bereq" for x in recs(t, "FetchError")]
        check(any("bad chunked body" in x for x in fe), f"{args or 'cache'}: FetchError for the chunk size {fe}")
        check(p.stats()["MAIN.fetch_failed"] == 1, f"{args or 'cache'}: fetch_failed counted once")
        p.stop()
    origin.stop()


def case_round_robin():
    """Two origins share the requests; a connect timeout gives 503."""
    o1, o2 = Origin(), Origin()
    p = Proxy([f"a=127.0.0.1:{o1.port}", f"b=127.0.0.1:{o2.port}"], threads=1)
    for i in range(10):
        curl("-o", "/dev/null", p.url(f"/size/{i}"))
    st = p.stats()
    check(st["VBE.a.req"] == 5 and st["VBE.b.req"] == 5, f"round-robin {st['VBE.a.req']} {st['VBE.b.req']}")
    p.stop()
    # Connect timeout: a listener whose accept queue is full never completes a handshake
    # (SYNs dropped), so the connect times out.
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(0)
    fillers = []
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(ls.getsockname())
        except BlockingIOError:
            pass
        fillers.append(c)
    # The accept queue (backlog 0: one connection) is full once a handshake completed.
    check(wait_for(lambda: procs.accept_queue(ls.getsockname()[1]) >= 1), "the listener's accept queue filled")
    p = Proxy([f"full=127.0.0.1:{ls.getsockname()[1]}"], args=["--connect_timeout", "0.3", "--health_interval", "60"])
    r = curl("-o", "/dev/null", "-w", "%{http_code}", p.url("/size/1"))
    check(r.stdout == b"503", f"connect timeout: 503 ({r.stdout})")
    st = p.stats()
    check(st["MAIN.fetch_timeout_connect"] == 1 or st["MAIN.backend_fail"] >= 1, "connect timeout counted")
    p.stop()
    for c in fillers:
        c.close()
    ls.close()
    o1.stop()
    o2.stop()


def case_trace():
    """Tracing: off by default, on globally by adm, per request from trusted addresses only."""
    p = Proxy(args=["--trusted", "127.0.0.0/8"])
    curl("-o", "/dev/null", p.url("/1"))
    curl("-o", "/dev/null", "-H", "X-Ringlog-Trace: 1", p.url("/2"))
    rc, _ = p.adm("param.set", "trace", "on")
    check(rc == 0, "param.set trace on")
    curl("-o", "/dev/null", p.url("/3"))
    p.adm("param.set", "trace", "off")
    txns = p.settle(3)
    by = {recs(t, "ReqURL")[0]: t for t in txns if t["type"] == "req"}
    check(not recs(by["/1"], "Trace"), "no Trace records when off")
    t2 = recs(by["/2"], "Trace")
    check(len(t2) >= 4 and any(x.startswith("recv") for x in t2) and any(x.startswith("deliver") for x in t2),
          f"per-request trace from a trusted address {t2}")
    check(len(recs(by["/3"], "Trace")) >= 4, "global trace")
    p.stop()
    p = Proxy()  # nobody trusted
    curl("-o", "/dev/null", "-H", "X-Ringlog-Trace: 1", p.url("/4"))
    txns = p.settle(1)
    check(all(not recs(t, "Trace") for t in txns), "trace header ignored from an untrusted address")
    p.stop()


def case_admin():
    """adm commands, socket mode, errors; the tag mask applies at once."""
    p = Proxy()
    sock = os.path.join(p.dir, "admin.sock")
    check(stat.S_IMODE(os.stat(sock).st_mode) == 0o600, "admin socket is 0600")
    rc, out = p.adm("ping")
    check(rc == 0 and out.startswith("PONG"), f"ping {out}")
    rc, out = p.adm("param.show")
    check(rc == 0 and "timeout_idle" in out and "mask" in out, "param.show")
    rc, out = p.adm("param.set", "timeout_idle", "abc")
    check(rc == 1 and "bad value" in out, f"bad value refused {out}")
    rc, out = p.adm("param.set", "nope", "1")
    check(rc == 1, "unknown parameter refused")
    rc, out = p.adm("frobnicate")
    check(rc == 1, "unknown command refused")
    rc, out = p.adm("param.set", "timeout_idle", "7")
    rc, out = p.adm("param.show", "timeout_idle")
    check(" 7 " in out, f"param.set applied {out}")
    rc, out = p.adm("param.set", "mask", "-ReqHeader")
    check(rc == 0, f"mask set {out}")
    curl("-o", "/dev/null", "-H", "X-Test: 1", p.url("/5"))
    rc, out = p.adm("stats", "MAIN.client_req")
    check(rc == 0 and "MAIN.client_req " in out, f"stats {out}")
    txns = p.settle(1)
    check(all(not recs(t, "ReqHeader") for t in txns if t["type"] == "req"), "masked tag not logged")
    rc, out = p.adm("backend.list")
    check(rc == 0 and "demo" in out, "backend.list with the demo origin")
    p.stop()
    r = subprocess.run([PROXY, "-n", "no-such-instance-here", "adm", "ping"], capture_output=True, text=True)
    check(r.returncode == 3 and "cannot reach" in r.stderr, f"adm without a server: exit 3 ({r.stderr})")
    # A socket path longer than sockaddr_un can hold (deep checkouts): still bound and reached.
    deep = os.path.join(WORKDIR, "d" * 60, "e" * 60)
    os.makedirs(deep, exist_ok=True)
    longsock = os.path.join(deep, "admin.sock")
    check(len(longsock) > 108, "the path is longer than sun_path")
    p = Proxy(args=["--admin-socket", longsock])
    rc, out = p.adm("ping")
    check(rc == 0 and out.startswith("PONG") and os.path.exists(longsock), f"ping over a long socket path {out}")
    p.stop()


def case_config():
    """Unknown options and keys, bad addresses, a port in use: a clear error, exit 2."""
    def run(*args):
        return subprocess.run([PROXY, "-n", f"cfg-{os.getpid()}", *args], capture_output=True, text=True, timeout=30)
    r = run("--bogus")
    check(r.returncode == 2 and r.stderr, f"unknown option: exit 2 ({r.stderr.strip()})")
    r = run("-a", "127.0.0.1:99999")
    check(r.returncode == 2 and "port" in r.stderr, f"bad port: exit 2 ({r.stderr.strip()})")
    r = run("-a", "nosuchhost.invalid:80")
    check(r.returncode == 2 and "bad address" in r.stderr, f"bad address: exit 2 ({r.stderr.strip()})")
    r = run("-b", "127.0.0.1")
    check(r.returncode == 2, f"backend without port: exit 2 ({r.stderr.strip()})")
    r = run("--timeout_idle", "-1")
    check(r.returncode == 2 and "timeout_idle" in r.stderr, f"param out of range: exit 2 ({r.stderr.strip()})")
    r = run("--trusted", "10.0.0.0/99")
    check(r.returncode == 2, "bad CIDR: exit 2")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    r = run("-a", f"127.0.0.1:{busy.getsockname()[1]}")
    check(r.returncode == 2 and "in use" in r.stderr, f"port in use: exit 2 ({r.stderr.strip()})")
    busy.close()
    cfg = os.path.join(WORKDIR, "bad.conf")
    with open(cfg, "w") as fh:
        fh.write("threads = 1\nno_such_key = 3\n")
    r = run("--config", cfg)
    check(r.returncode == 2 and "no_such_key" in r.stderr, f"unknown config key: exit 2 ({r.stderr.strip()})")
    port = free_port()
    cfg = os.path.join(WORKDIR, "good.conf")
    inst = f"cfgok-{os.getpid()}"
    with open(cfg, "w") as fh:
        fh.write(f'listen = "127.0.0.1:{port}"\nthreads = 1\ninstance = "{inst}"\ntimeout_idle = 3.5\n'
                 f'max_url = 1000\nvia = "edge1"\n')
    proc = subprocess.Popen([PROXY, "--config", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    CHILDREN.append(proc)
    check(wait_port(port, proc), "starts from a config file")
    r = subprocess.run([PROXY, "-n", inst, "adm", "param.show", "timeout_idle"], capture_output=True, text=True)
    check(" 3.5 " in r.stdout, f"config file sets parameters ({r.stdout.strip()})")
    r = curl("-i", f"http://127.0.0.1:{port}/1")
    check(b"Via: 1.1 edge1" in r.stdout, "config file sets --via")
    check(stop(proc) == 0, "clean exit")


def case_shutdown():
    """SIGTERM: stop accepting, finish the in-flight request, exit 0, the log complete."""
    o = Origin()
    p = Proxy([f"127.0.0.1:{o.port}"], args=["--shutdown_grace", "10"])
    got = {}

    def slow_request():
        got["r"] = curl("-o", "/dev/null", "-w", "%{http_code} %{size_download}", p.url("/slow/body/150/8"))
    import threading
    th = threading.Thread(target=slow_request)
    th.start()
    wait_for(lambda: p.stats()["MAIN.backend_req"] >= 1, 10)
    p.proc.send_signal(signal.SIGTERM)
    # The listeners close once the proxy has taken the signal (no listening socket left
    # on the port); then a connection must be refused.
    check(wait_for(lambda: not procs.listening(p.port)), "the listeners closed after SIGTERM")
    refused = False
    try:
        socket.create_connection(("127.0.0.1", p.port), timeout=1).close()
    except OSError:
        refused = True
    check(refused, "no longer accepting after SIGTERM")
    th.join(60)
    check(p.proc.wait(60) == 0, "exit 0 after the grace period")
    r = got.get("r")
    check(r is not None and r.returncode == 0 and r.stdout.startswith(b"200"), f"in-flight request finished ({r and r.stdout})")
    txns = p.txns()
    req = [t for t in txns if t["type"] == "req"]
    check(len(req) == 1 and req[0]["ended"] and recs(req[0], "RespStatus") == ["200"], "its record complete")
    o.stop()


def case_load():
    """A short bounded wrk load: no errors, and the counters agree with wrk."""
    wrk = need("wrk")
    o = Origin()
    p = Proxy([f"127.0.0.1:{o.port}"])
    r = subprocess.run([wrk, "-t", "2", "-c", "16", "-d", "2s", "--latency", p.url("/size/1024")],
                       capture_output=True, text=True, timeout=60)
    print(r.stdout)
    n = 0
    for line in r.stdout.splitlines():
        if "requests in" in line:
            n = int(line.split()[0])
    check(n > 0, "wrk made requests")
    check("Non-2xx" not in r.stdout and "Socket errors" not in r.stdout, "no errors under load")
    st = p.stats()
    p.stop()
    check(st["MAIN.client_req"] >= n and st["MAIN.client_resp_2xx"] == st["MAIN.client_req"], f"counters agree with wrk (req {st['MAIN.client_req']} 2xx {st['MAIN.client_resp_2xx']} wrk {n})")
    txns = p.txns()
    reqs = [t for t in txns if t["type"] == "req"]
    check(len(reqs) >= min(n, 1000) * 0.5, f"requests logged: {len(reqs)} of {n} (ring may wrap)")
    o.stop()


def main():
    global PROXY, ORIGIN, READER, WORKDIR, CASE
    PROXY, ORIGIN, READER, WORKDIR, CASE = sys.argv[1:6]
    e2e.configure(WORKDIR, PROXY, READER, origin=ORIGIN, label=CASE)
    return e2e.run_cases(e2e.cases_of(globals()), CASE)


if __name__ == "__main__":
    sys.exit(main())
