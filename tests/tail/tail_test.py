#!/usr/bin/env python3
"""Scripted tests of `ringlog` (the live tail).

Usage: tail_test.py CASE RINGLOG TAIL_WRITER WORKDIR
  layouts  golden files for -g raw/vxid/request/session, -v, -j
  generated  checksums of every grouping's output on generated full rings (escapes,
           binary, cut records, nesting, interleaved batches, a wrapped ring)
  options  -i/-x/-I/-X, -c/-b, -q/-Q, -k, -R, -T, -L, -t, --pinned, bad flags, exit codes
  files    -w/-r round trips, -a, -A, stdin, damaged files, SIGHUP reopen
  live     tail from now, reattach after the ring is recreated, overruns
Golden files live in tests/tail/golden/; UPDATE_GOLDEN=1 rewrites them.
Every process started here is bounded by a timeout and stopped by pid.
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import checks  # noqa: E402
import procs  # noqa: E402
import ringfile  # noqa: E402
from checks import check  # noqa: E402
from procs import wait_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")
CASE, RINGLOG, WRITER, WORK = sys.argv[1:5]
ENV = dict(os.environ, RINGLOG_DIR=os.path.join(WORK, "instances"))


def run(args, stdin=None, timeout=30, cwd=None):
    p = subprocess.run([RINGLOG] + args, input=stdin, capture_output=True, timeout=timeout, env=ENV, cwd=cwd)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def writer(*args, timeout=60):
    subprocess.run([WRITER] + [str(a) for a in args], check=True, timeout=timeout, env=ENV)


def ring_path(name):
    return procs.ring_path(ENV["RINGLOG_DIR"], name)


def golden(name, text):
    checks.golden(os.path.join(GOLDEN, name), text.encode())


def start(args):
    return subprocess.Popen([RINGLOG] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)


class Tail:
    """A running `ringlog` whose stdout and stderr go to files, so that a case can wait
    on what it has printed so far (the tool flushes whenever it runs out of input)."""
    count = 0

    def __init__(self, args):
        Tail.count += 1
        self.out_path = os.path.join(WORK, f"tail{Tail.count}.out")
        self.err_path = os.path.join(WORK, f"tail{Tail.count}.err")
        with open(self.out_path, "wb") as fo, open(self.err_path, "wb") as fe:
            self.p = subprocess.Popen([RINGLOG] + args, stdout=fo, stderr=fe, env=ENV)

    def out(self):
        with open(self.out_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def err(self):
        with open(self.err_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def lives(self):
        return self.out().count("/live/")

    def stop(self):
        rc = procs.stop(self.p, timeout=10)
        return rc, self.out(), self.err()


def wait_attached(p, path, what):
    """Until the tool p has mapped the ring at path and sleeps waiting for data (its
    start position is taken: what is written next is new to it)."""
    return check(wait_for(lambda: procs.attached(p, path), 20), f"{what}: the tool attached to {path}")


def suspend(p):
    """SIGSTOP, and wait until the kernel has stopped it."""
    p.send_signal(signal.SIGSTOP)
    check(wait_for(lambda: procs.stopped(p.pid), 20), "SIGSTOP stopped the tool")


def stop(p, sig=signal.SIGTERM, timeout=10):
    if p.poll() is None:
        p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def known_instance(name="known"):
    path = ring_path(name)
    if os.path.exists(path):
        os.unlink(path)
    writer("create", path, 1 << 20)
    writer("known", path)
    return name


# ---------------------------------------------------------------- layouts

def case_layouts():
    n = known_instance()
    for g in ("raw", "vxid", "request", "session"):
        rc, out, err = run(["-n", n, "-d", "-g", g])
        check(rc == 0 and err == "", f"-g {g}: rc {rc} err {err!r}")
        golden(f"known.{g}.txt", out)
    rc, out, _ = run(["-n", n, "-d", "-g", "request", "-v"])
    golden("known.request.v.txt", out)
    for g in ("vxid", "request", "session", "raw"):
        rc, out, _ = run(["-n", n, "-d", "-g", g, "-j"])
        check(rc == 0, f"-j -g {g} rc {rc}")
        lines = out.splitlines()
        for line in lines:
            obj = json.loads(line)  # every line is one valid JSON object
            check(obj["group"] == g, f"-j group {obj['group']} != {g}")
        golden(f"known.{g}.json", out)
    # The default grouping is vxid; the default instance is "default".
    rc, out, _ = run(["-n", n, "-d"])
    golden("known.vxid.txt", out)
    known_instance("default")
    rc, out2, _ = run(["-d"])
    check(rc == 0 and out2 == out, "default instance without -n")
    # A ring path and an instance directory name the same ring.
    rc, out3, _ = run(["-n", ring_path(n), "-d"])
    rc, out4, _ = run(["-n", os.path.dirname(ring_path(n)), "-d"])
    check(out3 == out and out4 == out, "-n PATH and -n DIR")


# ---------------------------------------------------------------- generated

def case_generated():
    """The output of each grouping (and -v, -j, -i) over two full rings, pinned by checksum:
    the varied ring reaches every printing path, the fill ring is the benchmark's."""
    lines = []
    for kind, size in (("varied", 256 << 10), ("fill", 256 << 10)):
        path = os.path.join(WORK, f"{kind}.ring")
        subprocess.run([WRITER, kind, path, str(size)], check=True, timeout=60, env=ENV,
                       stdout=subprocess.DEVNULL)
        for args in (["-g", "raw"], ["-g", "vxid"], ["-g", "request"], ["-g", "session"],
                     ["-g", "request", "-v"], ["-g", "request", "-j"],
                     ["-g", "vxid", "-i", "ReqHeader,Hash,VSL"]):
            p = subprocess.run([RINGLOG, "-n", path, "-d"] + args, capture_output=True, timeout=60, env=ENV)
            check(p.returncode == 0 and p.stderr == b"", f"{kind} {args}: rc {p.returncode} {p.stderr!r}")
            n = p.stdout.count(b"\n")
            lines.append(f"{kind} {' '.join(args)}: {n} lines sha256 {hashlib.sha256(p.stdout).hexdigest()}\n")
    golden("generated.sha256.txt", "".join(lines))


