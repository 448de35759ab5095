#!/usr/bin/env python3
"""The interactive ringlog-stat screen, driven through tmux (send-keys, capture-pane):
header lines and columns, keys (arrows, PgDn, +/-, v, d, /, q), terminal resizes, and
reattaching when the writer restarts.

usage: stat_tmux_test.py RINGLOG_STAT DEMO_WRITER WORKDIR
"""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import procs  # noqa: E402
import tmux as tmuxlib  # noqa: E402
from checks import FAILURES as failures, check  # noqa: E402

STAT, WRITER, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
SOCK = f"ringlog-stat-test-{os.getpid()}"
SESSION = "stat"


tmux = tmuxlib.Tmux(SOCK)


def capture():
    return tmux.capture(SESSION)


def keys(*k):
    tmux.keys(SESSION, *k)


def wait_for(pred, what, timeout=10.0):
    """Polls the screen until pred(screen) holds; records a failure otherwise."""
    return tmux.wait_screen(SESSION, pred, what, timeout)


def start_writer(name):
    ready = os.path.join(WORK, name + ".ready")
    return procs.start_ready([WRITER, "--dir", procs.instance_dir(WORK, name), "--ready", ready, "--threads", "2"],
                             ready, "demo writer")


def selected(screen):
    """The name of the selected counter, from the description line."""
    lines = screen.rstrip("\n").split("\n")
    m = re.match(r"^(\S+): ", lines[-2] if len(lines) >= 2 else "")
    return m.group(1) if m else None


