#!/usr/bin/env python3
"""The same requests through ringproxy and through Debian's varnishd (default VCL, the
same ringlog_test_origin behind both), and what each one's log tools say of them:
ringproxy's records (support's proxy_log_reader) against `varnishlog -d -g raw`, and
ringlog -g request against varnishlog -g request, and ringlog-ncsa against varnishncsa
on one format. Skipped where varnishd is not installed.

usage: varnish_side_by_side_test.py RINGPROXY ORIGIN LOG_READER RINGLOG RINGLOG_NCSA WORKDIR CASE
CASE: one of the functions named case_* below (without the prefix), or "all".
Every server listens on 127.0.0.1 only and is stopped by pid; every wait is bounded
and waits on the logs themselves (a transaction is logged a moment after its client
has the response).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import e2e  # noqa: E402
from checks import need  # noqa: E402
from e2e import CHILDREN, Origin, Proxy, check, free_port, recs, request, wait_for  # noqa: E402
from procs import pdeathsig, port_open, stop, wait_started  # noqa: E402

# Set by main() from argv.
PROXY = ORIGIN = READER = TAIL = NCSA = WORKDIR = CASE = None

# (method, url, body): a pass (POST), a HEAD miss then hit, a GET miss then hit, a 204
# and an empty 200: every one is logged by both proxies.
TRAFFIC = [("POST", "/size/12", b"x=1"), ("HEAD", "/size/7", b""), ("HEAD", "/size/7", b""),
           ("GET", "/size/5", b""), ("GET", "/size/5", b""), ("GET", "/status/204", b""), ("GET", "/size/0", b"")]
NCSA_FORMAT = "%m %U %s %b %{Varnish:handling}x %{Varnish:hitmiss}x"


class Varnish:
    """varnishd -F with a VCL naming the origin as its only backend, its own -n dir, and
    its CLI on a loopback port of its choosing (varnishadm -n finds it and the secret)."""

    def __init__(self, origin_port):
        self.varnishd, self.varnishlog, self.varnishncsa = need("varnishd"), need("varnishlog"), need("varnishncsa")
        self.varnishadm = need("varnishadm")
        self.dir = os.path.join(WORKDIR, f"varnish-{os.getpid()}")
        os.makedirs(self.dir, exist_ok=True)
        vcl = os.path.join(WORKDIR, "side_by_side.vcl")
        with open(vcl, "w") as f:
            f.write(f'vcl 4.1;\nbackend default {{ .host = "127.0.0.1"; .port = "{origin_port}"; }}\n')
        self.port = free_port()
        self.out = open(os.path.join(WORKDIR, "varnishd.out"), "w+")
        self.proc = subprocess.Popen([self.varnishd, "-F", "-n", self.dir, "-j", "none", "-T", "127.0.0.1:0",
                                      "-a", f"127.0.0.1:{self.port}", "-f", vcl, "-s", "malloc,16m",
                                      "-p", "thread_pools=1", "-p", "thread_pool_min=5"],
                                     stdout=self.out, stderr=subprocess.STDOUT, preexec_fn=pdeathsig)
        CHILDREN.append(self.proc)
        # The manager listens before its child runs (it compiles the VCL first, which at
        # load 11-15 took more than 33 s): started once the CLI says the child runs and
        # the port accepts.
        why = wait_started(f"varnishd (-n {self.dir}, 127.0.0.1:{self.port})", self.proc,
                           lambda: self.child_running() and port_open(self.port), self.output)
        if why:
            stop(self.proc)
            raise RuntimeError(why)

    def child_running(self):
        try:
            r = subprocess.run([self.varnishadm, "-n", self.dir, "-t", "10", "status"], capture_output=True,
                               text=True, timeout=30)
        except subprocess.TimeoutExpired:
            return False
        return r.returncode == 0 and "Child in state running" in r.stdout

    def output(self):
        """What varnishd -F wrote so far (its stdout and stderr, one file)."""
        self.out.seek(0)
        return self.out.read()

    def raw(self):
        """{vxid: {"side": "c"|"b"|"-", "records": [(tag, payload)]}} of the finished
        transactions (varnishlog -d -g raw; the shared memory holds what has ended)."""
        out = subprocess.run([self.varnishlog, "-d", "-n", self.dir, "-g", "raw"], capture_output=True, text=True,
                             timeout=30).stdout
        txns = {}
        for line in out.splitlines():
            f = line.split(None, 3)
            if len(f) < 3 or not f[0].isdigit():
                continue
            t = txns.setdefault(int(f[0]), {"side": f[2], "records": []})
            t["records"].append((f[1], f[3].rstrip() if len(f) > 3 else ""))
        return {v: t for v, t in txns.items() if v != 0}

    def groups(self):
        return subprocess.run([self.varnishlog, "-d", "-n", self.dir, "-g", "request"], capture_output=True,
                              text=True, timeout=30).stdout

    def ncsa(self):
        return subprocess.run([self.varnishncsa, "-d", "-n", self.dir, "-F", NCSA_FORMAT], capture_output=True,
                              text=True, timeout=30).stdout.splitlines()

    def stop(self):
        check(stop(self.proc) == 0, "varnishd exits 0")


def send_traffic(port):
    for method, url, body in TRAFFIC:
        r = request(port, url, method=method, body=body)
        check(r.status in (200, 204), f"{method} {url} through 127.0.0.1:{port}: {r.status} {r.reason}")


def both():
    """An origin, a ringproxy and a varnishd in front of it, TRAFFIC through each (in
    that order, so that each cache sees the same misses and hits). Returns
    (origin, proxy, varnish) after both logs hold every request and every fetch."""
    o = Origin()
    v = Varnish(o.port)
    p = Proxy([o.backend()])
    send_traffic(p.port)
    send_traffic(v.port)
    p.settle(len(TRAFFIC))

    def varnish_done():
        t = v.raw()
        reqs = [x for x in t.values() if x["side"] == "c" and any(r[0] == "ReqAcct" for r in x["records"])]
        busy = [x for x in t.values() if x["side"] == "b" and not any(r[0] == "End" for r in x["records"])]
        return len(reqs) >= len(TRAFFIC) and not busy and len(v.ncsa()) >= len(TRAFFIC)
    check(wait_for(varnish_done, 20, 0.2), "varnishd logged every request and fetch")
    return o, p, v


def vrecs(t, tag):
    return [r[1] for r in t["records"] if r[0] == tag]


def started(t):
    """A transaction's start (its first Timestamp's absolute time): the order requests
    were sent in, which vxids do not keep (both hand them to threads in chunks)."""
    for tag, v in t["records"]:
        if tag == "Timestamp":
            return float(v.split()[1])
    return 0.0


def by_request(reqs, key):
    """The requests' key(t) in the order they were sent (a miss, then its hit)."""
    return [key(t) for t in sorted(reqs, key=started)]