# ---------------------------------------------------------------- options

def case_options():
    n = known_instance()
    rc, out, _ = run(["-n", n, "-d", "-g", "request", "-i", "ReqURL,RespStatus"])
    golden("opt.i.txt", out)
    rc, out, _ = run(["-n", n, "-d", "-g", "vxid", "-i", "Req*", "-x", "ReqHeader"])
    golden("opt.i_then_x.txt", out)
    rc, all_out, _ = run(["-n", n, "-d", "-g", "vxid"])
    rc, out, _ = run(["-n", n, "-d", "-g", "vxid", "-x", "ReqHeader", "-i", "Req*"])
    check(out == all_out, "-x then -i: the -i clears the -x, nothing hidden (varnishlog order)")
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-I", "ReqHeader:curl", "-i", "ReqURL"])
    golden("opt.I.txt", out)
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-X", "Timestamp:Resp", "-x", "Begin,End,Link"])
    golden("opt.X.txt", out)
    # Repeated options accumulate (varnishlog: "-i ReqURL -i RespStatus" = "-i ReqURL,RespStatus").
    rc, out, err = run(["-n", n, "-d", "-g", "request", "-i", "ReqURL", "-i", "RespStatus"])
    check(rc == 0, f"-i twice: exit {rc}: {err!r}")
    golden("opt.i.txt", out)
    rc, out, err = run(["-n", n, "-d", "-g", "raw", "-X", "Timestamp:Resp", "-x", "Begin", "-x", "End,Link"])
    check(rc == 0, f"-x twice: exit {rc}: {err!r}")
    golden("opt.X.txt", out)
    rc, out, err = run(["-n", n, "-d", "-g", "raw", "-I", "ReqHeader:curl", "-I", "ReqHeader:nomatch", "-i", "ReqURL"])
    check(rc == 0 and "curl" in out, f"-I twice: exit {rc}: {err!r}")
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-I", "^GET$"])
    check(out.count("\n") == 3 and "ReqMethod" in out and "BereqMethod" in out, f"-I without taglist: {out!r}")
    # Regexes are PCRE2's, searched anywhere; -C makes every one caseless (varnishlog -C).
    rc, want_i, _ = run(["-n", n, "-d", "-g", "raw", "-I", "ReqHeader:curl", "-i", "ReqURL"])
    for args in (["-C", "-I", "ReqHeader:CURL"], ["-I", "ReqHeader:(?i)CURL"], ["-C", "-I", "reqheader:CuRl"]):
        rc, out, err = run(["-n", n, "-d", "-g", "raw", *args, "-i", "ReqURL"])
        check(rc == 0 and out == want_i and "curl" in out, f"{args}: as -I ReqHeader:curl ({rc} {err!r})")
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-I", "ReqHeader:CURL", "-i", "ReqURL"])
    check(rc == 0 and "curl" not in out, f"-I without -C is case-sensitive: {out!r}")
    rc, want_q, _ = run(["-n", n, "-d", "-g", "request", "-q", "RespStatus == 404"])
    for q in ('ReqMethod eq get and RespStatus == 404', 'ReqURL ~ "(?i)^/" and RespStatus == 404'):
        rc, out, err = run(["-n", n, "-d", "-g", "request", "-C", "-q", q])
        check(rc == 0 and out == want_q and out, f"-C -q {q!r}: the 404 request ({rc} {err!r})")
    rc, out, _ = run(["-n", n, "-d", "-g", "request", "-q", "ReqMethod eq get"])
    check(rc == 0 and out == "", f"eq without -C is case-sensitive: {out!r}")
    rc, out, err = run(["-n", n, "-d", "-q", 'ReqURL ~ "^/(a|b"'])
    check(rc == 2 and "position 16" in err and "missing closing parenthesis" in err and "^" in err,
          f"bad regex in a query: PCRE2's message at its position: rc {rc} err {err!r}")
    rc, out, err = run(["-n", n, "-d", "-X", "ReqURL:a{2,1}"])
    check(rc == 2 and "-X: bad regular expression 'a{2,1}'" in err and "offset 5" in err,
          f"bad -X regex: PCRE2's message and offset: rc {rc} err {err!r}")
    # -c / -b
    rc, out, _ = run(["-n", n, "-d", "-g", "vxid", "-c"])
    check("<< Request  >> 4098" in out and "<< Request  >> 4100" in out and "BeReq" not in out and
          "Session" not in out, "-c in vxid mode: requests only")
    rc, out, _ = run(["-n", n, "-d", "-g", "request", "-b"])
    golden("opt.b.request.txt", out)
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-c"])
    check(" b " not in out and " c " in out and " - sess" in out, "-c in raw mode: client and session records")
    # -q / -Q
    rc, out, _ = run(["-n", n, "-d", "-g", "request", "-q", "RespStatus == 404"])
    golden("opt.q.txt", out)
    rc, out, _ = run(["-n", n, "-d", "-g", "vxid", "-q", "RespStatus == 404", "-q", "BerespStatus == 200"])
    check(">> 4100" in out and ">> 4099" in out and ">> 4098" not in out, "two -q are OR-ed")
    rc, out, _ = run(["-n", n, "-d", "-g", "request", "-q", "{2}BerespStatus == 200"])
    check(">> 4098" in out and ">> 4100" not in out, "-q with a level in request grouping")
    qf = os.path.join(WORK, "queries.txt")
    with open(qf, "w") as f:
        f.write("# 404s\nRespStatus == 404\n\nvxid == 4099\n")
    rc, out, _ = run(["-n", n, "-d", "-g", "vxid", "-Q", qf])
    check(rc == 0 and ">> 4100" in out and ">> 4099" in out and ">> 4098" not in out, "-Q file")
    rc, out, err = run(["-n", n, "-d", "-q", "RespStatus = 404"])
    check(rc == 2 and "position 11" in err and "^" in err, f"bad query: rc {rc} err {err!r}")
    rc, out, err = run(["-n", n, "-d", "-Q", os.path.join(WORK, "nope.txt")])
    check(rc == 1 and "nope.txt" in err, f"unreadable -Q: rc {rc} {err!r}")
    rc, out, err = run(["-n", n, "-d", "-Q", WORK])
    check(rc == 1 and "directory" in err and out == "", f"-Q DIRECTORY: rc {rc} {err!r}")
    # -k, -R
    rc, out, _ = run(["-n", n, "-d", "-g", "vxid", "-k", "2"])
    check(rc == 0 and out.count("<< ") == 2, f"-k 2: {out.count('<< ')} groups")
    # -g raw: every record is a transaction of its own (varnishlog): -q tests each record,
    # -k and -R count the records shown.
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-k", "1"])
    check(rc == 0 and out == "      4099 Begin          b bereq 4098 fetch\n", f"-k 1 in raw mode: one record {out!r}")
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-k", "2", "-i", "ReqURL"])
    check(out == "      4098 ReqURL         c /index.html\n      4100 ReqURL         c \"/missing?q=\\\"x\\\"\"\n",
          f"-k 2 -i ReqURL in raw mode: two records shown {out!r}")
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-q", "RespStatus == 404 or Timestamp:Resp[2] > 0.0008"])
    check(rc == 0 and out == "      4098 Timestamp      c Resp: 1795990488.753611 0.001000 0.001000\n"
                             "      4100 RespStatus     c 404\n", f"-q in raw mode selects records: {out!r}")
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-q", "not Timestamp and not Req* and not Resp*", "-c"])
    rc2, want, _ = run(["-n", n, "-d", "-g", "raw", "-c"])
    want = "".join(l + "\n" for l in want.splitlines() if not any(f" {t}" in l for t in ("Timestamp", "Req", "Resp")))
    check(rc == 0 and out == want and " - sess " in out and " b " not in out,
          f"-q with not in raw mode, -c (sessions kept as without -q): {out!r}")
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-R", "3/m"])
    check(rc == 0 and out.count("\n") == 3 and out.startswith("      4099 Begin"), f"-R 3/m in raw mode: 3 records {out!r}")
    rc, out, _ = run(["-n", n, "-d", "-g", "raw", "-q", "ReqURL", "-j"])
    objs = [json.loads(l) for l in out.splitlines()]
    check([[r["value"] for t in o["transactions"] for r in t["records"]] for o in objs] ==
          [["/index.html"], ["/missing?q=\"x\""]], f"-j -q in raw mode: only the selected records {out!r}")
    fq = os.path.join(WORK, "rawq.rlog")
    rc, _, _ = run(["-n", n, "-d", "-g", "raw", "-q", "ReqURL", "-w", fq])
    rc2, out, _ = run(["-r", fq, "-g", "raw"])
    check(rc == 0 and rc2 == 0 and out.count("\n") == 2 and out.count(" ReqURL ") == 2, f"-w -q in raw mode: {out!r}")
    rc, out, _ = run(["-n", n, "-d", "-g", "vxid", "-R", "1/m"])
    check(rc == 0 and out.count("<< ") == 1, f"-R 1/m: {out.count('<< ')} groups")
    rc, out, _ = run(["-n", n, "-d", "-g", "vxid", "-R", "3/2m"])
    check(out.count("<< ") == 3, "-R 3/2m")
    # --pinned reads the same
    rc, out, _ = run(["-n", n, "-d", "--pinned"])
    check(rc == 0 and out == all_out, "--pinned -d")
    # Incomplete transactions: end of input, -T timeout, -L overflow.
    inc = ring_path("inc")
    writer("create", inc, 1 << 20)
    writer("incomplete", inc)
    rc, out, _ = run(["-n", "inc", "-d"])
    check("/never-ends" in out and "VSL            incomplete: end of input" in out, f"flush at end: {out!r}")
    p = start(["-n", "inc", "-T", "0.5", "-k", "1"])
    wait_attached(p, inc, "-T")
    writer("incomplete", inc)
    try:
        out, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    check(p.returncode == 0 and b"VSL            timeout" in out, f"-T: {out!r}")
    p = start(["-n", "inc", "-L", "1", "-k", "1"])
    wait_attached(p, inc, "-L")
    writer("incomplete", inc)
    writer("incomplete", inc)
    try:
        out, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    check(p.returncode == 0 and b"VSL            store overflow" in out, f"-L: {out!r}")
    # Missing ring: exit 1 naming where it looked; -t waits; -t off waits until it appears.
    rc, out, err = run(["-n", "absent"])
    check(rc == 1 and os.path.join(ENV["RINGLOG_DIR"], "absent", "ring") in err and "-n" in err and "-t" in err,
          f"missing ring: rc {rc} {err!r}")
    # A test of the -t timeout itself: a lower bound on how long it waited, never an upper one.
    t0 = time.time()
    rc, out, err = run(["-n", "absent", "-t", "0.6"])
    check(rc == 1 and time.time() - t0 >= 0.5, "-t 0.6 waits before failing")
    # A file that is not a ring: exit 3, as ringlog-stat's unreadable instance.
    notring = os.path.join(WORK, "notring")
    with open(notring, "wb") as f:
        f.write(b"this is not a ring\n" * 512)
    rc, out, err = run(["-n", notring])
    check(rc == 3 and "not a usable ringlog ring" in err, f"not a ring: rc {rc} {err!r}")
    # -t SECONDS: a ring that appears within the wait is attached to.
    soon = os.path.join(ENV["RINGLOG_DIR"], "soon")
    p = start(["-n", "soon", "-t", "20", "-d"])
    # Asleep in its retry loop, not gone: it waits rather than failing at once.
    check(wait_for(lambda: procs.idle(p)), "-t 20 is still waiting for the ring")
    os.makedirs(soon + ".tmp")
    writer("create", os.path.join(soon + ".tmp", "ring"), 1 << 20)
    writer("known", os.path.join(soon + ".tmp", "ring"))
    os.rename(soon + ".tmp", soon)  # appears whole
    try:
        out, err = p.communicate(timeout=25)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    check(p.returncode == 0 and out.decode() == all_out, f"-t 20: read the ring once it appeared: {err!r}")
    shutil.rmtree(soon, ignore_errors=True)
    late = os.path.join(ENV["RINGLOG_DIR"], "late")
    p = start(["-n", "late", "-t", "off", "-g", "raw", "-i", "ReqURL", "-k", "1"])
    check(wait_for(lambda: procs.idle(p)), "-t off waits for the missing ring")
    writer("create", ring_path("late"), 1 << 20)
    wait_attached(p, ring_path("late"), "-t off")
    writer("live", ring_path("late"), 3)
    try:
        out, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    check(p.returncode == 0 and b"/live/" in out, f"-t off: attached when the ring appeared: {out!r} {err!r}")
    shutil.rmtree(late, ignore_errors=True)
    # Bad command lines: exit 2 with a message.
    for args in (["--nope"], ["-g", "bogus"], ["-t", "abc"], ["-i", "NoSuchTag"], ["-x", "Zz*"],
                 ["-I", "ReqURL:("], ["-X", "Nope:x"], ["-R", "0"], ["-R", "5/fortnight"], ["-c", "-b"],
                 ["-a"], ["-A"], ["-j", "-w", "x.rlog"], ["-v", "-j"], ["-T", "0"], ["-L", "0"], ["-k", "x"], ["-k", "-1"], ["-q", ""], ["-q", "(ReqURL"],
                 ["-r", "x", "-n", "y"], ["extra-arg"]):
        rc, out, err = run(args)
        check(rc == 2 and err.startswith("ringlog: ") and "--help" in err, f"bad flags {args}: rc {rc} {err!r}")
    rc, out, _ = run(["--help"])
    check(rc == 0 and "-q QUERY" in out and "Exit codes" in out, "--help")
    # The exit codes are documented in ringlog(1).
    page = open(os.path.join(HERE, "..", "..", "man", "ringlog.1")).read()
    exits = page.split(".SH EXIT STATUS", 1)[-1].split("\n.SH ", 1)[0]
    check(all(f"\n.B {c}\n" in exits for c in "012") and "Bad command line" in exits and "query" in exits,
          "ringlog(1) documents exit codes 0, 1 and 2")
    rc, out, _ = run(["-V"])
    check(rc == 0 and out.startswith("ringlog "), "-V")


