#!/usr/bin/env python3
"""ringlog-dump's command line: dump modes, --info, --json, exit codes, bad input,
read-only dumping, and --repair (copy and in place) of crash states made by editing
a ring's bytes at the offsets of docs/FORMAT.md.
One case per ctest entry (dump_tool_tests/<case>), each on a fresh ring of known lines.
Usage: dump_cli_test.py CASE RINGLOG_DUMP DUMP_TEST_WRITER WORKDIR [RINGLOG]
  modes            --raw, -l, --json, --info, decoded records; dumping never writes
  usage            usage errors (2) and unreadable input (3)
  crash            a dead writer's tail lock and a dead reader's pin: dump, --info, --repair
  live_writers     a live lock holder or writer: not damage; --in-place refused
  damaged          damaged framing: the dump stops, --scan goes on, repair pads it
  haproxy_layouts  HAProxy 3.0+ layouts (v2, v2a) and their offsets out of range
  syscalls         every dump mode opens the ring O_RDONLY and maps it PROT_READ (strace)
With RINGLOG (the live tail), decoded records must print exactly as `ringlog -d -g raw`.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import checks  # noqa: E402
from checks import check, need, skip  # noqa: E402

HEADER = 24576
TAIL, OWNER, OWNER_SAVED_RC, HEAD = 64, 112, 120, 128
WRITERS, READERS, SLOT = 4096, 20480, 64
LOCK = 1 << 63

def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, timeout=60)


def u64(buf, off):
    return struct.unpack_from("<Q", buf, off)[0]


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


CASE, TOOL, WRITER, WORK = sys.argv[1:5]
TAIL_TOOL = sys.argv[5] if len(sys.argv) > 5 else None  # the live tail, when built
RING = os.path.join(WORK, "ring")
LINES = ["first line", "second\nwith a newline", "third \u00e9t\u00e9", "x" * 300]


def setup():
    """A fresh ring of known lines in the case's own WORK directory."""
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    subprocess.run([WRITER, RING, "8192", *LINES], check=True, timeout=30)


def case_syscalls():
    """The system calls say so for every mode: the ring is opened O_RDONLY and mapped
    PROT_READ (as root, a 0444 file could still be opened for writing)."""
    tool, ring, work = TOOL, RING, WORK
    strace = need("strace")
    size = os.path.getsize(ring)
    for mode in (["-r"], ["-d"], ["-i"], ["-i", "-j"], ["-r", "-j", "-s", "-l"]):
        log = os.path.join(work, "strace.log")
        # LeakSanitizer cannot run under ptrace: off for this run in the ASan build.
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        st = subprocess.run([strace, "-f", "-e", "trace=openat,open,mmap", "-o", log, tool, *mode, ring],
                            capture_output=True, timeout=60, env=env)
        if st.returncode != 0 and b"ptrace" in st.stderr:
            skip("strace cannot trace here (ptrace refused)")
        calls = open(log).read().splitlines()
        opens = [c for c in calls if f'"{ring}"' in c]
        check(opens and all("O_RDONLY" in c and "O_RDWR" not in c and "O_WRONLY" not in c for c in opens),
              f"{mode}: ring opened {opens}")
        shared = [c for c in calls if "MAP_SHARED" in c]
        check(len(shared) == 1 and f"mmap(NULL, {size}, PROT_READ, MAP_SHARED," in shared[0],
              f"{mode}: shared mappings {shared}")


