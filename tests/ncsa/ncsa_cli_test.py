#!/usr/bin/env python3
"""ringlog-ncsa against a writer with known transactions, one case per ctest entry
(ncsa_tool_tests/<case>): every exit code (1 runtime, 2 usage, 3 unusable ring), never
a crash.

usage: ncsa_cli_test.py CASE RINGLOG_NCSA WRITER WORKDIR GOLDEN_DIR
  layouts    the lines of every mode compared with golden files (TZ=UTC), -j parsed back
  sources    the same lines from -r FILE, -r - (stdin), --pinned, -n as a path
  selection  -k -c -b -q -C -Q -R -T -L
  formats    -f FILE, -w appending (-a), -w -
  late       -t: waits for a ring that appears later
  live       tails from now; -w with SIGHUP reopen under a live writer, no line lost or doubled
  daemon     -D -P: a daemon writing to a file, rotated by SIGHUP, stopped by SIGTERM
  errors     missing ring, -t 1, not a ring, unreadable -f/-r files, a cut log file
  usage      bad formats, queries and command lines exit 2; --help, -V, the man page's exit codes
  no_wait    a missing ring fails without waiting (no sleep, strace), unless -t
Set UPDATE_GOLDEN=1 to rewrite the golden files (then review them by hand).
"""
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
from checks import check  # noqa: E402
from procs import wait_for  # noqa: E402

CASE, NCSA, WRITER, WORK, GOLDEN = sys.argv[1:6]
ENV = dict(os.environ, RINGLOG_DIR=WORK, TZ="UTC")
LOGFILE = os.path.join(WORK, "fixed.rlog")  # the fixed transactions as a binary log file (-r)


def ncsa(*args, timeout=30, stdin=None):
    return subprocess.run([NCSA, *args], capture_output=True, env=ENV, timeout=timeout, stdin=stdin)


def golden(name, out):
    checks.golden(os.path.join(GOLDEN, name), out)


def writer(*args):
    r = subprocess.run([WRITER, *args], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"writer {args}: {r.stderr}")


def fixed():
    """The instance "fixed" (and LOGFILE): the writer's known transactions. Returns the
    default lines of its six client requests."""
    os.makedirs(os.path.join(WORK, "fixed"), exist_ok=True)
    writer("--ring", os.path.join(WORK, "fixed", "ring"), "--fixed", "--logfile", LOGFILE)
    r = ncsa("-n", "fixed", "-d")
    check(r.returncode == 0 and len(r.stdout.splitlines()) == 6, f"the fixed ring reads ({r.stderr!r})")
    return r.stdout


def start_live(name, rate=100):
    ready = os.path.join(WORK, name + ".ready")
    return procs.start_ready([WRITER, "--ring", procs.ring_path(WORK, name), "--live", "--rate", str(rate),
                              "--ready", ready], ready, "live writer")


def stop(p, sig=signal.SIGTERM):
    return procs.stop(p, sig, timeout=10)


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


SIDE_FMT = "%{ringlog:side}x %{ringlog:vxid}x %s %U%q %{ringlog:hitmiss}x %{ringlog:handling}x"
ALL_FMT = ("%b|%D|%H|%h|%I|%l|%m|%O|%q|%r|%s|%t|%{%Y-%m-%dT%H:%M:%S}t|%{sec}t|%{msec}t|%{usec}t|%{msec_frac}t|"
           "%{usec_frac}t|%T|%{ms}T|%{us}T|%U|%u|%{Host}i|%{Content-Type}o|%{ringlog:time_firstbyte}x|"
           "%{VSL:Begin[3]}x|%{VSL:Timestamp:Resp[1]}x|100%%\\t.")
JSON_FMT = ('{"ip": "%h", "user": "%u", "time": "%t", "req": "%r", "status": %s, "bytes": %b, "in": %I, '
            '"out": %O, "dur_us": %D, "ttfb": %{ringlog:time_firstbyte}x, "ref": "%{Referer}i", '
            '"ua": "%{User-Agent}i", "ctype": "%{Content-Type}o", "handling": "%{ringlog:handling}x", '
            '"vxid": %{ringlog:vxid}x}')