# ---------------------------------------------------------------- files

def case_files():
    n = known_instance()
    # -g raw stores the batches as read: reading back gives every grouping.
    fr = os.path.join(WORK, "raw.rlog")
    rc, out, err = run(["-n", n, "-d", "-g", "raw", "-w", fr])
    check(rc == 0 and out == "" and os.path.getsize(fr) > 16, f"-w: rc {rc} {err!r}")
    with open(fr, "rb") as fh:
        check(fh.read(8) == b"RLOGFILE", "log file magic")
    for g in ("raw", "vxid", "request", "session"):
        rc, direct, _ = run(["-n", n, "-d", "-g", g])
        rc, back, err = run(["-r", fr, "-g", g])
        check(rc == 0 and back == direct, f"-w -g raw then -r -g {g}: rc {rc} {err!r}\n{back}")
    # A grouped -w stores the selected groups; read back in the same grouping, the same.
    f = os.path.join(WORK, "out.rlog")
    run(["-n", n, "-d", "-g", "request", "-w", f])
    rc, direct, _ = run(["-n", n, "-d", "-g", "request"])
    rc, back, _ = run(["-r", f, "-g", "request"])
    check(rc == 0 and back == direct, "-w -g request then -r -g request")
    rc, back, _ = run(["-r", "-", "-g", "request"], stdin=open(f, "rb").read())
    rc, direct, _ = run(["-n", n, "-d", "-g", "request"])
    check(rc == 0 and back == direct, "-r - (stdin)")
    # Filters apply when reading back.
    rc, back, _ = run(["-r", fr, "-g", "request", "-q", "RespStatus == 404", "-i", "ReqURL"])
    check(rc == 0 and back == "*   << Request  >> 4100      \n-   ReqURL         \"/missing?q=\\\"x\\\"\"\n\n",
          f"-r with -q and -i: {back!r}")
    # -w with -q stores only the selected groups; -a appends.
    fq = os.path.join(WORK, "q.rlog")
    run(["-n", n, "-d", "-g", "vxid", "-q", "RespStatus == 404", "-w", fq])
    run(["-n", n, "-d", "-g", "vxid", "-q", "BerespStatus", "-w", fq, "-a"])
    rc, back, _ = run(["-r", fq, "-g", "vxid"])
    check(back.count("<< ") == 2 and ">> 4100" in back and ">> 4099" in back, f"-w -q then -a: {back!r}")
    # Concatenated files read as one.
    cat = open(f, "rb").read() + open(fq, "rb").read()
    rc, back, _ = run(["-r", "-", "-g", "vxid"], stdin=cat)
    rc, one, _ = run(["-r", f, "-g", "vxid"])
    check(rc == 0 and back.count("<< ") == one.count("<< ") + 2, f"concatenated files: {back.count('<< ')} groups")
    # -A: text (or JSON) into the file.
    ft = os.path.join(WORK, "out.txt")
    run(["-n", n, "-d", "-g", "request", "-w", ft, "-A"])
    check(open(ft).read() == direct, "-w -A writes the text layout")
    run(["-n", n, "-d", "-g", "request", "-j", "-w", ft, "-A", "-a"])
    lines = open(ft).read().splitlines()
    check(lines[-1].startswith("{\"group\":\"request\""), "-A -a -j appends JSON lines")
    # -w - is standard output, in text (-A) as in the binary format.
    rc, out, err = run(["-n", n, "-d", "-g", "request", "-w", "-", "-A"], cwd=WORK)
    check(rc == 0 and out == direct and not os.path.exists(os.path.join(WORK, "-")),
          f"-w - -A prints the text on stdout, no file named '-': rc {rc} {err!r}")
    p = subprocess.run([RINGLOG, "-n", n, "-d", "-g", "request", "-w", "-"], capture_output=True, env=ENV,
                       cwd=WORK, timeout=30)
    rc, back, _ = run(["-r", "-", "-g", "request"], stdin=p.stdout)
    check(p.returncode == 0 and p.stdout[:8] == b"RLOGFILE" and back == direct, "-w - writes the binary format on stdout")
    # Damaged input: everything before the damage, then exit 1 naming the offset.
    data = open(f, "rb").read()
    cut = os.path.join(WORK, "cut.rlog")
    with open(cut, "wb") as fh:
        fh.write(data[:-5])
    rc, back, err = run(["-r", cut, "-g", "raw"])
    check(rc == 1 and "cut short" in err and "offset" in err and "ReqURL" in back, f"cut file: rc {rc} {err!r}")
    bad = os.path.join(WORK, "bad.rlog")
    with open(bad, "wb") as fh:
        fh.write(data[:16] + b"\xff\xff\xff\x7f\x00" + data[16:])
    rc, back, err = run(["-r", bad])
    check(rc == 1 and "damaged" in err, f"damaged entry: rc {rc} {err!r}")
    notlog = os.path.join(WORK, "notlog.txt")
    with open(notlog, "w") as fh:
        fh.write("hello world\n")
    rc, back, err = run(["-r", notlog])
    check(rc == 1 and "not a ringlog log file" in err, f"not a log file: rc {rc} {err!r}")
    rc, back, err = run(["-r", os.path.join(WORK, "missing.rlog")])
    check(rc == 1 and "missing.rlog" in err, f"missing file: rc {rc} {err!r}")
    rc, back, err = run(["-r", WORK])
    check(rc == 1, f"-r DIRECTORY: rc {rc}")
    rc, back, err = run(["-n", n, "-d", "-w", os.path.join(WORK, "no", "such", "dir", "x.rlog")])
    check(rc == 1 and "x.rlog" in err, f"-w unwritable: rc {rc} {err!r}")
    rc, back, err = run(["-n", n, "-d", "-w", notlog, "-a"])
    check(rc == 1 and "not a ringlog log file" in err, f"-a onto a foreign file: rc {rc} {err!r}")
    # SIGHUP reopens the -w file (logrotate: move it away, then HUP).
    live = ring_path("rot")
    writer("create", live, 1 << 20)
    fw = os.path.join(WORK, "rot.rlog")
    p = start(["-n", "rot", "-g", "raw", "-w", fw])
    wait_attached(p, live, "-w")
    writer("live", live, 3)
    check(wait_for(lambda: os.path.exists(fw) and os.path.getsize(fw) > 100), "-w writes while tailing")
    os.rename(fw, fw + ".1")
    p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: os.path.exists(fw)), "SIGHUP reopened the file")
    writer("live", live, 2)
    check(wait_for(lambda: run(["-r", fw, "-g", "raw", "-i", "ReqURL"])[1].count("/live/") == 2),
          "-w: records after SIGHUP go to the new file")
    rc, _, err = stop(p)
    check(rc == 0, f"SIGTERM: rc {rc} {err}")
    rc, old, _ = run(["-r", fw + ".1", "-g", "raw", "-i", "ReqURL"])
    rc, new, _ = run(["-r", fw, "-g", "raw", "-i", "ReqURL"])
    check(old.count("/live/") == 3 and new.count("/live/") == 2, f"rotation: old {old!r} new {new!r}")
    # The same for a text file (-w -A).
    ft = os.path.join(WORK, "rot.txt")
    p = start(["-n", "rot", "-g", "raw", "-i", "ReqURL", "-w", ft, "-A"])
    wait_attached(p, live, "-w -A")
    writer("live", live, 3)
    check(wait_for(lambda: os.path.exists(ft) and open(ft).read().count("/live/") == 3), "-w -A writes while tailing")
    os.rename(ft, ft + ".1")
    p.send_signal(signal.SIGHUP)
    check(wait_for(lambda: os.path.exists(ft)), "SIGHUP reopened the text file")
    writer("live", live, 2)
    check(wait_for(lambda: open(ft).read().count("/live/") == 2), "-w -A: lines after SIGHUP go to the new file")
    rc, _, err = stop(p)
    check(rc == 0 and open(ft + ".1").read().count("/live/") == 3, f"-w -A rotation: rc {rc} {err}")


