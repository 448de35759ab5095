#!/usr/bin/env python3
"""End-to-end tests of ringproxy's cache: real clients (raw sockets, many at
once) in front of a real origin (ringlog_test_origin), bodies checked byte for byte
against the origin's content pattern, backend fetches counted by the origin (/stats),
log records and counters read through the library's reader API (support's proxy_log_reader).

usage: cache_e2e_test.py RINGPROXY ORIGIN LOG_READER WORKDIR CASE TRANSPORT
CASE: one of the functions named case_* below (without the prefix), or "all".
TRANSPORT: writev | io_uring (ringproxy --transport); every case runs on both.

Every server started here listens on 127.0.0.1 only and is stopped by pid (children
also get PR_SET_PDEATHSIG); request loops are bounded. Nothing asserts on times: TTL
and grace cases wait for an expiry, then check its effects (records, fetch counts).
The processes, raw-socket HTTP and log helpers are tests/common/e2e.py's, shared with
the proxy and tunnel suites.
"""
import gzip
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import e2e  # noqa: E402
import procs  # noqa: E402
from checks import skip  # noqa: E402
from e2e import (LocalHTTPServer, Origin, Resp, check, connect, read_head, read_response, recs, request,  # noqa: E402
                 request_bytes, rst_close, wait_for)

# Set by main() from argv.
PROXY = ORIGIN = READER = WORKDIR = CASE = TRANSPORT = None


def info(*a):
    print("  ", *a, flush=True)