def case_modes():
    """--raw, -l, --json, --info, decoded records (as `ringlog -d -g raw` prints them); dumping never writes."""
    tool, writer, work, ring, lines, tail_tool = TOOL, WRITER, WORK, RING, LINES, TAIL_TOOL
    # -- dump modes
    r = run(tool, "--raw", ring)
    check(r.returncode == 0, f"--raw exit {r.returncode}: {r.stderr}")
    check(r.stdout.decode() == "".join(l + "\n" for l in lines), f"--raw output {r.stdout!r}")
    r = run(tool, "-r", "-l", ring)
    check(r.stdout.decode().split("\n")[1] == "second\r\vwith a newline", f"-l output {r.stdout!r}")
    j = json.loads(run(tool, "-r", "--json", ring).stdout)
    check([m["payload"] for m in j["messages"]][:2] == lines[:2] and j["complete"], f"--json {j}")
    info = run(tool, "--info", ring)
    check(info.returncode == 0 and b"layout               ringlog" in info.stdout, f"--info {info.stdout!r}")
    ji = json.loads(run(tool, "-i", "-j", ring).stdout)
    check(ji["layout"] == "ringlog" and ji["messages"] == 4 and ji["header_len"] == HEADER
          and ji["counters"]["msgs_written"] == 4 and ji["locked"] is False, f"--info --json {ji}")

    # Records print like `ringlog -g raw` (vxid right-aligned, tag, c, payload).
    rec = os.path.join(work, "records")
    subprocess.run([writer, rec, "8192", "--records", "/a", "/b"], check=True, timeout=30)
    out = run(tool, rec).stdout.decode().splitlines()
    check(len(out) == 2 and out[0].split() == ["1004", "ReqURL", "c", "/a"], f"records {out}")
    if tail_tool:
        t = subprocess.run([tail_tool, "-n", rec, "-d", "-g", "raw"], capture_output=True, timeout=30)
        d = run(tool, rec)
        check(t.returncode == 0 and d.stdout == t.stdout, f"ringlog -d -g raw printed {t.stdout!r}, ringlog-dump {d.stdout!r}")
    jr = json.loads(run(tool, "--records", "--json", rec).stdout)
    check(jr["records"][1]["tag"] == "ReqURL" and jr["records"][1]["payload"] == "/b", f"records json {jr}")

    # -- dumping never writes: a read-only file, unchanged bytes and mtime.
    before = hashlib.sha256(open(ring, "rb").read()).hexdigest()
    mtime = os.stat(ring).st_mtime_ns
    os.chmod(ring, 0o444)
    r = run(tool, "-r", ring)
    check(r.returncode == 0, f"dump of a read-only file: {r.returncode} {r.stderr}")
    os.chmod(ring, 0o644)
    check(hashlib.sha256(open(ring, "rb").read()).hexdigest() == before and os.stat(ring).st_mtime_ns == mtime,
          "dump changed the file")

    # (The system calls of each mode are the syscalls case.)


def case_usage():
    """Usage errors exit 2, unreadable input 3, with a message."""
    tool, writer, work, ring, lines, tail_tool = TOOL, WRITER, WORK, RING, LINES, TAIL_TOOL
    # -- usage errors (2) and unreadable input (3)
    for args in (["--bogus", ring], [], ["--raw", "--records", ring], ["--repair", ring],
                 ["--repair", "-o", os.path.join(work, "x"), "--in-place", ring], ["-o", "x", ring],
                 ["--layout", "nonsense", ring], ["--repair", "-o", ring, ring]):
        r = run(tool, *args)
        check(r.returncode == 2 and r.stderr, f"{args}: exit {r.returncode} (want 2)")
    garbage = os.path.join(work, "garbage")
    with open(garbage, "wb") as f:
        f.write(os.urandom(5000))
    empty = os.path.join(work, "empty")
    open(empty, "wb").close()
    for path in (os.path.join(work, "missing"), garbage, empty, work):
        r = run(tool, path)
        check(r.returncode == 3 and r.stderr.startswith(b"ringlog-dump: "), f"{path}: exit {r.returncode} {r.stderr}")
    check(run(tool, "--help").returncode == 0, "--help")