def ringproxy_reqs(p):
    return [t for t in p.txns() if t["type"] == "req"]


def varnish_reqs(v):
    return [t for t in v.raw().values()
            if t["side"] == "c" and any(r[1].startswith("req ") for r in t["records"] if r[0] == "Begin")]


def group_shapes(text):
    """The request groups of `-g request` output, each as its transactions' (level,
    kind, Begin without the vxid) and its ReqURL, sorted: the nesting, whatever the
    vxids and the order groups ended in."""
    shapes = []
    for block in text.strip().split("\n\n"):
        shape, head = [], None
        for line in block.splitlines():
            f = line.split()
            if len(f) >= 3 and f[1] == "<<":
                head = (f[0], f[2])
            elif len(f) >= 4 and f[1] == "Begin" and head:
                shape.append(head + (f"{f[2]} {f[4] if len(f) > 4 else ''}",))
                head = None
            elif len(f) >= 3 and f[1] == "ReqURL":
                shape.append(("url", f[2]))
        if shape:
            shapes.append(shape)
    return sorted(shapes)


def links(records_of, t):
    """The reasons of a request's links to backend fetches ("fetch", "pass")."""
    return [l.split()[2] for l in records_of(t, "Link") if l.startswith("bereq ")]


# ---- cases --------------------------------------------------------------------------

def case_pass_handling():
    """A POST is a pass: Link bereq N pass on the request and Begin bereq N pass on the
    fetch, as varnishd logs it; a miss links a fetch, a hit none: the request-by-request
    link reasons are varnishd's."""
    o, p, v = both()
    mine = by_request(ringproxy_reqs(p), lambda t: (recs(t, "ReqMethod"), recs(t, "ReqURL"), links(recs, t)))
    theirs = by_request(varnish_reqs(v), lambda t: (vrecs(t, "ReqMethod"), vrecs(t, "ReqURL"), links(vrecs, t)))
    check(mine == theirs, f"link reasons per request: ringproxy {mine}, varnishd {theirs}")
    check(mine and mine[0] == (["POST"], ["/size/12"], ["pass"]), f"the POST links a pass: {mine[:1]}")
    posts = [t for t in p.txns() if t["type"] == "bereq" and recs(t, "BereqMethod") == ["POST"]]
    vposts = [t for t in v.raw().values() if t["side"] == "b" and vrecs(t, "BereqMethod") == ["POST"]]
    mine_begin = [recs(t, "Begin")[0].split()[2] for t in posts]
    theirs_begin = [vrecs(t, "Begin")[0].split()[2] for t in vposts]
    check(mine_begin == theirs_begin == ["pass"], f"the POST's fetch begins as a pass: ringproxy {mine_begin}, "
                                                   f"varnishd {theirs_begin}")
    p.stop()
    v.stop()
    o.stop()