# ---- the origin's content pattern ----------------------------------------------------
# Byte i is 'a' + (i + i/26 + i/676 + i/17576) % 26. Within a block of 26 bytes starting
# at 26k the sum is j + k + k/26 + k/676 (j = i % 26): a rotation of the alphabet. The
# pattern repeats every 26^4 bytes (i + 26^4 adds 26^4 + 26^3 + 26^2 + 26 to the sum).
_ROT = [bytes(ord("a") + (j + s) % 26 for j in range(26)) for s in range(26)]
PERIOD = 26 ** 4
_TILE = b"".join(_ROT[(k + k // 26 + k // 676) % 26] for k in range(PERIOD // 26))


def content(n, off=0):
    """Bytes off .. off+n-1 of the origin's content."""
    start = off % PERIOD
    reps = (start + n) // PERIOD + 1
    return (_TILE * reps)[start:start + n] if reps > 1 else _TILE[start:start + n]


def first_diff(a, b):
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else -1


def same_bytes(got, want, what):
    ok = got == want
    if not ok:
        check(False, f"{what}: {len(got)} bytes, want {len(want)}, first difference at {first_diff(got, want)}")
    return ok


# ---- processes and requests ---------------------------------------------------------------

class Proxy(e2e.Proxy):
    """ringproxy with its cache on (or off) and the transport under test."""

    def __init__(self, backends=(), args=(), threads=2, cache=True):
        self.cache = cache
        super().__init__(backends, args, threads)

    def options(self):
        return ["--cache", "on" if self.cache else "off", "--transport", TRANSPORT]

    def stop(self, sig=signal.SIGTERM):
        if TRANSPORT == "io_uring":
            # Informational: the kernel (or a seccomp filter) may refuse io_uring, and the
            # proxy then falls back to writev with a Notice; the checks hold either way.
            notes = [n for t in self.txns() for n in recs(t, "Notice") if "io_uring" in n]
            info("io_uring notices:", notes[:2] if notes else "none (io_uring in use)")
        return super().stop(sig)


def parallel(n, fn):
    """Runs fn(i) in n threads released together; returns the results in order."""
    out = [None] * n
    barrier = threading.Barrier(n)

    def run(i):
        try:
            barrier.wait(30)
        except threading.BrokenBarrierError:
            pass
        try:
            out[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            out[i] = e
    ths = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(120)
    return out


# ---- log helpers ----------------------------------------------------------------------------

def reqs_for(txns, url, method=None):
    return [t for t in txns if t["type"] == "req" and recs(t, "ReqURL") == [url]
            and (method is None or recs(t, "ReqMethod") == [method])]


def link_reasons(t):
    """The reasons of a request's links to fetches (Varnish's fetch, pass, bgfetch)."""
    return [v.split()[2] for v in recs(t, "Link") if v.startswith("bereq ")]


def bereqs_for(txns, url):
    return [t for t in txns if t["type"] == "bereq" and url in recs(t, "BereqURL")]


def started(t):
    """A transaction's start time (its first Timestamp's absolute time)."""
    for v in recs(t, "Timestamp"):
        return float(v.split()[1])
    return 0.0


def chrono(ts):
    """Transactions in the order they started. Not by vxid: each worker hands out
    vxids from its own block, so vxid order is not time order across threads."""
    return sorted(ts, key=started)


def hit_of(t):
    """The Hit record of a request as (object vxid, remaining TTL), or None."""
    h = recs(t, "Hit")
    if not h:
        return None
    f = h[0].split()
    return int(f[0]), float(f[1])


def length_of(t):
    """Length record (on the bereq, as in Varnish: the object's body size)."""
    v = recs(t, "Length")
    return int(v[0]) if v else None


def sent_of(t):
    """Body bytes sent to the client: ReqAcct's fifth field."""
    v = recs(t, "ReqAcct")
    return int(v[0].split()[4]) if v and len(v[0].split()) >= 6 else None


def age_of(r):
    try:
        return int(r.h("age"))
    except (TypeError, ValueError):
        return None


def cache_text(name, k):
    return f"cache {name} fetch {k}\n".encode()


# ---- cases ----------------------------------------------------------------------------------

def case_ttl():
    """max-age=1: miss, hit (Hit record naming the fetch, Age), then after expiry a miss
    with HitMiss; TTL from s-maxage / max-age / Expires / the default; TTL and Storage
    records; Length on the fetch, body bytes in ReqAcct; the cache counters."""
    o = Origin()
    p = Proxy([o.backend()], args=["--default-ttl", "77", "--default-grace", "0"])
    # The hit must come within the second the object lives: retried on a fresh URL
    # (bounded) if the machine was too slow for it.
    for attempt in range(3):
        url = f"/cache/t{attempt}/max-age=1"
        t0 = time.time()
        r1 = request(p.port, url)
        r2 = request(p.port, url)
        if time.time() - t0 < 0.8:
            break
        info(f"slow machine: the hit pair on {url} took {time.time() - t0:.2f}s, retrying")
    name = f"t{attempt}"
    check(r1.status == 200 and r1.body == cache_text(name, 1), f"first request fetched: {r1}")
    check(r2.status == 200 and r2.body == cache_text(name, 1), f"second request from the cache: {r2}")
    check(age_of(r2) is not None and age_of(r2) >= 0, f"Age header on the hit: {r2.headers}")
    check(o.count(url) == 1, f"one backend fetch before expiry ({o.count(url)})")
    time.sleep(1.6)  # a test of the TTL itself: only time makes the max-age=1 object expire
    r3 = request(p.port, url)
    check(r3.status == 200 and r3.body == cache_text(name, 2), f"expired (grace 0): fetched again {r3}")
    check(o.count(url) == 2, f"two backend fetches after expiry ({o.count(url)})")

    # TTL sources: s-maxage over max-age, max-age, Expires (relative to Date), default.
    for u in ("/cache/s/max-age=1/s-maxage=60", "/cache/m/max-age=45", "/cache/e/expires=30", "/cache/d",
              "/cache/a/max-age=100/age=40"):
        check(request(p.port, u).status == 200, f"GET {u}")
    ra = request(p.port, "/cache/a/max-age=100/age=40")
    check(age_of(ra) is not None and age_of(ra) >= 40, f"Age counts the origin's Age (>= 40): {ra.headers}")
    txns = p.settle(9)
    reqs = reqs_for(txns, url)
    check(len(reqs) == 3, f"3 requests for {url} logged ({len(reqs)})")
    bes = chrono(bereqs_for(txns, url))
    check(len(bes) == 2, f"2 fetches of {url} logged ({len(bes)})")
    if len(reqs) == 3 and len(bes) == 2:
        reqs = chrono(reqs)
        check(hit_of(reqs[0]) is None and not recs(reqs[0], "HitMiss"), "the first request is a plain miss")
        h = hit_of(reqs[1])
        check(h is not None and h[0] == bes[0]["vxid"], f"Hit record names the fetch {bes[0]['vxid']}: "
                                                        f"{recs(reqs[1], 'Hit')}")
        check(not any(t == "Link" and "bereq" in v for t, v in reqs[1]["records"]), "a hit links no fetch")
        hm = recs(reqs[2], "HitMiss")
        check(hit_of(reqs[2]) is None and len(hm) == 1 and int(hm[0].split()[0]) == bes[0]["vxid"],
              f"HitMiss for the expired object {bes[0]['vxid']}: {hm} / Hit {recs(reqs[2], 'Hit')}")
        for t, r in zip(reqs, (r1, r2, r3)):
            check(sent_of(t) == len(r.body), f"ReqAcct {recs(t, 'ReqAcct')}: {len(r.body)} body bytes sent")
        for b in bes:
            check(length_of(b) == len(r1.body), f"Length {recs(b, 'Length')} on the fetch = {len(r1.body)}")
        ttl = recs(bes[0], "TTL")
        check(len(ttl) == 1 and ttl[0].startswith("RFC 1 0 "), f"TTL record of max-age=1, grace 0: {ttl}")
        check(recs(bes[0], "Storage") == ["malloc s0"], f"Storage record {recs(bes[0], 'Storage')}")

    def ttl_of(u):
        b = bereqs_for(txns, u)
        v = recs(b[0], "TTL") if b else []
        return v[0].split() if v else []
    check(ttl_of("/cache/s/max-age=1/s-maxage=60")[:2] == ["RFC", "60"], "s-maxage wins over max-age")
    check(ttl_of("/cache/m/max-age=45")[:2] == ["RFC", "45"], "max-age")
    e = ttl_of("/cache/e/expires=30")
    check(e[:1] == ["RFC"] and len(e) > 1 and 29 <= float(e[1]) <= 31, f"Expires - Date: {e}")
    check(ttl_of("/cache/d")[:2] == ["RFC", "77"], f"--default-ttl without freshness headers: {ttl_of('/cache/d')}")
    st = p.stats()
    if attempt == 0:  # (a retry adds objects and misses of its own)
        check(st["MAIN.cache_miss"] == 7 and st["MAIN.cache_hit"] == 2,
              f"counters: 7 misses, 2 hits ({st['MAIN.cache_miss']}, {st['MAIN.cache_hit']})")
        check(st["MAIN.n_object"] == 6, f"n_object: 6 objects cached ({st['MAIN.n_object']})")
    p.stop()
    o.stop()


def case_vary():
    """Vary: Accept-Encoding: a variant per (normalised) Accept-Encoding, each fetched
    once, then each a hit; a third client that accepts gzip shares the gzip variant."""
    o = Origin()
    p = Proxy([o.backend()])
    url = "/cache/v/max-age=60/vary=Accept-Encoding"
    gz = [("Accept-Encoding", "gzip")]
    a1 = request(p.port, url, headers=gz)
    b1 = request(p.port, url)
    a2 = request(p.port, url, headers=gz)
    b2 = request(p.port, url)
    a3 = request(p.port, url, headers=[("Accept-Encoding", "deflate, gzip;q=0.8")])
    for r in (a1, b1, a2, b2, a3):
        check(r.status == 200 and "accept-encoding" in r.h("vary", "").lower(), f"200 with Vary: {r}")
    check(a1.body.startswith(cache_text("v", 1)) and b1.body.startswith(cache_text("v", 2)),
          f"the two variants fetched separately: {a1.body!r} {b1.body!r}")
    check(a2.body == a1.body and a3.body == a1.body, f"gzip variant from the cache: {a2.body!r} {a3.body!r}")
    check(b2.body == b1.body, f"identity variant from the cache: {b2.body!r}")
    check(o.count(url) == 2, f"two backend fetches ({o.count(url)})")
    # A response without Vary is one object for every client.
    url2 = "/cache/nv/max-age=60"
    r = [request(p.port, url2, headers=h) for h in (gz, (), [("Accept-Encoding", "br")])]
    check(all(x.status == 200 and x.body == cache_text("nv", 1) for x in r), f"no Vary: one object {r}")
    check(o.count(url2) == 1, f"no Vary: one fetch ({o.count(url2)})")
    txns = p.settle(8)
    hits = [t for t in reqs_for(txns, url) if hit_of(t)]
    check(len(hits) == 3, f"3 Hit records on the Vary URL ({len(hits)})")
    st = p.stats()
    check(st["MAIN.n_object"] == 3, f"n_object: 2 variants + 1 ({st['MAIN.n_object']})")
    p.stop()
    o.stop()


def case_pass():
    """Requests with Cookie or Authorization and POSTs go to the backend every time and
    neither use nor fill the cache; no-store, private and Set-Cookie responses are not
    cached (TTL HFP, Storage malloc Transient)."""
    o = Origin()
    p = Proxy([o.backend()])
    n_req = 0

    def get(url, **kw):
        nonlocal n_req
        n_req += 1
        return request(p.port, url, **kw)

    for name, hdr in (("ck", ("Cookie", "session=1")), ("au", ("Authorization", "Basic dXNlcjpwdw=="))):
        url = f"/cache/{name}/max-age=60"
        r1 = get(url, headers=[hdr])
        r2 = get(url, headers=[hdr])
        check(r1.body == cache_text(name, 1) and r2.body == cache_text(name, 2), f"{hdr[0]}: passed twice {r1} {r2}")
        r3 = get(url)
        r4 = get(url)
        check(r3.body == cache_text(name, 3) and r4.body == cache_text(name, 3),
              f"{hdr[0]}: the passes cached nothing; a plain GET fills and hits {r3} {r4}")
        r5 = get(url, headers=[hdr])
        check(r5.body == cache_text(name, 4), f"{hdr[0]}: passed even with the object cached {r5}")
        check(o.count(url) == 4, f"{hdr[0]}: 4 backend fetches ({o.count(url)})")
    url = "/cache/po/max-age=60"
    r1 = get(url, method="POST", body=b"x=1")
    r2 = get(url, method="POST", body=b"x=2")
    r3 = get(url)
    r4 = get(url)
    check([r.body for r in (r1, r2, r3, r4)] == [cache_text("po", k) for k in (1, 2, 3, 3)],
          f"POST passed, not cached: {[r.body for r in (r1, r2, r3, r4)]}")
    r5 = get(url, method="POST", body=b"x=3")
    check(r5.body == cache_text("po", 4), f"POST passed with the object cached {r5}")
    uncacheable = {"ns": "/cache/ns/max-age=60/no-store", "pv": "/cache/pv/max-age=60/private",
                   "sc": "/cache/sc/max-age=60/cookie"}
    for name, url in uncacheable.items():
        rs = [get(url) for _ in range(3)]
        check([r.body for r in rs] == [cache_text(name, k) for k in (1, 2, 3)],
              f"{url}: fetched every time {[r.body for r in rs]}")
        if name == "sc":
            check(all(r.h("set-cookie") == "origin=1" for r in rs), f"Set-Cookie delivered {[r.headers for r in rs]}")
    txns = p.settle(n_req)
    for name, url in uncacheable.items():
        bes = bereqs_for(txns, url)
        check(len(bes) == 3, f"{url}: 3 fetches logged ({len(bes)})")
        if bes:
            b = chrono(bes)[0]
            ttl = recs(b, "TTL")
            check(len(ttl) == 1 and ttl[0].startswith("HFP"), f"{url}: TTL HFP ({ttl})")
            check(recs(b, "Storage") == ["malloc Transient"], f"{url}: Storage {recs(b, 'Storage')}")
    for url in ("/cache/ck/max-age=60", "/cache/au/max-age=60"):
        passed = [t for t in reqs_for(txns, url)
                  if any(h.lower().startswith(("cookie:", "authorization:")) for h in recs(t, "ReqHeader"))]
        check(len(passed) == 3 and not any(hit_of(t) or recs(t, "HitPass") for t in passed),
              f"{url}: passes have no Hit/HitPass records")
        check(all(link_reasons(t) == ["pass"] for t in passed), f"{url}: passes link a pass, as Varnish "
                                                                  f"{[link_reasons(t) for t in passed]}")
        plain = [t for t in reqs_for(txns, url) if t not in passed]
        check(sorted(link_reasons(t) for t in plain) == [[], ["fetch"]],
              f"{url}: the plain GETs: a miss links a fetch, the hit nothing {[link_reasons(t) for t in plain]}")
    posts = reqs_for(txns, "/cache/po/max-age=60", "POST")
    check(len(posts) == 3 and all(link_reasons(t) == ["pass"] for t in posts),
          f"POSTs link a pass {[link_reasons(t) for t in posts]}")
    post_fetches = [b for b in bereqs_for(txns, "/cache/po/max-age=60") if recs(b, "BereqMethod") == ["POST"]]
    check(len(post_fetches) == 3 and all(recs(b, "Begin")[0].split()[2] == "pass" for b in post_fetches),
          f"the POSTs' fetches begin as passes {[recs(b, 'Begin') for b in post_fetches]}")
    st = p.stats()
    check(st["MAIN.cache_hit"] == 3, f"cache_hit: only the 3 plain repeats ({st['MAIN.cache_hit']})")
    check(st["MAIN.n_object"] == 3, f"n_object: 3 ({st['MAIN.n_object']})")
    p.stop()
    o.stop()


def case_hit_for_pass():
    """An uncacheable response leaves a hit-for-pass marker: the next requests log
    HitPass and go to the backend at once, concurrently, without coalescing."""
    o = Origin()
    p = Proxy([o.backend()])
    url = "/cache/h/max-age=60/no-store"
    rs = [request(p.port, url) for _ in range(3)]
    check([r.body for r in rs] == [cache_text("h", k) for k in (1, 2, 3)], f"no-store fetched each time {rs}")
    st = p.stats()
    check(st["MAIN.cache_hitpass"] == 2 and st["MAIN.cache_miss"] == 1,
          f"one miss then 2 hit-for-pass ({st['MAIN.cache_miss']}, {st['MAIN.cache_hitpass']})")
    # Concurrent requests behind the marker each fetch: 1 (marker) + 10 fetches.
    slow = "/slow/head/400/cache/hc/private"
    first = request(p.port, slow)
    check(first.status == 200, f"marker set by the first private response {first}")
    out = parallel(10, lambda i: request(p.port, slow))
    check(all(isinstance(r, Resp) and r.status == 200 for r in out), f"10 concurrent 200s {out}")
    check(o.count(slow) == 11, f"each concurrent request fetched: 11 backend fetches ({o.count(slow)})")
    txns = p.settle(14)
    reqs = chrono(reqs_for(txns, slow))
    hp = [t for t in reqs if recs(t, "HitPass")]
    check(len(hp) == 10, f"HitPass on the 10 concurrent requests ({len(hp)} of {len(reqs)})")
    check(all(link_reasons(t) == ["pass"] for t in hp),
          f"each hit-for-pass request links its own fetch, a pass {[link_reasons(t) for t in hp]}")
    r0 = chrono(reqs_for(txns, url))
    check(len(r0) == 3 and not recs(r0[0], "HitPass") and all(recs(t, "HitPass") for t in r0[1:]),
          f"HitPass on the requests after the first ({[recs(t, 'HitPass') for t in r0]})")
    p.stop()
    o.stop()


def case_coalescing():
    """100 clients at once on one cold URL whose origin answers after 500 ms: exactly one
    backend fetch, 100 identical byte-exact 200s. One worker thread: a waiter that held
    its thread would hold up everyone."""
    o = Origin()
    p = Proxy([o.backend()], threads=1)
    n, size = 100, 20000
    url = f"/slow/head/500/cache/co/max-age=60/size={size}"

    def one(i):
        s = connect(p.port, timeout=60)
        try:
            s.sendall(request_bytes(p.port, url))
            return read_response(s.makefile("rb"))
        finally:
            s.close()
    out = parallel(n, one)
    bad = [r for r in out if not isinstance(r, Resp) or r.status != 200]
    check(not bad, f"100 responses with status 200 ({len(bad)} not: {bad[:3]})")
    want = content(size)
    exact = sum(1 for r in out if isinstance(r, Resp) and r.body == want)
    check(exact == n, f"100 byte-exact bodies ({exact})")
    check(o.count(url) == 1, f"exactly one backend fetch ({o.count(url)})")
    txns = p.settle(n, timeout=30)
    check(len(bereqs_for(txns, url)) == 1, f"one fetch logged ({len(bereqs_for(txns, url))})")
    st = p.stats()
    check(st["MAIN.cache_miss"] == 1 and st["MAIN.cache_hit"] == n - 1,
          f"1 miss and 99 hits ({st['MAIN.cache_miss']}, {st['MAIN.cache_hit']})")
    p.stop()
    o.stop()


def case_streaming():
    """A cacheable slow body (one byte every 5 ms): the first client gets bytes before the
    fetch ends, clients joining mid-fetch are served as it streams in; all byte-exact,
    the origin fetched once."""
    o = Origin()
    p = Proxy([o.backend()])
    n = 400
    url = f"/slow/body/5/{n}"
    want = content(n)
    s = connect(p.port)
    s.sendall(request_bytes(p.port, url))
    status, head = read_head(s)
    check(status == 200 and head.startswith(b"HTTP/1.1 200"), f"head of the streaming response {head[:200]!r}")
    f = s.makefile("rb")
    first = f.read(1)
    check(first == want[:1], f"first body byte {first!r}")
    txns = p.txns()
    done = [t for t in bereqs_for(txns, url) if t["ended"]]
    check(not done, "the client had body bytes while the fetch was still running (streaming, not store-and-forward)")
    late = parallel(4, lambda i: request(p.port, url))
    rest = first
    while len(rest) < n:
        b = f.read(n - len(rest))
        if not b:
            break
        rest += b
    s.close()
    same_bytes(rest, want, "first client's body")
    for i, r in enumerate(late):
        check(isinstance(r, Resp) and r.status == 200, f"late client {i}: {r}")
        if isinstance(r, Resp):
            same_bytes(r.body, want, f"late client {i}'s body")
    check(o.count(url) == 1, f"origin fetched once ({o.count(url)})")
    txns = p.settle(5)
    reqs = reqs_for(txns, url)
    check(sum(1 for t in reqs if hit_of(t)) == 4, f"the 4 late clients are hits on the streaming object "
                                                  f"({[recs(t, 'Hit') for t in reqs]})")
    check(all(sent_of(t) == n for t in reqs), f"{n} body bytes sent to every client ({[recs(t, 'ReqAcct') for t in reqs]})")
    bes = bereqs_for(txns, url)
    check(len(bes) == 1 and length_of(bes[0]) == n, f"Length {n} on the fetch ({[recs(b, 'Length') for b in bes]})")
    p.stop()
    o.stop()


def case_purge():
    """PURGE from a trusted address removes every variant (200 "Purged N"); from another
    address it is refused (405, Error record) and removes nothing; adm purge and
    adm purge.regex (a bad expression refused)."""
    o = Origin()
    p = Proxy([o.backend()], args=["--trusted", "127.0.0.1/32"])
    url = "/cache/pg/max-age=60/vary=Accept-Encoding"
    gz = [("Accept-Encoding", "gzip")]
    request(p.port, url)
    request(p.port, url, headers=gz)
    check(o.count(url) == 2, f"two variants fetched ({o.count(url)})")
    # Untrusted: connect from 127.0.0.2 (still loopback, not in --trusted).
    r = request(p.port, url, method="PURGE", source="127.0.0.2")
    check(r.status == 405, f"PURGE from an untrusted address refused with 405: {r}")
    request(p.port, url)
    request(p.port, url, headers=gz)
    check(o.count(url) == 2, f"nothing purged by the refused PURGE ({o.count(url)})")
    r = request(p.port, url, method="PURGE")
    m = re.search(rb"Purged (\d+)", r.body)
    check(r.status == 200 and m and int(m.group(1)) == 2, f"PURGE from a trusted address: 200 Purged 2: {r}")
    r2 = request(p.port, url)
    r3 = request(p.port, url, headers=gz)
    check(r2.body.startswith(cache_text("pg", 3)) and r3.body.startswith(cache_text("pg", 4)),
          f"both variants fetched again after the purge {r2.body!r} {r3.body!r}")
    r = request(p.port, "/cache/never-cached", method="PURGE")
    m = re.search(rb"Purged (\d+)", r.body)
    check(r.status == 200 and m and int(m.group(1)) == 0, f"PURGE of an uncached URL: Purged 0: {r}")
    # adm purge HOST URL
    u1 = "/cache/adm1/max-age=60"
    request(p.port, u1)
    rc, out = p.adm("purge", p.host(), u1)
    check(rc == 0 and re.search(r"purged 1\b", out), f"adm purge: purged 1 ({rc} {out.strip()})")
    check(request(p.port, u1).body == cache_text("adm1", 2), "adm purge: fetched again")
    rc, out = p.adm("purge", p.host(), "/cache/not-there")
    check(rc == 0 and re.search(r"purged 0\b", out), f"adm purge of nothing: purged 0 ({rc} {out.strip()})")
    # adm purge.regex over "host" + "url" keys.
    for u in ("/cache/rx-1/max-age=60", "/cache/rx-2/max-age=60", "/cache/keep/max-age=60"):
        request(p.port, u)
    rc, out = p.adm("purge.regex", "^127\\.0\\.0\\.1:%d/cache/rx-" % p.port)
    check(rc == 0 and re.search(r"purged 2\b", out), f"adm purge.regex: purged 2 ({rc} {out.strip()})")
    check(request(p.port, "/cache/rx-1/max-age=60").body == cache_text("rx-1", 2), "regex-purged object fetched again")
    check(request(p.port, "/cache/keep/max-age=60").body == cache_text("keep", 1), "unmatched object still cached")
    rc, out = p.adm("purge.regex", "(")
    check(rc != 0 and out.strip(), f"adm purge.regex with a bad regex: an error ({rc} {out.strip()})")
    check(request(p.port, "/cache/keep/max-age=60").status == 200, "still serving after the bad regex")
    txns = p.settle(16)
    refused = [t for t in reqs_for(txns, url, "PURGE") if recs(t, "RespStatus") == ["405"]]
    check(len(refused) == 1 and recs(refused[0], "Error"), "the refused PURGE is logged with an Error record")
    p.stop()
    o.stop()


def case_conditional():
    """If-None-Match and If-Modified-Since answered 304 from the cache, also on a miss
    (the object is fetched whole and stored as a 200)."""
    o = Origin()
    p = Proxy([o.backend()])
    url = "/cache/c/max-age=60/etag=v1/lm"
    lm = "Tue, 14 Nov 2023 22:13:20 GMT"  # the origin's default Last-Modified (1700000000)
    r = request(p.port, url, headers=[("If-None-Match", '"v1"')])
    check(r.status == 304 and r.body == b"" and r.h("etag") == '"v1"', f"If-None-Match on a miss: 304 {r}")
    r = request(p.port, url)
    check(r.status == 200 and r.body == cache_text("c", 1), f"a plain GET after it: the whole object {r}")
    check(r.h("last-modified") == lm, f"Last-Modified {r.h('last-modified')}")
    cases = [
        ([("If-None-Match", '"v1"')], 304),
        ([("If-None-Match", 'W/"v1"')], 304),
        ([("If-None-Match", '"x", "v1"')], 304),
        ([("If-None-Match", "*")], 304),
        ([("If-None-Match", '"other"')], 200),
        ([("If-Modified-Since", lm)], 304),
        ([("If-Modified-Since", "Wed, 15 Nov 2023 00:00:00 GMT")], 304),
        ([("If-Modified-Since", "Mon, 13 Nov 2023 00:00:00 GMT")], 200),
        ([("If-None-Match", '"other"'), ("If-Modified-Since", lm)], 200),  # If-None-Match decides
    ]
    for hdrs, want in cases:
        r = request(p.port, url, headers=hdrs)
        ok = r.status == want and (r.body == b"" if want == 304 else r.body == cache_text("c", 1))
        check(ok, f"{hdrs}: {want} ({r})")
        if want == 304:
            check("content-length" not in r.headers or r.h("content-length") == str(len(cache_text("c", 1))),
                  f"304 carries no wrong Content-Length {r.headers}")
    check(o.count(url) == 1, f"all from the cache: one backend fetch ({o.count(url)})")
    # Same URL without validators: conditionals never match, always 200.
    u2 = "/cache/c2/max-age=60"
    request(p.port, u2)
    r = request(p.port, u2, headers=[("If-None-Match", '"v1"'), ("If-Modified-Since", lm)])
    check(r.status == 200 and r.body == cache_text("c2", 1), f"no validators: 200 {r}")
    txns = p.settle(len(cases) + 4)
    c304 = [t for t in chrono(reqs_for(txns, url)) if recs(t, "RespStatus") == ["304"]]
    check(len(c304) == 7 and all(hit_of(t) for t in c304[1:]), f"304s logged, hits after the first ({len(c304)})")
    p.stop()
    o.stop()


def case_grace():
    """An object past its TTL but within grace is served stale (Hit record with a
    negative TTL, Age >= TTL) while exactly one background fetch refreshes it; then the
    refreshed object is served."""
    o = Origin()
    p = Proxy([o.backend()], args=["--default-grace", "10"])
    url = "/slow/head/800/cache/g/max-age=1/size=1000"
    want = content(1000)
    r = request(p.port, url)
    check(r.status == 200 and r.body == want, f"first fetch {r}")
    time.sleep(1.3)  # a test of grace itself: only time takes the object past its 1 s TTL
    stale = [request(p.port, url) for _ in range(5)]
    for r in stale:
        check(r.status == 200 and r.body == want, f"stale object served {r}")
    check(age_of(stale[0]) is not None and age_of(stale[0]) >= 1, f"stale Age >= 1: {stale[0].headers}")
    got2 = wait_for(lambda: o.count(url) >= 2, 10)
    check(got2, "a background fetch refreshes the object")

    def refreshed():
        t = p.txns()
        return t if len([b for b in bereqs_for(t, url) if b["ended"]]) >= 2 else None
    txns = wait_for(refreshed, 10) or p.txns()
    check(o.count(url) == 2, f"exactly one background fetch for the 5 stale hits ({o.count(url)})")
    bes = chrono(bereqs_for(txns, url))
    r = request(p.port, url)
    check(r.status == 200 and r.body == want, f"after the refresh {r}")
    txns = p.settle(7)
    reqs = chrono(reqs_for(txns, url))
    if check(len(reqs) == 7 and len(bes) == 2, f"7 requests and 2 fetches logged ({len(reqs)}, {len(bes)})"):
        for t in reqs[1:6]:
            h = hit_of(t)
            check(h is not None and h[0] == bes[0]["vxid"] and h[1] < 0,
                  f"stale hit: Hit names the first fetch {bes[0]['vxid']} with a negative TTL {recs(t, 'Hit')}")
        h = hit_of(reqs[6])
        check(h is not None and h[0] == bes[1]["vxid"], f"after the refresh the new object is served "
                                                        f"(Hit {recs(reqs[6], 'Hit')}, fetch {bes[1]['vxid']})")
        check(bes[1]["parent"] in [t["vxid"] for t in reqs[1:6]] or bes[1]["parent"] == 0,
              f"the background fetch belongs to a stale request ({bes[1]['parent']})")
    p.stop()
    o.stop()


def _check_range(r, lo, hi, total, what):
    ok = check(r.status == 206, f"{what}: 206 ({r})")
    ok &= check(r.h("content-range") == f"bytes {lo}-{hi}/{total}", f"{what}: Content-Range {r.h('content-range')}")
    ok &= check(r.h("content-length") == str(hi - lo + 1), f"{what}: Content-Length {r.h('content-length')}")
    ok &= same_bytes(r.body, content(hi - lo + 1, lo), f"{what}: body")
    return ok


def case_range():
    """Range: first bytes, a middle range, suffix, open-ended, clamped end, 416; on a
    miss, on a hit, and on a miss whose body is still streaming; multiple ranges either
    as multipart/byteranges or the whole object."""
    o = Origin()
    p = Proxy([o.backend()])
    N = 10000
    url = f"/cache/r/max-age=60/size={N}"
    _check_range(request(p.port, url, headers=[("Range", "bytes=0-99")]), 0, 99, N, "miss bytes=0-99")
    check(o.count(url) == 1, "one fetch")
    for spec, lo, hi in (("bytes=100-199", 100, 199), ("bytes=-500", N - 500, N - 1), ("bytes=9000-", 9000, N - 1),
                         ("bytes=0-0", 0, 0), ("bytes=9990-20000", 9990, N - 1), ("bytes=-20000", 0, N - 1),
                         ("bytes=4095-8193", 4095, 8193)):
        _check_range(request(p.port, url, headers=[("Range", spec)]), lo, hi, N, f"hit {spec}")
    for spec in ("bytes=10000-", "bytes=20000-30000"):
        r = request(p.port, url, headers=[("Range", spec)])
        check(r.status == 416 and r.h("content-range") == f"bytes */{N}", f"{spec}: 416 with bytes */{N} ({r})")
    full = request(p.port, url)
    check(full.status == 200 and full.h("accept-ranges") == "bytes", f"full GET: Accept-Ranges ({full.headers})")
    same_bytes(full.body, content(N), "full GET body")
    r = request(p.port, url, headers=[("Range", "bytes=0-9,20-29")])
    if r.status == 200:
        same_bytes(r.body, content(N), "multiple ranges answered with the whole object")
    elif check(r.status == 206 and "multipart/byteranges" in r.h("content-type", ""),
               f"multiple ranges: 200 or 206 multipart ({r})"):
        bnd = r.h("content-type").split("boundary=")[1].strip('"').encode()
        parts = [x for x in r.body.split(b"--" + bnd) if x.strip() not in (b"", b"--")]
        bodies = [x.split(b"\r\n\r\n", 1)[1].rstrip(b"\r\n") if b"\r\n\r\n" in x else b"" for x in parts]
        check(bodies == [content(10, 0), content(10, 20)], f"multipart parts {bodies}")
        check(r.h("content-length") is None or int(r.h("content-length")) == len(r.body), "multipart length")
    check(o.count(url) == 1, f"every range from the one fetch ({o.count(url)})")
    # A cold object with a length the origin sends slowly: the range is cut from the stream.
    slow = "/slow/body/2/300"
    _check_range(request(p.port, slow, headers=[("Range", "bytes=200-249")]), 200, 249, 300, "streaming miss")
    _check_range(request(p.port, slow, headers=[("Range", "bytes=-10")]), 290, 299, 300, "hit on it")
    check(o.count(slow) == 1, f"slow object fetched once ({o.count(slow)})")
    txns = p.settle(14)
    for t in reqs_for(txns, url):
        hr = [h for h in recs(t, "ReqHeader") if h.lower().startswith("range:")]
        st = recs(t, "RespStatus")
        if st == ["206"] and hr:
            spec = hr[0].split(":", 1)[1].strip()
            if "," not in spec:
                # bytes delivered
                m = re.match(r"bytes=(\d*)-(\d*)", spec)
                a, b = m.group(1), m.group(2)
                if a == "":
                    want = min(int(b), N)
                else:
                    want = min(int(b) if b else N - 1, N - 1) - int(a) + 1
                check(sent_of(t) == want, f"{spec}: ReqAcct {recs(t, 'ReqAcct')}: {want} body bytes sent")
    p.stop()
    o.stop()


def case_lru():
    """A 1 MiB store, 60000-byte objects: the least recently used are evicted (counted,
    logged), a recently used one survives, every body stays byte-exact."""
    o = Origin()
    p = Proxy([o.backend()], args=["--storage", "1M"])
    size = 60000
    want = content(size)
    urls = [f"/cache/l{i}/max-age=600/size={size}" for i in range(22)]
    for u in urls[:10]:
        same_bytes(request(p.port, u).body, want, f"{u} (miss)")
    check(p.stats()["MAIN.n_lru_nuked"] == 0, "10 objects (600 KB) fit in 1 MiB: nothing evicted")
    same_bytes(request(p.port, urls[0]).body, want, "object 0 touched (hit)")
    for u in urls[10:]:
        same_bytes(request(p.port, u).body, want, f"{u} (miss)")
    st = p.stats()
    check(st["MAIN.n_lru_nuked"] > 0, f"evictions counted ({st['MAIN.n_lru_nuked']})")
    check(st["MAIN.n_object"] + st["MAIN.n_lru_nuked"] == 22,
          f"every object cached or evicted: n_object {st['MAIN.n_object']} + nuked {st['MAIN.n_lru_nuked']} = 22")
    check(st["MAIN.n_object"] * size <= (1 << 20), f"the store holds at most 1 MiB of bodies ({st['MAIN.n_object']})")
    same_bytes(request(p.port, urls[0]).body, want, "object 0 (recently used)")
    check(o.count(urls[0]) == 1, f"the recently used object survived ({o.count(urls[0])} fetches)")
    same_bytes(request(p.port, urls[21]).body, want, "object 21 (newest)")
    check(o.count(urls[21]) == 1, "the newest object survived")
    same_bytes(request(p.port, urls[1]).body, want, "object 1 (least recently used)")
    check(o.count(urls[1]) == 2, f"the least recently used object was evicted ({o.count(urls[1])} fetches)")
    txns = p.settle(26)
    notes = [n for t in txns for n in recs(t, "Notice") if n.startswith("LRU nuked")]
    check(len(notes) >= 1, "LRU nuked Notice records")
    check(any("/cache/l1/" in n for n in notes), f"the evicted object named in a Notice {notes[:3]}")
    p.stop()
    o.stop()


def case_big_object():
    """Multi-MiB objects (Content-Length and chunked from the origin) byte-exact on the
    miss, on hits, and to several clients at once; HEAD."""
    o = Origin()
    p = Proxy([o.backend()])
    size = 4 * 1024 * 1024 + 13
    url = f"/cache/big/max-age=60/size={size}"
    want = content(size)
    r = request(p.port, url)
    check(r.status == 200 and r.h("content-length") == str(size), f"miss: 200, Content-Length {r.headers}")
    same_bytes(r.body, want, "miss body")
    r = request(p.port, url)
    same_bytes(r.body, want, "hit body")
    out = parallel(3, lambda i: request(p.port, url))
    for i, r in enumerate(out):
        if check(isinstance(r, Resp) and r.status == 200, f"concurrent hit {i}: {r}"):
            same_bytes(r.body, want, f"concurrent hit {i} body")
    check(o.count(url) == 1, f"one fetch ({o.count(url)})")
    csize = 3 * 1000 * 1000 + 7
    curl = f"/cache/bigc/max-age=60/size={csize}/chunked"
    cwant = content(csize)
    for what in ("chunked miss", "hit of a chunked object"):
        r = request(p.port, curl)
        check(r.status == 200, f"{what}: 200 {r.headers}")
        same_bytes(r.body, cwant, what)
    check(o.count(curl) == 1, f"chunked object fetched once ({o.count(curl)})")
    hurl = "/cache/hd/max-age=60/size=70000"
    r = request(p.port, hurl, method="HEAD")
    check(r.status == 200 and r.h("content-length") == "70000", f"HEAD on a miss: the object's length {r.headers}")
    r = request(p.port, hurl)
    check(r.status == 200, f"GET after HEAD {r}")
    same_bytes(r.body, content(70000), "GET after a HEAD miss: the whole body (a HEAD never stores an empty object)")
    r = request(p.port, hurl, method="HEAD")
    check(r.status == 200 and r.h("content-length") == "70000", f"HEAD on a hit {r.headers}")
    info(f"origin fetches of the HEAD/GET object: {o.count(hurl)}")
    txns = p.settle(10, timeout=30)
    reqs = [t for t in reqs_for(txns, url)]
    check(len(reqs) == 5 and all(sent_of(t) == size for t in reqs),
          f"{size} body bytes sent on the 5 big requests ({[recs(t, 'ReqAcct') for t in reqs]})")
    bes = bereqs_for(txns, url) + bereqs_for(txns, curl)
    check(sorted(length_of(b) for b in bes) == [csize, size], f"Length on the fetches {[recs(b, 'Length') for b in bes]}")
    p.stop()
    o.stop()


class _GzipOrigin:
    """A tiny origin that always answers gzip (Content-Encoding: gzip, max-age=60,
    no Vary): ringlog_test_origin has no compression. 127.0.0.1 only; counts GETs."""
    def __init__(self, plain):
        self.plain = plain
        self.gz = gzip.compress(plain, 6, mtime=0)
        self.count = 0
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _answer(self, body):
                if self.path.startswith("/status/"):
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Type", "text/plain")
                self.send_header("Cache-Control", "max-age=60")
                self.send_header("Content-Length", str(len(outer.gz)))
                self.end_headers()
                if body:
                    self.wfile.write(outer.gz)

            def do_GET(self):
                if not self.path.startswith("/status/"):
                    outer.count += 1
                self._answer(True)

            def do_HEAD(self):
                self._answer(False)
        self.srv = LocalHTTPServer(H)
        self.port = self.srv.port

    def stop(self):
        self.srv.stop()


def case_gunzip():
    """A gzip object: a client that accepts gzip gets the stored bytes; one that does not
    gets them gunzipped on delivery (no Content-Encoding), from the same cached object."""
    plain = content(50000)
    g = _GzipOrigin(plain)
    p = Proxy([f"gz=127.0.0.1:{g.port}"])
    r1 = request(p.port, "/z", headers=[("Accept-Encoding", "gzip")])
    check(r1.status == 200 and r1.h("content-encoding") == "gzip", f"gzip client: gzip response {r1.headers}")
    same_bytes(r1.body, g.gz, "gzip client: the stored gzip bytes")
    r2 = request(p.port, "/z")
    check(r2.status == 200 and r2.h("content-encoding") is None, f"identity client: no Content-Encoding {r2.headers}")
    same_bytes(r2.body, plain, "identity client: gunzipped body")
    r3 = request(p.port, "/z", headers=[("Accept-Encoding", "br")])
    same_bytes(r3.body, plain, "a client accepting only br: gunzipped body")
    check(g.count == 1, f"one cached object serves both ({g.count} fetches)")
    txns = p.settle(3)
    reqs = chrono(reqs_for(txns, "/z"))
    check(len(reqs) == 3 and sent_of(reqs[0]) == len(g.gz),
          f"body bytes sent: {len(g.gz)} gzip ({[recs(t, 'ReqAcct') for t in reqs]})")
    bes = bereqs_for(txns, "/z")
    check(len(bes) == 1 and length_of(bes[0]) == len(g.gz), f"Length of the stored gzip object {[recs(b, 'Length') for b in bes]}")
    p.stop()
    g.stop()


def case_chunked_acct():
    """Body bytes are counted without the chunked framing (as Varnish and ringproxy's
    pass path count them): ReqAcct and MAIN.s_resp_bodybytes for a chunked miss of a
    cached object (length unknown while it streams) and for a gunzipped delivery."""
    o = Origin()
    plain = content(50000)
    g = _GzipOrigin(plain)
    p = Proxy([o.backend()])
    q = Proxy([f"gz=127.0.0.1:{g.port}"])
    n = 3000
    url = f"/cache/ca/max-age=60/size={n}/chunked"
    r1 = request(p.port, url)
    r2 = request(p.port, url)
    check(r1.status == 200 and r1.body == content(n) and r2.body == content(n), f"chunked object {r1} {r2}")
    info(f"framing: miss {'chunked' if r1.h('transfer-encoding') else 'length'}, "
         f"hit {'chunked' if r2.h('transfer-encoding') else 'length'}")
    txns = p.settle(2)
    sent = [sent_of(t) for t in chrono(reqs_for(txns, url))]
    check(sent == [n, n], f"ReqAcct body bytes of the chunked miss and the hit: {sent}, want [{n}, {n}]")
    st = p.stats()
    check(st["MAIN.s_resp_bodybytes"] == 2 * n, f"MAIN.s_resp_bodybytes {st['MAIN.s_resp_bodybytes']}, want {2 * n}")
    r = request(q.port, "/z")
    check(r.status == 200 and r.body == plain, f"gunzipped delivery {r.headers}")
    txns = q.settle(1)
    sent = [sent_of(t) for t in reqs_for(txns, "/z")]
    check(sent == [len(plain)], f"ReqAcct body bytes of the gunzipped delivery: {sent}, want [{len(plain)}]")
    p.stop()
    q.stop()
    g.stop()
    o.stop()


def _background(fn):
    """Runs fn() in a thread; returns a function that joins it and gives its result."""
    box = {}

    def run():
        try:
            box["r"] = fn()
        except Exception as e:  # noqa: BLE001 - reported by the caller's checks
            box["r"] = e
    th = threading.Thread(target=run)
    th.start()

    def result(timeout=120):
        th.join(timeout)
        return box.get("r")
    return result


def case_abandon():
    """A client that goes away during its own miss does not spoil the fetch: a client
    streaming the same object and one waiting for its head still get every byte, the
    object is cached whole, the origin is fetched once."""
    o = Origin()
    p = Proxy([o.backend()])
    n = 400
    url = f"/slow/body/5/{n}"  # streams for 2 s
    a = connect(p.port)
    a.sendall(request_bytes(p.port, url))
    got = a.recv(100)
    check(got.startswith(b"HTTP/1.1 200"), f"first client's response started {got[:60]!r}")
    b = _background(lambda: request(p.port, url))  # joins the stream
    wait_for(lambda: p.stats()["MAIN.cache_hit"] >= 1, 10)
    rst_close(a)
    rb = b()
    check(isinstance(rb, Resp) and rb.status == 200, f"the client streaming the same object: {rb}")
    if isinstance(rb, Resp):
        same_bytes(rb.body, content(n), "its body")
    same_bytes(request(p.port, url).body, content(n), "a later hit")
    check(o.count(url) == 1, f"one fetch of the streamed object ({o.count(url)})")
    # The first client goes before the head arrives; a coalesced waiter gets it all.
    url2 = "/slow/head/600/cache/ab/max-age=60/size=5000"
    a = connect(p.port)
    a.sendall(request_bytes(p.port, url2))
    wait_for(lambda: o.stats()["urls"].get(url2, 0) >= 1, 10)
    b = _background(lambda: request(p.port, url2))
    wait_for(lambda: p.stats()["MAIN.client_req"] >= 5, 10)  # the waiter is in
    rst_close(a)
    rb = b()
    check(isinstance(rb, Resp) and rb.status == 200, f"the waiting client: {rb}")
    if isinstance(rb, Resp):
        same_bytes(rb.body, content(5000), "its body")
    same_bytes(request(p.port, url2).body, content(5000), "a later hit")
    check(o.count(url2) == 1, f"one fetch of the waited-for object ({o.count(url2)})")
    p.stop()
    o.stop()


def case_pipeline():
    """Hits, misses (Content-Length and chunked), HEAD and a pass pipelined on one
    connection: answered in order, byte-exact; an HTTP/1.0 client gets a chunked miss
    close-delimited."""
    o = Origin()
    p = Proxy([o.backend()])
    u1 = "/cache/p1/max-age=60/size=100"
    u2 = "/cache/p2/max-age=60/size=70000/chunked"
    reqs = [("GET", u1, ()), ("GET", u1, ()), ("GET", u2, ()), ("HEAD", u1, ()), ("GET", u2, ()),
            ("GET", u1, (("Cookie", "a=1"),)), ("GET", "/cache/p3/max-age=60", ()), ("GET", u1, ())]
    data = b""
    for m, u, h in reqs:
        head = [f"{m} {u} HTTP/1.1", f"Host: 127.0.0.1:{p.port}"] + [f"{k}: {v}" for k, v in h]
        data += ("\r\n".join(head) + "\r\n\r\n").encode()
    s = connect(p.port)
    s.sendall(data)
    f = s.makefile("rb")
    out = []
    for m, u, h in reqs:
        out.append(read_response(f, m))
    s.close()
    want = [content(100), content(100), content(70000), b"", content(70000), content(100), cache_text("p3", 1),
            content(100)]
    for i, (r, w) in enumerate(zip(out, want)):
        if check(r is not None and r.status == 200, f"pipelined response {i}: {r}"):
            same_bytes(r.body, w, f"pipelined response {i} ({reqs[i][0]} {reqs[i][1]})")
    check(out[3] is not None and out[3].h("content-length") == "100", "HEAD keeps the length")
    check(o.count(u1) == 2 and o.count(u2) == 1, f"fetches: {o.count(u1)} (1 + the pass) and {o.count(u2)}")
    s = connect(p.port)
    s.sendall(f"GET /cache/p4/max-age=60/size=3000/chunked HTTP/1.0\r\nHost: 127.0.0.1:{p.port}\r\n\r\n".encode())
    raw = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        raw += c
    s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    check(head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")) and b"chunked" not in head.lower(),
          f"HTTP/1.0: no chunked framing {head!r}")
    same_bytes(body, content(3000), "HTTP/1.0 body (close-delimited or with Content-Length)")
    p.stop()
    o.stop()


def _cache_info(p):
    rc, out = p.adm("cache.info")
    d = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[1].isdigit():
            d[f[0]] = int(f[1])
    return d


def case_pass_memory():
    """A 64 MiB pass response to a client that stalls, then reads: the proxy never holds
    more than a bounded window of it (adm cache.info transient_used, sampled throughout),
    frees it all at the end, caches nothing; the body is byte-exact."""
    o = Origin()
    p = Proxy([o.backend()])
    n = 64 << 20
    bound = 4 << 20
    url = f"/size/{n}"
    s = connect(p.port, timeout=60)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(request_bytes(p.port, url, headers=[("Cookie", "a=1")]))
    samples = []

    # The client stalls: the proxy must stop pulling from the origin. Stalled when both
    # hops hold bytes they cannot hand on: the origin's connection to the proxy and the
    # proxy's to the client each have unacknowledged bytes queued. Sampled throughout.
    def stalled():
        samples.append(_cache_info(p).get("transient_used", -1))
        socks = procs.tcp_sockets()
        held = lambda lport, rport=None: any(  # noqa: E731
            x["lport"] == lport and (rport is None or x["rport"] == rport) and
            x["state"] == procs.TCP_ESTABLISHED and x["tx_queue"] > 0 for x in socks)
        return held(o.port) and held(p.port, s.getsockname()[1])
    check(wait_for(stalled, 20), "the stalled client holds the proxy and the origin back")
    for _ in range(5):
        samples.append(_cache_info(p).get("transient_used", -1))
    status, head = read_head(s)
    check(status == 200 and head.startswith(b"HTTP/1.1 200") and b"content-length: %d" % n in head.lower(),
          f"pass head {head!r}")
    f = s.makefile("rb")
    got, bad, next_sample = 0, -1, 8 << 20
    while got < n:
        b = f.read(min(1 << 20, n - got))
        if not b:
            break
        if bad < 0 and b != content(len(b), got):
            bad = got + first_diff(b, content(len(b), got))
        got += len(b)
        if got >= next_sample:
            samples.append(_cache_info(p).get("transient_used", -1))
            next_sample += 8 << 20
    s.close()
    check(got == n and bad < 0, f"64 MiB pass body: {got} bytes, first wrong byte at {bad}")
    info(f"transient_used samples (bytes): {samples}")
    check(min(samples) >= 0, f"adm cache.info reports transient_used ({samples})")
    check(max(samples) > 0, f"the pass goes through transient storage ({samples})")
    check(max(samples) <= bound, f"pass window bounded: at most {bound} bytes held, saw {max(samples)}")
    freed = wait_for(lambda: _cache_info(p).get("transient_used") == 0, 10)
    check(freed, f"transient storage freed after the response ({_cache_info(p)})")
    st = p.stats()
    check(st["MAIN.n_object"] == 0 and _cache_info(p).get("storage_used") == 0, "a pass caches nothing")
    check(o.count(url) == 1, "one backend fetch")
    p.stop()
    o.stop()


def main():
    global PROXY, ORIGIN, READER, WORKDIR, CASE, TRANSPORT
    PROXY, ORIGIN, READER, WORKDIR, CASE = sys.argv[1:6]
    CASE, TRANSPORT = CASE.split("/")  # "<case>/<transport>", as the test's name
    if TRANSPORT not in ("writev", "io_uring"):
        print(f"unknown transport {TRANSPORT}")
        return 2
    if TRANSPORT == "io_uring" and not procs.io_uring_available():
        skip("io_uring is refused here (the proxy would run writev)")
    e2e.configure(WORKDIR, PROXY, READER, origin=ORIGIN, label=f"cache-{CASE}-{TRANSPORT}")
    return e2e.run_cases(e2e.cases_of(globals()), CASE, f" ({TRANSPORT})")


if __name__ == "__main__":
    sys.exit(main())