def case_crash():
    """A tail locked by a dead writer and a dead pinned reader: dumped, described, repaired (copy, in place)."""
    tool, writer, work, ring, lines, tail_tool = TOOL, WRITER, WORK, RING, LINES, TAIL_TOOL
    # -- a crash state: the tail locked by a dead writer that had tagged the tail.
    crashed = os.path.join(work, "crashed")
    shutil.copy(ring, crashed)
    with open(crashed, "r+b") as f:
        buf = bytearray(f.read())
        dead = dead_pid()
        tail = u64(buf, TAIL)
        struct.pack_into("<I", buf, WRITERS + 5 * SLOT, dead)
        struct.pack_into("<Q", buf, OWNER, dead << 32 | 6)
        struct.pack_into("<I", buf, OWNER_SAVED_RC, 0)
        buf[HEADER + (tail - 1) % 8192] = 0xFF
        struct.pack_into("<Q", buf, TAIL, tail | LOCK)
        # and a dead pinned reader holding the head
        struct.pack_into("<I", buf, READERS + 3 * SLOT, dead)
        struct.pack_into("<Q", buf, READERS + 3 * SLOT + 16, u64(buf, HEAD))
        buf[HEADER + u64(buf, HEAD) % 8192] = 1
        f.seek(0)
        f.write(buf)
    r = run(tool, "-r", crashed)
    check(r.returncode == 1 and r.stdout.decode() == "".join(l + "\n" for l in lines),
          f"dump of a stale lock: {r.returncode} {r.stdout!r}")
    ji = json.loads(run(tool, "-i", "-j", crashed).stdout)
    check(ji["locked"] and ji["lock_owner"]["pid"] == dead and not ji["lock_owner"]["alive"]
          and ji["readers"][0]["alive"] is False, f"--info of a crash: {ji}")
    fixed = os.path.join(work, "fixed")
    rep = run(tool, "--repair", "-j", "-o", fixed, crashed)
    jr = json.loads(rep.stdout)
    check(rep.returncode == 1 and jr["kept_msgs"] == 4 and any("stale tail lock" in x for x in jr["fixed"])
          and any("reader slot 3" in x for x in jr["fixed"]), f"repair -o: {rep.returncode} {jr}")
    check(run(tool, "-r", fixed).returncode == 0, "the repaired copy is not clean")
    check(run(tool, "--repair", "-o", os.path.join(work, "again"), fixed).returncode == 0, "a clean ring repairs to 0")
    rep = run(tool, "--repair", "--in-place", crashed)
    check(rep.returncode == 1 and b"kept 4 messages" in rep.stdout, f"--in-place: {rep.returncode} {rep.stdout!r}")
    r = run(tool, "-r", crashed)
    check(r.returncode == 0 and r.stdout.decode() == "".join(l + "\n" for l in lines), "in-place result")


def case_live_writers():
    """A tail lock or a writer slot of a live process: a writer at work, not damage; in place refused."""
    tool, writer, work, ring, lines, tail_tool = TOOL, WRITER, WORK, RING, LINES, TAIL_TOOL
    # -- a tail lock held by a live process: a writer at work, not damage.
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        held = os.path.join(work, "held")
        shutil.copy(ring, held)
        with open(held, "r+b") as f:
            buf = bytearray(f.read())
            struct.pack_into("<Q", buf, OWNER, sleeper.pid << 32)  # no writer slot: judged by pid
            struct.pack_into("<Q", buf, TAIL, u64(buf, TAIL) | LOCK)
            f.seek(0)
            f.write(buf)
        r = run(tool, "-r", held)
        check(r.returncode == 0 and r.stdout.decode() == "".join(l + "\n" for l in lines), f"live lock dump: {r.returncode}")
        ji = json.loads(run(tool, "-i", "-j", held).stdout)
        check(ji["locked"] and ji["lock_owner"] == {"pid": sleeper.pid, "slot": -1, "alive": True}, f"live lock --info: {ji}")
        r = run(tool, "--repair", "--in-place", held)
        check(r.returncode == 3 and f"live process {sleeper.pid}".encode() in r.stderr, f"live lock in place: {r.returncode} {r.stderr!r}")
    finally:
        sleeper.kill()
        sleeper.wait()

    # -- in place is refused while a writer recorded in the file is alive.
    live = subprocess.Popen(["sleep", "30"])
    try:
        busy = os.path.join(work, "busy")
        shutil.copy(ring, busy)
        with open(busy, "r+b") as f:
            f.seek(WRITERS)
            f.write(struct.pack("<IIQ", live.pid, 0, 0))  # start time 0: judged by pid only
        r = run(tool, "--repair", "--in-place", busy)
        check(r.returncode == 3 and str(live.pid).encode() in r.stderr, f"live writer: {r.returncode} {r.stderr}")
    finally:
        live.kill()
        live.wait()