def case_request_grouping():
    """ringlog -g request nests each fetch under its request as varnishlog -g request
    does, a pass's included (Begin bereq N pass), a hit alone."""
    o, p, v = both()
    r = subprocess.run([TAIL, "-d", "-n", p.instance, "-g", "request"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, f"ringlog -d -g request exits 0 ({r.returncode}): {r.stderr}")
    mine, theirs = group_shapes(r.stdout), group_shapes(v.groups())
    check(mine == theirs, f"request groups: ringproxy {mine}\n  varnishd {theirs}")
    post = [g for g in mine if ("url", "/size/12") in g]
    check(post == [[("*", "Request", "req rxreq"), ("url", "/size/12"), ("**", "BeReq", "bereq pass")]],
          f"the POST's group nests its pass: {post}")
    p.stop()
    v.stop()
    o.stop()


def case_ncsa_lines():
    """ringlog-ncsa prints varnishncsa's line for every request: %b is 0 for a HEAD, a
    204 and an empty body, %{Varnish:handling}x is pass for the POST, miss then hit."""
    o, p, v = both()
    r = subprocess.run([NCSA, "-d", "-n", p.instance, "-F", NCSA_FORMAT], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, f"ringlog-ncsa -d exits 0 ({r.returncode}): {r.stderr}")
    # Lines come in the order transactions ended, which need not be the order sent.
    mine, theirs = sorted(r.stdout.splitlines()), sorted(v.ncsa())
    check(mine == theirs, "ringlog-ncsa and varnishncsa print the same lines:\n  ringproxy: " + "\n    ".join(mine)
          + "\n  varnishd:  " + "\n    ".join(theirs))
    want = ["POST /size/12 200 12 pass miss", "HEAD /size/7 200 0 miss miss", "HEAD /size/7 200 0 hit hit",
            "GET /status/204 204 0 miss miss", "GET /size/0 200 0 miss miss"]
    check(all(w in mine for w in want), f"among them, as varnishncsa 7.1 prints them: {want}")
    p.stop()
    v.stop()
    o.stop()


def case_connected_timestamp():
    """Every fetch over a backend connection (new or reused) logs Timestamp Connected
    before BackendOpen, as varnishd does; the fetch's timestamp labels are varnishd's in
    its order, less those ringproxy has no step for (Fetch and Process: VCL)."""
    o, p, v = both()
    urls = {u for _, u, _ in TRAFFIC}
    fetches = sorted((t for t in p.txns() if t["type"] == "bereq" and set(recs(t, "BereqURL")) & urls), key=started)
    vfetches = sorted((t for t in v.raw().values() if t["side"] == "b"), key=started)
    check(len(fetches) == len(vfetches) == 5, f"5 fetches each (pass, 2 misses, 204, empty): ringproxy "
                                              f"{len(fetches)}, varnishd {len(vfetches)}")
    for mine, theirs in zip(fetches, vfetches):
        url = recs(mine, "BereqURL")
        labels = [x.split(":")[0] for x in recs(mine, "Timestamp")]
        vlabels = [x.split(":")[0] for x in vrecs(theirs, "Timestamp")]
        check(labels == [x for x in vlabels if x not in ("Fetch", "Process")],
              f"{url}: fetch timestamps ringproxy {labels}, varnishd {vlabels}")
        order = [r[0] for r in mine["records"] if r[0] == "BackendOpen"
                 or (r[0] == "Timestamp" and r[1].startswith("Connected:"))]
        vorder = [r[0] for r in theirs["records"] if r[0] == "BackendOpen"
                  or (r[0] == "Timestamp" and r[1].startswith("Connected:"))]
        check(order == vorder == ["Timestamp", "BackendOpen"], f"{url}: Connected, then BackendOpen: ringproxy "
                                                                f"{order}, varnishd {vorder}")
        c = [x for x in recs(mine, "Timestamp") if x.startswith("Connected:")]
        f = c[0].split() if c else []
        check(len(f) == 4 and all(x.replace(".", "", 1).isdigit() for x in f[1:]),
              f"{url}: Connected: <absolute> <since start> <since previous> ({c})")
    st = p.stats()
    check(st.get("MAIN.backend_reuse", 0) >= 1, "a reused connection was among them (its Connected is checked too)")
    p.stop()
    v.stop()
    o.stop()


def main():
    global PROXY, ORIGIN, READER, TAIL, NCSA, WORKDIR, CASE
    PROXY, ORIGIN, READER, TAIL, NCSA, WORKDIR, CASE = sys.argv[1:8]
    e2e.configure(WORKDIR, PROXY, READER, origin=ORIGIN, label=f"vside-{CASE}")
    need("varnishd")
    return e2e.run_cases(e2e.cases_of(globals()), CASE)


if __name__ == "__main__":
    sys.exit(main())