def case_layouts():
    """The lines of each mode, against golden files."""
    fixed()
    modes = {
        "default.txt": ["-n", "fixed", "-d"],
        "backend.txt": ["-n", "fixed", "-d", "-b"],
        "both_vxid.txt": ["-n", "fixed", "-d", "-c", "-b", "-F", SIDE_FMT],
        "both_request.txt": ["-n", "fixed", "-d", "-c", "-b", "-g", "request", "-F", SIDE_FMT],
        "all_formatters.txt": ["-n", "fixed", "-d", "-c", "-b", "-F", ALL_FMT],
        "json.txt": ["-n", "fixed", "-d", "-j", "-F", JSON_FMT],
    }
    outs = {}
    for name, args in modes.items():
        r = ncsa(*args)
        check(r.returncode == 0 and r.stderr == b"", f"{name}: exit 0, quiet ({r.returncode}, {r.stderr!r})")
        outs[name] = r.stdout
        golden(name, r.stdout)

    lines = outs["default.txt"].splitlines()
    check(len(lines) == 6, f"one line per client request: {len(lines)}")
    check(len(outs["backend.txt"].splitlines()) == 2, "one line per backend fetch")
    check(sorted(outs["both_vxid.txt"].splitlines()) == sorted(outs["both_request.txt"].splitlines()),
          "-g request gives the same lines as -g vxid")
    # Every -j line is JSON, whatever bytes the request held.
    objs = []
    for i, l in enumerate(outs["json.txt"].splitlines()):
        try:
            obj = json.loads(l.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            check(False, f"-j line {i} is valid JSON: {e}", l)
            continue
        check(isinstance(obj["status"], int) and isinstance(obj["vxid"], int), f"-j line {i}: numbers", l)
        objs.append(obj)
    if check(len(objs) == 6, f"-j: six JSON lines ({len(objs)})"):
        check(objs[4]["ua"] == "evil\"agent\u0001\u0000\u00ff", f"-j: hostile bytes survive: {objs[4]['ua']!r}")
        check(objs[3]["ua"] == "" and objs[3]["ref"] == "", "-j: missing strings are empty")
        check(objs[4]["req"] == 'GET http://www.example.com/caf\u00e9?q="x" HTTP/1.1',
              "-j: UTF-8 kept: " + objs[4]["req"])
        check(objs[2]["user"] == "alice", "-j: basic auth user")
    # Without -j: no raw control byte and no unescaped quote inside a quoted field.
    for l in lines:
        check(all(b >= 0x20 and b < 0x7f for b in l), f"CLF line is printable ASCII: {l!r}")


def case_sources():
    """The same lines from a binary log file (-r), from stdin, pinned, -n as a path."""
    default = fixed()
    r = ncsa("-r", LOGFILE)
    check(r.returncode == 0 and r.stdout == default, f"-r FILE gives the same lines ({r.returncode})", r.stderr)
    with open(LOGFILE, "rb") as f:
        r = ncsa("-r", "-", stdin=f)
    check(r.returncode == 0 and r.stdout == default, "-r - reads stdin")
    r = ncsa("-n", "fixed", "-d", "--pinned")
    check(r.returncode == 0 and r.stdout == default, "--pinned gives the same lines", r.stderr)
    r = ncsa("-n", os.path.join(WORK, "fixed", "ring"), "-d")
    check(r.returncode == 0 and r.stdout == default, "-n with a ring path")
    r = ncsa("-n", os.path.join(WORK, "fixed"), "-d")
    check(r.returncode == 0 and r.stdout == default, "-n with an instance directory")


def case_selection():
    """Which transactions give lines: -k -c -b -q -Q -R, and -T -L accepted."""
    default = fixed()
    r = ncsa("-n", "fixed", "-d", "-k", "2", "-F", "%U")
    check(r.stdout == b"/index.html\n/img.png\n", f"-k 2: {r.stdout!r}")
    r = ncsa("-n", "fixed", "-d", "-c", "-b", "-k", "3", "-F", "%{ringlog:side}x %U")
    check(r.stdout == b"c /index.html\nb /img.png\nc /img.png\n", f"-c -b -k 3: three transactions ({r.stdout!r})")
    r = ncsa("-n", "fixed", "-d", "-q", "RespStatus >= 400", "-F", "%s %U")
    check(r.returncode == 0 and r.stdout == b"400 /../etc/passwd\n", f"-q: {r.stdout!r} {r.stderr!r}")
    r = ncsa("-n", "fixed", "-d", "-q", "RespStatus == 201", "-q", "ReqMethod eq HEAD", "-F", "%m %s")
    check(r.stdout == b"POST 201\nHEAD 200\n", f"several -q are OR-ed: {r.stdout!r}")
    # -C: the queries' regexes and eq/ne caseless, as varnishncsa -C; (?i) works without it.
    r = ncsa("-n", "fixed", "-d", "-C", "-q", "ReqMethod eq head", "-F", "%m %s")
    check(r.returncode == 0 and r.stdout == b"HEAD 200\n", f"-C -q eq: {r.stdout!r} {r.stderr!r}")
    r = ncsa("-n", "fixed", "-d", "-q", "ReqMethod eq head", "-F", "%m %s")
    check(r.returncode == 0 and r.stdout == b"", f"eq without -C is case-sensitive: {r.stdout!r}")
    want = ncsa("-n", "fixed", "-d", "-q", 'ReqURL ~ "\\.png"', "-F", "%m %U").stdout
    check(want != b"", "a query selecting the .png requests")
    for args in (["-C", "-q", 'ReqURL ~ "\\.PNG"'], ["-q", 'ReqURL ~ "(?i)\\.PNG"']):
        r = ncsa("-n", "fixed", "-d", *args, "-F", "%m %U")
        check(r.returncode == 0 and r.stdout == want, f"{args}: as the case-sensitive query ({r.stdout!r} {r.stderr!r})")
    r = ncsa("-n", "fixed", "-d", "-q", 'ReqURL ~ "\\.PNG"', "-F", "%m %U")
    check(r.returncode == 0 and r.stdout == b"", f"~ without -C is case-sensitive: {r.stdout!r}")
    r = ncsa("-n", "fixed", "-d", "-b", "-q", "BerespStatus == 201", "-F", "%s %h")
    check(r.stdout == b"201 198.51.100.7\n", f"-b -q: {r.stdout!r}")
    qfile = os.path.join(WORK, "queries")
    with open(qfile, "w") as f:
        f.write("# statuses worth a look\nRespStatus == 304\n\nReqURL ~ \"^/api\"\n")
    r = ncsa("-n", "fixed", "-d", "-Q", qfile, "-F", "%s")
    check(r.stdout == b"201\n304\n", f"-Q FILE: {r.stdout!r} {r.stderr!r}")
    r = ncsa("-n", "fixed", "-d", "-R", "2/1m", "-F", "%U")
    check(r.returncode == 0 and 1 <= len(r.stdout.splitlines()) <= 3, f"-R 2/1m limits the lines: {r.stdout!r}")
    r = ncsa("-n", "fixed", "-d", "-T", "5", "-L", "10")
    check(r.returncode == 0 and r.stdout == default, "-T and -L accepted")


def case_formats():
    """Formats from a file, -w appending, -a, -w -."""
    default = fixed()
    ffile = os.path.join(WORK, "format")
    with open(ffile, "w") as f:
        f.write("%s %{ringlog:handling}x %U\nthis second line is ignored\n")
    r = ncsa("-n", "fixed", "-d", "-f", ffile)
    check(r.stdout == (b"200 hit /index.html\n200 miss /img.png\n201 pass /api/login\n400 synth /../etc/passwd\n"
                       b"304 hit /caf\\xc3\\xa9\n200 hit /\n"), f"-f FILE: {r.stdout!r}")
    out = os.path.join(WORK, "access.log")
    with open(out, "w") as f:
        f.write("kept line\n")
    r = ncsa("-n", "fixed", "-d", "-w", out)
    check(r.returncode == 0 and r.stdout == b"", "-w writes nothing on stdout")
    r = ncsa("-n", "fixed", "-d", "-w", out, "-a")
    check(read(out) == b"kept line\n" + default * 2, "-w appends, never truncates (-a accepted)")
    r = ncsa("-n", "fixed", "-d", "-w", "-", "-F", "%s")
    check(r.stdout.splitlines()[:1] == [b"200"], "-w - is stdout")


def case_late():
    """-t: wait for a ring that appears later."""
    late = os.path.join(WORK, "late")
    p = subprocess.Popen([NCSA, "-n", "late", "-d", "-t", "20", "-F", "%U"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=ENV)
    try:
        # Asleep in its retry loop, not gone: it waits for the ring rather than failing.
        check(wait_for(lambda: procs.idle(p)), "-t 20 waits for the missing ring")
        # Written aside and moved into place whole, so the tool never sees a half-written ring.
        os.makedirs(late + ".tmp")
        writer("--ring", os.path.join(late + ".tmp", "ring"), "--fixed")
        os.rename(late + ".tmp", late)
        o, e = p.communicate(timeout=30)
        check(p.returncode == 0 and o.splitlines()[:1] == [b"/index.html"],
              f"-t: reads the ring once it appears ({e!r})")
    except subprocess.TimeoutExpired:
        check(False, "-t: never finished")
    finally:
        stop(p)


def seq_run(data):
    """The X-Seq numbers of a log's lines, and whether they run without a gap or a double."""
    seqs = [int(x) for x in data.split()]
    return seqs, bool(seqs) and seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def case_live():
    """A live writer: tail from now, -w with SIGHUP reopen (logrotate), SIGTERM."""
    live = start_live("live", rate=200)
    log = os.path.join(WORK, "live.log")
    try:
        p = subprocess.Popen([NCSA, "-n", "live", "-w", log, "-F", "%{X-Seq}i"], env=ENV, stderr=subprocess.PIPE)
        try:
            check(wait_for(lambda: len(read(log).splitlines()) >= 20), "live lines reach the -w file")
            os.rename(log, log + ".1")
            # Until SIGHUP the tool keeps writing to the file it has open, now named .1.
            moved = len(read(log + ".1").splitlines())
            check(wait_for(lambda: len(read(log + ".1").splitlines()) > moved), "lines go on into the renamed file")
            p.send_signal(signal.SIGHUP)
            check(wait_for(lambda: len(read(log).splitlines()) >= 20), "after SIGHUP, lines go to a new file")
        finally:
            rc = stop(p)
        check(rc == 0, f"SIGTERM: exit 0 (got {rc})")
        seqs, unbroken = seq_run(read(log + ".1") + read(log))
        check(len(seqs) >= 40 and unbroken,
              f"no line lost or doubled across the reopen ({len(seqs)} lines, {seqs[:3]}..{seqs[-3:]})")
        first = seqs[0] if seqs else -1
        check(first > 0, f"tails from now, not from the oldest (first X-Seq {first})")
    finally:
        stop(live)


def case_daemon():
    """-D: a daemon writing to a file, found by its -P pid file, rotated, stopped."""
    live = start_live("live", rate=200)
    pidf = os.path.join(WORK, "ncsa.pid")
    dlog = os.path.join(WORK, "daemon.log")
    dpid = 0
    try:
        r = subprocess.run([NCSA, "-n", "live", "-D", "-P", pidf, "-w", dlog, "-F", "%{X-Seq}i"], env=ENV,
                           capture_output=True, timeout=30)
        check(r.returncode == 0, f"-D returns at once with 0 ({r.returncode}, {r.stderr!r})")
        # Written before -D returns: a service manager reads it when the command exits.
        check(os.path.exists(pidf) and read(pidf).strip() != b"", "-P: the pid file is written when -D returns")
        dpid = int(read(pidf).strip() or b"0")
        if not check(dpid > 0, "the pid file holds a pid"):
            return  # never signal pid 0 (our own process group)
        check(wait_for(lambda: len(read(dlog).splitlines()) >= 10), "the daemon writes lines")
        os.rename(dlog, dlog + ".1")
        os.kill(dpid, signal.SIGHUP)
        check(wait_for(lambda: len(read(dlog).splitlines()) >= 10), "the daemon reopens on SIGHUP")
        os.kill(dpid, signal.SIGTERM)
        check(wait_for(lambda: not os.path.exists(pidf)), "the daemon removes its pid file at exit")
        dpid = 0
        seqs, unbroken = seq_run(read(dlog + ".1") + read(dlog))
        check(len(seqs) >= 20 and unbroken, f"daemon: no line lost or doubled ({len(seqs)} lines)")
    finally:
        if dpid > 0 and os.path.exists(pidf):  # a failed check left it running: stopped by its pid
            os.kill(dpid, signal.SIGKILL)
        stop(live)


def case_errors():
    """Runtime errors exit 1, an unusable ring 3, with the reason."""
    fixed()
    # (That it fails without waiting is the no_wait case.)
    r = ncsa("-n", "nosuch")
    check(r.returncode == 1 and b"no ring at" in r.stderr and b"nosuch" in r.stderr and b"-t" in r.stderr,
          f"missing ring: exit 1 and where it looked ({r.returncode}, {r.stderr!r})")
    # A test of the -t timeout itself: a lower bound on the wait, never an upper one.
    t0 = time.monotonic()
    r = ncsa("-n", "nosuch", "-t", "1")
    took = time.monotonic() - t0
    check(r.returncode == 1 and took >= 0.9, f"-t 1 waits a second, then exit 1 ({took:.2f}s)")
    notring = os.path.join(WORK, "notring")
    with open(notring, "wb") as f:
        f.write(b"this is not a ring\n" * 512)
    r = ncsa("-n", notring)
    check(r.returncode == 3 and b"not a usable ringlog ring" in r.stderr,
          f"a file that is not a ring: exit 3, as ringlog-stat's unreadable instance ({r.returncode}, {r.stderr!r})")
    r = ncsa("-f", os.path.join(WORK, "no-such-format"))
    check(r.returncode == 1 and b"-f: cannot read" in r.stderr, f"unreadable -f file: exit 1 ({r.stderr!r})")
    empty = os.path.join(WORK, "empty-format")
    open(empty, "w").close()
    r = ncsa("-f", empty)
    check(r.returncode == 1 and b"empty" in r.stderr, f"empty -f file: exit 1 ({r.stderr!r})")
    r = ncsa("-n", "fixed", "-d", "-w", os.path.join(WORK, "no", "such", "dir", "x.log"))
    check(r.returncode == 1 and b"-w: cannot open" in r.stderr, f"-w in a missing directory: exit 1 ({r.stderr!r})")
    r = ncsa("-r", os.path.join(WORK, "no-such.rlog"))
    check(r.returncode == 1, f"missing -r file: exit 1 ({r.returncode}, {r.stderr!r})")
    garbage = os.path.join(WORK, "garbage.rlog")
    with open(garbage, "wb") as f:
        f.write(b"this is not a ringlog log file at all\n" * 10)
    r = ncsa("-r", garbage)
    check(r.returncode == 1 and r.stderr != b"", f"a file that is not a log file: exit 1 ({r.returncode})")
    cut = os.path.join(WORK, "cut.rlog")
    with open(LOGFILE, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[: len(data) - 7])
    r = ncsa("-r", cut, "-F", "%U")
    check(r.returncode == 1 and r.stdout.startswith(b"/index.html\n"),
          f"a cut log file: the lines before the damage, then exit 1 ({r.returncode}, {r.stdout!r})")


def case_usage():
    """Bad formats, queries and command lines: exit 2 with a message, never a signal."""
    r = ncsa("-F", "%h %Z")
    check(r.returncode == 2 and b"unknown format specifier '%Z' (at byte 3)" in r.stderr and b"\n     ^" in r.stderr,
          f"bad format: exit 2 with the position ({r.stderr!r})")
    ffile = os.path.join(WORK, "format")
    with open(ffile, "w") as f:
        f.write("%{Referer\n")
    r = ncsa("-f", ffile)
    check(r.returncode == 2 and b"-f:" in r.stderr and b"unmatched" in r.stderr,
          f"bad format in a file: exit 2 ({r.stderr!r})")
    r = ncsa("-q", "RespStatus >= ")
    check(r.returncode == 2 and b"-q:" in r.stderr and b"^" in r.stderr, f"bad query: exit 2 with a caret ({r.stderr!r})")
    r = ncsa("-q", 'ReqURL ~ "[z-a]"')
    check(r.returncode == 2 and b"position 13" in r.stderr and b"range out of order" in r.stderr,
          f"bad regex: exit 2 with PCRE2's message at its position ({r.stderr!r})")
    bad_args = [["--bogus"], ["-g", "raw"], ["-g", "session"], ["-g", "nope"], ["-F", "%s", "-f", ffile], ["-F", ""],
                ["-D"], ["-D", "-w", "-"], ["-t", "soon"], ["-k", "many"], ["-k", "-2"], ["-R", "fast"], ["-T", "0"],
                ["-L", "0"], ["-w"], ["-n"], ["extra-argument"], ["-r", "x", "-n", "fixed"], ["-F", "%{x}T"], ["-F", "%"]]
    for args in bad_args:
        r = ncsa(*args)
        check(r.returncode == 2 and b"ringlog-ncsa:" in r.stderr,
              f"{args}: exit 2 with a message ({r.returncode}, {r.stderr!r})")
    # -D: what can be checked is said on stderr before detaching, with its exit code; a
    # daemon would have let the command return 0 at once, so the code shows none was left.
    nodir = os.path.join(WORK, "no-such-dir", "x.log")
    dfile = os.path.join(WORK, "daemon-never.log")
    for args, code, opt in ((["-D", "-w", nodir], 1, b"-w:"),
                            (["-D", "-w", dfile, "-F", "%Z"], 2, b"-F:"),
                            (["-D", "-w", dfile, "-P", nodir], 1, b"-P:")):
        r = ncsa("-n", "nosuch", *args)
        check(r.returncode == code and r.stderr.startswith(b"ringlog-ncsa: " + opt),
              f"{args}: reported before detaching, exit {code} ({r.returncode}, {r.stderr!r})")
    check(not os.path.exists(nodir), "-D: nothing was written where it could not be")
    r = ncsa("--help")
    check(r.returncode == 0 and b"-F FORMAT" in r.stdout and b"Exit codes" in r.stdout, "--help")
    r = ncsa("-V")
    check(r.returncode == 0 and r.stdout.startswith(b"ringlog-ncsa"), "-V")
    # The exit codes are documented in ringlog-ncsa(1).
    page = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "man", "ringlog-ncsa.1")).read()
    exits = page.split(".SH EXIT STATUS", 1)[-1].split("\n.SH ", 1)[0]
    check(all(f"\n.B {c}\n" in exits for c in "012") and "Bad command line" in exits,
          "ringlog-ncsa(1) documents exit codes 0, 1 and 2")


def case_no_wait():
    n, rc = procs.sleeps([NCSA, "-n", "nosuch"], ENV)
    check(rc == 1 and n == 0, f"missing ring without -t: exit 1 at once, no sleep ({rc}, {n} sleeps)")
    n, rc = procs.sleeps([NCSA, "-n", "nosuch", "-t", "0.5"], ENV)
    check(rc == 1 and n > 0, f"missing ring with -t 0.5: waits (sleeps), then exit 1 ({rc}, {n} sleeps)")


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    sys.exit(checks.run_cases(checks.cases_of(globals()), CASE))