# ---------------------------------------------------------------- live

def case_live():
    n = known_instance("tail")
    path = ring_path("tail")
    # Tail from now: what was there before is not shown.
    t = Tail(["-n", n, "-g", "raw", "-i", "ReqURL"])
    wait_attached(t.p, path, "tail from now")
    writer("live", path, 3)
    check(wait_for(lambda: t.lives() == 3), "tail from now: the three new requests")
    rc, out, err = t.stop()
    check(rc == 0 and "/index.html" not in out and out.count("/live/") == 3, f"tail from now: {out!r} {err!r}")
    # Reattach when the writer recreates the ring.
    t = Tail(["-n", n, "-g", "raw", "-i", "ReqURL"])
    wait_attached(t.p, path, "reattach")
    writer("live", path, 1)
    check(wait_for(lambda: t.lives() == 1), "reattach: the request in the first ring")
    writer("create", path, 1 << 20)
    writer("live", path, 2)
    wait_for(lambda: "reattached" in t.err() and t.lives() == 3, 20)
    rc, out, err = t.stop()
    check("recreated" in err and "reattached" in err, f"reattach notice: {err!r}")
    check(out.count("/live/") == 3, f"reattach: records of both rings: {out!r}")
    # Removed, then created again: waits, then reattaches.
    t = Tail(["-n", n, "-g", "raw", "-i", "ReqURL"])
    wait_attached(t.p, path, "removed ring")
    os.unlink(path)
    check(wait_for(lambda: "waiting" in t.err(), 20), "removed ring: the tool says it waits")
    writer("create", path, 1 << 20)
    writer("live", path, 2)
    wait_for(lambda: "reattached" in t.err() and t.lives() == 2, 20)
    rc, out, err = t.stop()
    check("waiting" in err and "reattached" in err and out.count("/live/") == 2, f"removed ring: {out!r} {err!r}")
    # Overrun: a stopped passive reader falls behind a small ring.
    small = ring_path("small")
    writer("create", small, 64 << 10)
    t = Tail(["-n", "small", "-g", "raw", "-i", "ReqURL"])
    wait_attached(t.p, small, "overrun")
    writer("live", small, 5)
    check(wait_for(lambda: t.lives() == 5), "overrun: the requests before the stall")
    suspend(t.p)
    writer("live", small, 5000)
    t.p.send_signal(signal.SIGCONT)
    wait_for(lambda: " bytes lost" in t.err(), 20)
    rc, out, err = t.stop()
    check(rc == 0 and "Log overrun: " in err and " bytes lost" in err, f"overrun: {err!r}")
    check(out.count("/live/") >= 5, "records before and after the overrun are shown")
    # --pinned: the same stall loses nothing; the writer drops what does not fit instead,
    # so the reader sees an unbroken run of the first requests and no overrun.
    pin = ring_path("pin")
    writer("create", pin, 64 << 10)
    t = Tail(["-n", "pin", "--pinned", "-g", "raw", "-i", "ReqURL"])
    # Attached once its slot is in the ring's reader table and it sleeps on the futex.
    check(wait_for(lambda: ringfile.reader(pin, t.p.pid) is not None and procs.attached(t.p, pin), 20),
          "--pinned: the reader slot is claimed")
    writer("live", pin, 1)
    check(wait_for(lambda: t.lives() == 1), "--pinned: the warm-up request")
    warm = t.lives()
    suspend(t.p)
    writer("live", pin, 5000)
    t.p.send_signal(signal.SIGCONT)
    # Done when its slot holds the newest position and it sleeps again (it flushes its
    # output before it waits).
    check(wait_for(lambda: ringfile.caught_up(pin, t.p.pid) and procs.sleeping(t.p.pid), 30),
          "--pinned: the reader caught up with the tail")
    rc, out, err = t.stop()
    urls = [l.split()[-1] for l in out.splitlines()]
    run_len = len(urls) - warm
    want = ["/live/0"] * warm + [f"/live/{i}" for i in range(run_len)]
    check(rc == 0 and warm >= 1 and "overrun" not in err, f"--pinned: no overrun: rc {rc} {err!r}")
    check(run_len > 100 and urls == want, f"--pinned: every record up to the ring's size, in order ({warm}+{run_len})")


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    sys.exit(checks.run_cases(checks.cases_of(globals()), CASE))
