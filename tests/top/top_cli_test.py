#!/usr/bin/env python3
"""ringlog-top -1 against a writer with known transactions (three sets of them), one
case per ctest entry (top_tool_tests/<case>): every exit code (1 runtime, 2 usage,
3 unusable ring, 4 no terminal), never a crash.

usage: top_cli_test.py CASE RINGLOG_TOP WRITER WORKDIR GOLDEN_DIR
  dumps      the dump compared with golden files for the default and every filter (-f -i -x
             -I -X -c -b -q); its layout and order; -C and (?i); a bad -I regex
  groupings  the same counts from every grouping, -r FILE, -r -, --pinned, -d, -p, -T -L
  raw        -g raw: every record a transaction of its own; -q, -k and -R count records
  limits     -k and -R count groups; -Q FILE as -q
  errors     no terminal, a missing ring, -t, missing -r/-Q files, a file that is not a ring
  usage      bad queries and command lines exit 2; --help, -V, the man page's exit codes
  no_wait    a missing ring fails without waiting (no sleep, strace), unless -t
Set UPDATE_GOLDEN=1 to rewrite the golden files (then review them by hand).
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import checks  # noqa: E402
import procs  # noqa: E402
from checks import check  # noqa: E402

CASE, TOP, WRITER, WORK, GOLDEN = sys.argv[1:6]
ENV = dict(os.environ, RINGLOG_DIR=WORK)
LOGFILE = os.path.join(WORK, "fixed.rlog")  # the fixed transactions as a binary log file (-r)
URLS = ["-i", "ReqURL,BereqURL"]
QUERY = ["-q", "RespStatus >= 300", "-i", "ReqURL,RespStatus"]


def top(*args, timeout=30, stdin=None):
    return subprocess.run([TOP, *args], capture_output=True, env=ENV, timeout=timeout, stdin=stdin)


def golden(name, out):
    checks.golden(os.path.join(GOLDEN, name), out)


def fixed():
    """The instance "fixed" (and LOGFILE): three sets of the writer's known transactions.
    Returns the default dump of it."""
    os.makedirs(os.path.join(WORK, "fixed"), exist_ok=True)
    r = subprocess.run([WRITER, "--ring", os.path.join(WORK, "fixed", "ring"), "--fixed", "--repeat", "3",
                        "--logfile", LOGFILE], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"writer: {r.stderr}")
    r = top("-n", "fixed", "-1")
    check(r.returncode == 0 and r.stdout != b"", f"the fixed ring dumps ({r.stderr!r})")
    return r.stdout


def case_dumps():
    fixed()
    dumps = {
        "once.txt": [],
        "first_field.txt": ["-f"],
        "urls.txt": URLS,
        "headers_first_field.txt": ["-f", "-i", "*Header"],
        "exclude.txt": ["-x", "Begin,End,Link,Timestamp,Req*,Resp*"],
        "regex.txt": ["-I", "ReqHeader:^User-Agent:"],
        # -X hides what -i has not selected (varnishlog's order), so no -i here.
        "regex_exclude.txt": ["-X", "ReqHeader:^(Host|User-Agent):", "-x",
                              "Begin,End,Link,Timestamp,Sess*,ReqStart,ReqMethod,ReqURL,ReqProtocol,ReqUnset,ReqAcct,"
                              "Resp*,Bere*,Backend*,Hit*,Error"],
        "client.txt": ["-c", "-i", "*Status,*URL"],
        "backend.txt": ["-b", "-i", "*Status,*URL"],
        "query.txt": QUERY,
    }
    outs = {}
    for name, args in dumps.items():
        r = top("-n", "fixed", "-1", *args)
        check(r.returncode == 0 and r.stderr == b"", f"{name}: exit 0, quiet ({r.returncode}, {r.stderr!r})")
        outs[name] = r.stdout
        golden(name, r.stdout)

    # Layout: "%9.2f TAG KEY", highest first, only pairs seen more than once.
    for l in outs["once.txt"].splitlines():
        check(len(l) > 11 and l[9:10] == b" " and float(l[:9]) > 1.0, f"dump line layout: {l!r}")
    counts = [float(l[:9]) for l in outs["once.txt"].splitlines()]
    check(counts == sorted(counts, reverse=True), "dump is sorted by count")
    check(outs["urls.txt"].splitlines()[:1] == [b"     3.00 ReqURL /"], "URL counts: 3 sets of 6 requests")

    # -C: every regex (-I, -X, -q) and eq/ne caseless, as varnishtop -C; (?i) works without it.
    for args in (["-C", "-I", "ReqHeader:^USER-AGENT:"], ["-I", "ReqHeader:(?i)^user-AGENT:"]):
        r = top("-n", "fixed", "-1", *args)
        check(r.returncode == 0 and r.stdout == outs["regex.txt"], f"{args}: the -I dump ({r.returncode}, {r.stderr!r})")
    r = top("-n", "fixed", "-1", "-I", "ReqHeader:^USER-AGENT:")
    check(r.returncode == 0 and r.stdout == b"", f"-I without -C is case-sensitive ({r.stdout!r})")
    r = top("-n", "fixed", "-1", "-C", "-X", "REQHEADER:^(HOST|USER-AGENT):", *dumps["regex_exclude.txt"][2:])
    check(r.returncode == 0 and r.stdout == outs["regex_exclude.txt"], f"-C -X: the -X dump ({r.stderr!r})")
    r = top("-n", "fixed", "-1", "-C", "-q", "RespStatus >= 300 and ReqMethod eq get", "-i", "ReqURL,RespStatus")
    check(r.returncode == 0 and r.stdout and r.stdout == top("-n", "fixed", "-1", "-q",
                                                             "RespStatus >= 300 and ReqMethod eq GET",
                                                             "-i", "ReqURL,RespStatus").stdout,
          f"-C: eq is caseless ({r.stdout!r})")
    r = top("-n", "fixed", "-1", "-I", "ReqURL:(a|b")
    check(r.returncode == 2 and b"missing closing parenthesis" in r.stderr and b"offset 4" in r.stderr,
          f"a bad -I regex: exit 2 with PCRE2's message and offset ({r.stderr!r})")


def case_groupings():
    """The same counts from every grouping, a log file, stdin, a pinned reader, -d."""
    once = fixed()
    # Request groups hold no session (as in varnishlog -g request): the same minus sessions.
    r = top("-n", "fixed", "-1", "-g", "request")
    want = b"".join(l + b"\n" for l in once.splitlines()
                    if b" SessOpen " not in l and b" SessClose " not in l and b" Begin sess " not in l)
    check(r.returncode == 0 and want != once and r.stdout == want,
          f"-g request: the dump without sessions ({r.stdout!r})")
    for args in (["-g", "raw"], ["-g", "session"], ["--pinned"], ["-d"], ["-p", "5"],
                 ["-T", "10", "-L", "50"]):
        r = top("-n", "fixed", "-1", *args)
        check(r.returncode == 0 and r.stdout == once, f"{args}: same dump ({r.returncode}, {r.stderr!r})")
    r = top("-r", LOGFILE, "-1")
    check(r.returncode == 0 and r.stdout == once, f"-r FILE: same dump ({r.stderr!r})")
    with open(LOGFILE, "rb") as f:
        r = top("-r", "-", "-1", stdin=f)
    check(r.returncode == 0 and r.stdout == once, "-r -: same dump")


def case_raw():
    """-g raw: every record is a transaction of its own (varnishtop): -q selects records,
    -k and -R count them."""
    fixed()
    urls = top("-n", "fixed", "-1", *URLS).stdout
    want = b"".join(l + b"\n" for l in urls.splitlines() if b" ReqURL " in l)
    check(want != b"", "the fixed ring counts ReqURL records")
    r = top("-n", "fixed", "-1", "-g", "raw", "-q", "ReqURL", "-i", "ReqURL")
    check(r.returncode == 0 and r.stdout == want, f"-g raw with -q (no fast path): {r.stdout!r}")
    r = top("-n", "fixed", "-1", "-g", "raw", "-q", "ReqURL")
    check(r.returncode == 0 and r.stdout == want, f"-g raw -q counts the matching records only: {r.stdout!r}")
    r = top("-n", "fixed", "-1", "-g", "raw", "-q", "RespStatus >= 300", "-c")
    check(r.stdout == b"     3.00 RespStatus 304\n     3.00 RespStatus 400\n", f"-g raw -q -c: {r.stdout!r}")
    r = top("-n", "fixed", "-1", "-g", "raw", "-q", "ReqURL", "-k", "12")
    check(r.stdout == want.replace(b" 3.00 ", b" 2.00 "), f"-g raw -k 12: two sets of six URL records ({r.stdout!r})")
    r = top("-n", "fixed", "-1", "-g", "raw", "-q", "ReqURL", "-R", "6/1m")
    check(r.returncode == 0 and r.stdout == b"", f"-g raw -R 6/1m: each URL counted once ({r.stdout!r})")


def case_limits():
    """-k and -R count groups; -Q FILE selects as -q does."""
    fixed()
    r = top("-n", "fixed", "-1", "-c", "-k", "12", "-i", "ReqURL")
    check(r.stdout == b"     2.00 ReqURL /\n     2.00 ReqURL /../etc/passwd\n     2.00 ReqURL /api/login\n"
                      b"     2.00 ReqURL /caf\\xc3\\xa9?q=\"x\"\n     2.00 ReqURL /img.png?v=2\n"
                      b"     2.00 ReqURL /index.html\n", f"-k 12 -c: two sets of requests ({r.stdout!r})")
    r = top("-n", "fixed", "-1", "-c", "-R", "3/1m", "-i", "ReqURL")
    check(r.returncode == 0 and r.stdout == b"", f"-R 3/1m: no request counted twice ({r.stdout!r})")
    qfile = os.path.join(WORK, "queries")
    with open(qfile, "w") as f:
        f.write("# statuses\nRespStatus >= 300\n")
    want = top("-n", "fixed", "-1", *QUERY).stdout
    r = top("-n", "fixed", "-1", "-Q", qfile, "-i", "ReqURL,RespStatus")
    check(want != b"" and r.stdout == want, "-Q FILE as -q")


def case_errors():
    """Runtime errors exit 1, an unusable ring 3, no terminal 4."""
    fixed()
    r = top("-n", "fixed")  # stdout is a pipe here
    check(r.returncode == 4 and b"needs a terminal" in r.stderr,
          f"no terminal without -1: exit 4, as ringlog-stat's screen ({r.returncode}, {r.stderr!r})")
    # (That it fails without waiting is the no_wait case.)
    r = top("-n", "nosuch", "-1")
    check(r.returncode == 1 and b"no ring at" in r.stderr and b"nosuch" in r.stderr,
          f"missing ring: exit 1 with where it looked ({r.stderr!r})")
    r = top("-n", "nosuch", "-1", "-t", "1")
    check(r.returncode == 1, "-t 1 then exit 1")
    r = top("-r", os.path.join(WORK, "nope.rlog"), "-1")
    check(r.returncode == 1, f"missing -r file: exit 1 ({r.returncode})")
    notring = os.path.join(WORK, "notring")
    with open(notring, "wb") as f:
        f.write(b"this is not a ring\n" * 512)
    r = top("-n", notring, "-1")
    check(r.returncode == 3 and b"not a usable ringlog ring" in r.stderr,
          f"a file that is not a ring: exit 3 ({r.returncode}, {r.stderr!r})")
    r = top("-Q", os.path.join(WORK, "nope.q"), "-1", "-n", "fixed")
    check(r.returncode == 1, f"unreadable -Q file: exit 1 ({r.returncode})")


def case_usage():
    """Bad queries and command lines: exit 2 with a message, never a signal."""
    r = top("-q", "ReqURL ~ ", "-1")
    check(r.returncode == 2 and b"^" in r.stderr, f"bad query: exit 2 with a caret ({r.stderr!r})")
    for args in (["--bogus"], ["-p", "0"], ["-p", "x"], ["-p", "-3"], ["-i", "NoSuchTag"], ["-x", "Nope*"],
                 ["-I", "ReqURL:("], ["-X", "[z-a]"], ["-c", "-b"], ["-g", "nope"], ["-t", "later"], ["-k", "x"],
                 ["-k", "-1"], ["-R", "x/y"], ["-T", "-1"], ["-n"], ["stray"]):
        r = top("-1", *args)
        check(r.returncode == 2 and b"ringlog-top:" in r.stderr,
              f"{args}: exit 2 with a message ({r.returncode}, {r.stderr!r})")
    r = top("--help")
    check(r.returncode == 0 and b"-p PERIOD" in r.stdout and b"Exit codes" in r.stdout, "--help")
    r = top("-V")
    check(r.returncode == 0 and r.stdout.startswith(b"ringlog-top"), "-V")
    # The exit codes are documented in ringlog-top(1).
    page = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "man", "ringlog-top.1")).read()
    exits = page.split(".SH EXIT STATUS", 1)[-1].split("\n.SH ", 1)[0]
    check(all(f"\n.B {c}\n" in exits for c in "012") and "Bad command line" in exits,
          "ringlog-top(1) documents exit codes 0, 1 and 2")


def case_no_wait():
    n, rc = procs.sleeps([TOP, "-n", "nosuch", "-1"], ENV)
    check(rc == 1 and n == 0, f"missing ring without -t: exit 1 at once, no sleep ({rc}, {n} sleeps)")
    n, rc = procs.sleeps([TOP, "-n", "nosuch", "-1", "-t", "0.5"], ENV)
    check(rc == 1 and n > 0, f"missing ring with -t 0.5: waits (sleeps), then exit 1 ({rc}, {n} sleeps)")


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    sys.exit(checks.run_cases(checks.cases_of(globals()), CASE))