def case_damaged():
    """Damaged framing: the dump stops (1), --scan goes on, repair pads the damage."""
    tool, writer, work, ring, lines, tail_tool = TOOL, WRITER, WORK, RING, LINES, TAIL_TOOL
    # -- damaged framing: the dump stops (1), --scan goes on, repair pads the damage.
    damaged = os.path.join(work, "damaged")
    shutil.copy(ring, damaged)
    with open(damaged, "r+b") as f:
        head = u64(bytearray(f.read(HEADER)), HEAD)
        second = head + 1 + 1 + len(lines[0])  # RC of the second message
        f.seek(HEADER + second % 8192 + 1)
        f.write(b"\xf5\xff\xff\xff")
    r = run(tool, "-r", damaged)
    check(r.returncode == 1 and r.stdout.decode() == lines[0] + "\n" and b"stopped before the tail" in r.stderr,
          f"damaged dump: {r.returncode} {r.stdout!r} {r.stderr!r}")
    check(f"bad framing at position {second}".encode() in r.stderr, f"damage position: {r.stderr!r}")
    r = run(tool, "-r", "--scan", damaged)
    check(r.returncode == 1 and r.stdout.decode().splitlines()[-1] == lines[-1], f"--scan: {r.stdout!r}")
    rep = run(tool, "--repair", "--in-place", damaged)
    check(rep.returncode == 1 and run(tool, "-r", damaged).returncode == 0, f"repair of damage: {rep.stdout!r}")