def row_names(screen):
    return [l.split()[0] for l in screen.split("\n")[4:-3] if l.strip()]


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
writer = start_writer("live")
marker = os.path.join(WORK, "exit-code")
try:
    tmuxlib.run_in_session(tmux, SESSION, f"RINGLOG_DIR={WORK} TERM=xterm {STAT} -n live --interval 0.2", marker,
                           150, 40, linger=30)

    # Wait for a whole frame (curses draws incrementally: the status bar comes last).
    s = wait_for(lambda s: "AVG_1000" in s and "MAIN.client_req" in s and "Refresh 0.2s" in s
                 and "(running)" in s, "screen with columns, counters and status bar")
    for word in ("Uptime:", "Hitrate n:", "avg(n):", "NAME", "CURRENT", "CHANGE", "AVERAGE", "AVG_10",
                 "AVG_100", "AVG_1000"):
        check(word in s, f"screen shows {word}", s)
    check(f"Writer:  pid {writer.pid} (running)" in s, "writer pid and state", s)
    check("Level info" in s and "Zero hidden" in s and "Refresh 0.2s" in s, "status bar", s)
    # Live rates: CHANGE and averages of a busy counter are non-zero, the hit rate ~0.75.
    s = wait_for(lambda s: re.search(r"avg\(n\):\s+0\.[67]\d+", s) is not None, "hit rate about 0.75", 15)
    line = next((l for l in s.split("\n") if l.startswith("MAIN.client_req ")), "")
    nums = line.split()[1:]
    check(len(nums) == 6 and all(float(x) > 0 for x in nums), "client_req: six positive columns: " + line, s)
    # Zero counters hidden until d; diag/debug counters until v.
    check("MAIN.sess_dropped" not in s, "zero counter hidden", s)
    keys("d")
    s = wait_for(lambda s: "Zero shown" in s and "MAIN.sess_dropped" in s, "d shows zero counters")
    keys("d")
    s = wait_for(lambda s: "Zero hidden" in s, "d hides them again")
    check("RING.writer_threads" not in s, "diag counter hidden at level info", s)
    keys("v")
    s = wait_for(lambda s: "Level diag" in s and "RING.writer_threads" in s, "v: diag counters")
    check("RING.area_size" not in s, "debug counter hidden at level diag", s)
    keys("v")
    s = wait_for(lambda s: "Level debug" in s and "RING.area_size" in s, "v: debug counters")
    keys("v")
    s = wait_for(lambda s: "Level info" in s, "v wraps to info")
    # Refresh interval.
    keys("+")
    wait_for(lambda s: "Refresh 0.5s" in s, "+ slows the refresh")
    keys("-")
    wait_for(lambda s: "Refresh 0.2s" in s, "- speeds it up")
    # Cursor: arrows move the selection (its description is shown at the bottom).
    keys("g")
    s = wait_for(lambda s: selected(s) == "STAT.uptime", "first row selected")
    keys("Down")
    s = wait_for(lambda s: selected(s) not in (None, "STAT.uptime"), "Down moves the selection")
    second = selected(s)
    check(second == row_names(s)[1], f"selection is the second row ({second})", s)
    keys("Up")
    wait_for(lambda s: selected(s) == "STAT.uptime", "Up moves back")
    # Search.
    keys("/")
    wait_for(lambda s: s.rstrip("\n").split("\n")[-1].startswith("/"), "/ opens the search prompt")
    keys("VBE.web1", "Enter")
    s = wait_for(lambda s: "Search: VBE.web1" in s, "search applied")
    names = row_names(s)
    check(names and all(n.startswith("VBE.web1.") for n in names), f"only matching rows: {names}", s)
    keys("/")
    for _ in range(len("VBE.web1")):
        keys("BSpace")
    keys("Enter")
    s = wait_for(lambda s: "Search:" not in s and "MAIN.client_req" in s, "search cleared")
    # Resize smaller: fewer columns, still working; PgDn pages through a short list.
    tmux("resize-window", "-t", SESSION, "-x", "60", "-y", "14")
    s = wait_for(lambda s: "NAME" in s and "CURRENT" in s and "AVG_1000" not in s and len(s.split("\n")) <= 15,
                 "narrow screen drops columns")
    keys("d", "v", "v")  # every counter: a long list
    s = wait_for(lambda s: "Level debug" in s and "Zero shown" in s, "long list")
    m = re.search(r"(\d+)-(\d+)/(\d+)", s)
    check(m is not None and m.group(1) == "1", "range shown from 1", s)
    keys("NPage")
    s = wait_for(lambda s: re.search(r" (\d+)-\d+/\d+", s) and re.search(r" (\d+)-\d+/\d+", s).group(1) != "1",
                 "PgDn pages down")
    keys("PPage")
    wait_for(lambda s: re.search(r" 1-\d+/\d+", s) is not None, "PgUp pages back")
    tmux("resize-window", "-t", SESSION, "-x", "20", "-y", "5")
    wait_for(lambda s: "too small" in s, "tiny terminal message")
    tmux("resize-window", "-t", SESSION, "-x", "150", "-y", "40")
    s = wait_for(lambda s: "AVG_1000" in s and "MAIN.client_req" in s, "full size again")
    keys("d", "v")
    wait_for(lambda s: "Level info" in s and "Zero hidden" in s, "back to defaults")

    # Writer restart: the screen notices it is gone, then reattaches to the new one.
    old = writer.pid
    procs.stop(writer, timeout=10)
    wait_for(lambda s: f"pid {old} (not running)" in s, "writer gone is shown")
    writer = start_writer("live")
    s = wait_for(lambda s: f"Writer:  pid {writer.pid} (running)" in s, "reattached to the restarted writer", 15)
    # Instance removed altogether: waits, then comes back.
    procs.stop(writer, timeout=10)
    shutil.rmtree(os.path.join(WORK, "live"))
    wait_for(lambda s: "instance gone" in s, "instance removed is shown")
    writer = start_writer("live")
    wait_for(lambda s: f"Writer:  pid {writer.pid} (running)" in s, "back after the instance reappears", 15)

    keys("q")
    code = tmuxlib.exit_code(marker)
    check(code == "0", f"q quits with exit code 0 (got {code})")
finally:
    tmux.kill_server()
    procs.stop(writer, timeout=10)

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all ringlog-stat screen checks passed")
