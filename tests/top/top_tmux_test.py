#!/usr/bin/env python3
"""The interactive ringlog-top screen, driven through tmux (send-keys, capture-pane):
the header and rows under a live writer (decaying counts, highest first, in
proportion to the request mix), terminal resizes (smaller, too small, back),
tool messages on the status line when the writer recreates the ring, -d freezing
the list at (EOF), a missing ring reported after the screen closes, and q quitting
with exit code 0.

usage: top_tmux_test.py RINGLOG_TOP WRITER WORKDIR
"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import procs  # noqa: E402
import tmux as tmuxlib  # noqa: E402
from checks import FAILURES as failures, check  # noqa: E402
from tmux import exit_code  # noqa: E402

TOP, WRITER, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
SOCK = f"ringlog-top-test-{os.getpid()}"

ROW = re.compile(r"^\s*(\d+\.\d\d) (\S+)\s+(\S.*?)\s*$")
tmux = tmuxlib.Tmux(SOCK)
capture = tmux.capture


def wait_for(session, pred, what, timeout=15.0):
    return tmux.wait_screen(session, pred, what, timeout)


def rows(screen):
    out = []
    for l in screen.split("\n")[2:]:
        m = ROW.match(l)
        if m:
            out.append((float(m.group(1)), m.group(2), m.group(3)))
    return out


def start(session, args, marker, width=100, height=30):
    tmuxlib.run_in_session(tmux, session, f"RINGLOG_DIR={WORK} TERM=xterm {TOP} {args}", marker, width, height)


def start_writer(name, *extra):
    ready = os.path.join(WORK, name + ".ready")
    return procs.start_ready([WRITER, "--ring", procs.ring_path(WORK, name), "--ready", ready, *extra], ready,
                             "writer")


def stop(p):
    procs.stop(p, timeout=10)


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
writer = start_writer("live", "--live", "--rate", "150")
try:
    # ---- the live list --------------------------------------------------------------------------
    marker = os.path.join(WORK, "live.rc")
    start("live", "-n live -p 5 -i ReqURL,RespStatus", marker)
    ring = os.path.join(WORK, "live", "ring")
    s = wait_for("live", lambda s: "list length" in s and len(rows(s)) >= 6, "header and rows")
    first = s.split("\n")[0]
    check(first.startswith("list length ") and first.rstrip().endswith(ring), "header: list length and the ring", s)
    # Counts settle in proportion to the mix: "/" and "/index.html" are 2/6 of the
    # requests each, "/img.png" and "/api/items" 1/6 each; 200 is 4/6 of the statuses.
    # Settled once even the rarest URL has been counted a good number of times.
    s = wait_for("live", lambda s: len(rows(s)) >= 7 and
                 {(t, k): c for c, t, k in rows(s)}.get(("ReqURL", "/img.png"), 0) >= 20, "all pairs listed", 30)
    rs = rows(s)
    counts = [c for c, _, _ in rs]
    check(counts == sorted(counts, reverse=True), "rows sorted by count", s)
    byk = {(t, k): c for c, t, k in rs}
    check(rs[0][1:] == ("RespStatus", "200"), "the busiest pair first", s)
    check(set(k for c, t, k in rs[1:3]) == {"/", "/index.html"}, "then the two frequent URLs", s)
    rare = byk.get(("ReqURL", "/img.png"), 0)
    check(rare > 0 and byk.get(("ReqURL", "/"), 0) / rare > 1.3, "a URL twice as frequent counts about twice", s)
    check(all(re.match(r"^\s*\d+\.\d\d ReqURL\s{2,}/", l) or "ReqURL" not in l for l in s.split("\n")[2:]),
          "the tag column is padded", s)

    # ---- resizes: smaller, too small, back -----------------------------------------------------------
    tmux("resize-window", "-t", "live", "-x", "50", "-y", "8")
    s = wait_for("live", lambda s: "list length" in s and 1 <= len(rows(s)) <= 6 and
                 max(len(l) for l in s.split("\n")) <= 50, "a small terminal shows fewer rows")
    tmux("resize-window", "-t", "live", "-x", "20", "-y", "3")
    wait_for("live", lambda s: "terminal too small" in s, "a tiny terminal says so")
    tmux("resize-window", "-t", "live", "-x", "100", "-y", "30")
    wait_for("live", lambda s: "list length" in s and len(rows(s)) >= 7, "full list again after the resize")

    # ---- the writer recreates the ring: the message shows on the status line -------------------------
    stop(writer)
    os.unlink(ring)
    writer = start_writer("live", "--live", "--rate", "150")
    s = wait_for("live", lambda s: "reattached" in s.split("\n")[1], "reattach message on the status line", 20)
    check(os.path.exists(marker) is False, "still running after the reattach", s)

    # ---- q quits with 0; the messages are replayed on the terminal -----------------------------------
    tmux("send-keys", "-t", "live", "q")
    code = exit_code(marker)
    check(code == "0", f"q quits with exit code 0 (got {code})")
    s = capture("live")
    check("reattached" in s, "captured messages printed after the screen closes", s)

    # ---- -d on a fixed ring: the list freezes at (EOF) until q ----------------------------------------
    os.makedirs(os.path.join(WORK, "fixed"))
    subprocess.run([WRITER, "--ring", os.path.join(WORK, "fixed", "ring"), "--fixed"], check=True, timeout=30)
    marker = os.path.join(WORK, "eof.rc")
    start("eof", "-n fixed -d -f -i ReqHeader", marker, 80, 20)
    s = wait_for("eof", lambda s: "(EOF)" in s.split("\n")[0] and len(rows(s)) >= 5, "(EOF) in the header")
    want = {("ReqHeader", "User-Agent"): 6.0, ("ReqHeader", "Host"): 5.0, ("ReqHeader", "Referer"): 3.0}
    got = {(t, k): c for c, t, k in rows(s)}
    check(all(got.get(k) == v for k, v in want.items()), f"-f first fields, plain counts at EOF: {got}", s)
    # A test over time itself: at EOF the counts must not decay, and only time shows
    # that they do not (two and a half -p periods of the default 1 s would have).
    time.sleep(2.5)
    s2 = capture("eof")
    check(rows(s2) == rows(s), "counts stay frozen after the end of the input", s2)
    tmux("send-keys", "-t", "eof", "Q")
    check(exit_code(marker) == "0", "Q quits too")

    # ---- a missing ring: exit 1, the message printed once the screen is gone -------------------------
    marker = os.path.join(WORK, "missing.rc")
    start("missing", "-n nosuch", marker)
    code = exit_code(marker)
    check(code == "1", f"missing ring: exit 1 (got {code})")
    s = wait_for("missing", lambda s: "no ring at" in s, "missing ring message on the terminal")
finally:
    tmux("kill-server", check_rc=False)
    stop(writer)

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all ringlog-top screen checks passed")