def case_haproxy_layouts():
    """HAProxy 3.0+ rings from the documented layouts, and their offsets out of range."""
    tool, writer, work, ring, lines, tail_tool = TOOL, WRITER, WORK, RING, LINES, TAIL_TOOL
    # -- HAProxy 3.0+ files built from the documented layout (v2: 32-byte header, v2a:
    # cache-aligned 192-byte header), wrapping around the end of the area, tail locked.
    msgs = [b"GET /a HTTP/1.1", b"multi\nline", b"z" * 250]
    framed = b"".join(b"\0" + (bytes([len(m)]) if len(m) < 240 else bytes([0xF0 | (len(m) & 15), (len(m) - 240) >> 4])) + m
                      for m in msgs) + b"\0"
    for aligned in (False, True):
        rsvd, size, head = (192 if aligned else 32), 512, 400
        buf = bytearray(rsvd + size)
        for i, b in enumerate(framed):
            buf[rsvd + (head + i) % size] = b
        tail = (head + len(framed)) % size | LOCK
        struct.pack_into("<QQ", buf, 0, size, rsvd)
        struct.pack_into("<Q", buf, 64 if aligned else 16, tail)
        struct.pack_into("<Q", buf, 128 if aligned else 24, head)
        v2 = os.path.join(work, "v2a" if aligned else "v2")
        open(v2, "wb").write(buf)
        r = run(tool, "-l", v2)
        check(r.returncode == 0 and r.stdout == b"GET /a HTTP/1.1\nmulti\r\vline\n" + b"z" * 250 + b"\n",
              f"{v2}: {r.returncode} {r.stdout!r} {r.stderr!r}")
        ji = json.loads(run(tool, "-i", "-j", v2).stdout)
        check(ji["layout"] == ("haproxy-v2a" if aligned else "haproxy-v2") and ji["locked"] and ji["head"] == head,
              f"{v2} --info: {ji}")
        check(run(tool, "--layout", "haproxy-v1", v2).returncode in (1, 3), f"{v2} read as v1 must not look clean")
        # HAProxy records no writer: a process that maps the file writable (as HAProxy
        # does) makes --in-place refuse; a copy may still be made.
        # It holds the mapping until its stdin closes (killed below by pid).
        holder = subprocess.Popen([sys.executable, "-c", "import mmap, sys\n"
                                   "f = open(sys.argv[1], 'r+b'); m = mmap.mmap(f.fileno(), 0)\n"
                                   "print('mapped', flush=True); sys.stdin.read()", v2],
                                  stdout=subprocess.PIPE, stdin=subprocess.PIPE)
        try:
            check(holder.stdout.readline() == b"mapped\n", "the mapping process did not start")
            rep = run(tool, "--repair", "--in-place", v2)
            check(rep.returncode == 3 and f"process {holder.pid} ".encode() in rep.stderr
                  and json.loads(run(tool, "-i", "-j", v2).stdout)["locked"],
                  f"{v2} in place while mapped: {rep.returncode} {rep.stderr!r}")
            check(run(tool, "--repair", "-o", v2 + ".copy", v2).returncode == 1, f"{v2}: copy while mapped")
        finally:
            holder.kill()
            holder.wait()
        rep = run(tool, "--repair", "--in-place", v2)
        check(rep.returncode == 1 and not json.loads(run(tool, "-i", "-j", v2).stdout)["locked"], f"{v2} repair")

    # -- HAProxy offsets out of range: with the tail gone nothing can be read (3; --info
    # still describes the file); a bad head is rebuilt by scanning (1, and no empty
    # messages made of never-written zeros), then repaired.
    for what in ("tail", "head"):
        rsvd, size, head = 32, 512, 40
        buf = bytearray(rsvd + size)
        for i, b in enumerate(framed):
            buf[rsvd + head + i] = b
        tail = head + len(framed)
        struct.pack_into("<QQQQ", buf, 0, size, rsvd, 9999 if what == "tail" else tail, 9999 if what == "head" else head)
        bad = os.path.join(work, "bad-" + what)
        open(bad, "wb").write(buf)
        r = run(tool, bad)
        ji = run(tool, "-i", "-j", bad)
        info = json.loads(ji.stdout)
        check(ji.returncode == 1 and info["positions_ok"] is False and info[what] == 9999,
              f"{bad} --info: {ji.returncode} {info}")
        if what == "tail":
            check(r.returncode == 3 and r.stdout == b"" and b"where the messages end is unknown" in r.stderr,
                  f"{bad}: {r.returncode} {r.stdout!r} {r.stderr!r}")
            r = run(tool, "--repair", "-o", bad + ".fixed", bad)
            check(r.returncode == 3 and not os.path.exists(bad + ".fixed"), f"{bad} repair: {r.returncode} {r.stderr!r}")
        else:
            want = b"".join(m + b"\n" for m in msgs)
            check(r.returncode == 1 and r.stdout == want and b"head rebuilt" in r.stderr,
                  f"{bad}: {r.returncode} {r.stdout!r} {r.stderr!r}")
            r = run(tool, "--repair", "--in-place", bad)
            check(r.returncode == 1 and b"rebuilt by scanning" in r.stdout, f"{bad} repair: {r.returncode} {r.stdout!r}")
            r = run(tool, bad)
            check(r.returncode == 0 and r.stdout == want, f"{bad} after repair: {r.returncode} {r.stdout!r}")


if __name__ == "__main__":
    setup()
    rc = checks.run_cases(checks.cases_of(globals()), CASE)
    if rc == 0:
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(rc)
