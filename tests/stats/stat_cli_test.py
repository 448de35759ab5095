#!/usr/bin/env python3
"""ringlog-stat's one-shot outputs against a demo writer with known values, one case per
ctest entry (stat_tool_tests/<case>), never a crash:

usage: stat_cli_test.py CASE RINGLOG_STAT DEMO_WRITER WORKDIR
  missing     a missing instance: exit 1 with its name; -t 1 waits a second first
  usage       bad command lines exit 2 with a message; --help, -V
  one_shot    -1: name value rate description, rates against the uptime, group order
  json        -j parsed back by json, varnishstat's shape
  prometheus  --prometheus parsed by prometheus_client's text parser
  filters     -f inclusion and ^exclusion globs, -l, -n as a directory or a file
  damaged     a damaged stats file: exit 3 with the reason
  late        -t: a reader started before its writer waits for it
  no_wait     a missing instance fails without waiting (no sleep, strace), unless -t
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import checks  # noqa: E402
import procs  # noqa: E402
from checks import check  # noqa: E402

CASE, STAT, WRITER, WORK = sys.argv[1:5]
ENV = dict(os.environ, RINGLOG_DIR=WORK)


def stat(*args, timeout=30):
    return subprocess.run([STAT, *args], capture_output=True, text=True, env=ENV, timeout=timeout)


def start_writer(name, *extra):
    ready = os.path.join(WORK, name + ".ready")
    return procs.start_ready([WRITER, "--dir", procs.instance_dir(WORK, name), "--ready", ready, *extra], ready,
                             "demo writer")


@contextmanager
def fixed_writer():
    """The instance "fixed": a demo writer holding known values while the case reads it."""
    w = start_writer("fixed", "--fixed")
    try:
        yield w
    finally:
        procs.stop(w, timeout=10)


def one_shot_rows():
    """-1 of the fixed instance as {name: (value, rate, description)}; a line of another
    shape is a failed check."""
    r = stat("-n", "fixed", "-1")
    check(r.returncode == 0, "-1 exits 0: " + r.stderr)
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(\S+)\s+(-?[0-9.]+)\s+(\.|[0-9.]+) (.*)$", line)
        check(m is not None, "-1 line shape: " + line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3), m.group(4))
    return rows


def case_missing():
    r = stat("-n", "nosuch", "-1")
    check(r.returncode == 1, f"missing instance exits 1 (got {r.returncode})")
    check("no ringlog instance" in r.stderr and "nosuch" in r.stderr, "missing instance message: " + r.stderr)
    # A test of the -t timeout itself: a lower bound on the wait, never an upper one.
    # (That it fails without waiting when -t is not given is the no_wait case.)
    t0 = time.monotonic()
    r = stat("-n", "nosuch", "-1", "-t", "1")
    took = time.monotonic() - t0
    check(r.returncode == 1 and took >= 0.9, f"-t 1 waits a second then exits 1 ({took:.2f}s, {r.returncode})")


def case_usage():
    """Bad command lines: exit 2 and a message, never a signal."""
    for args in (["--bogus"], ["-1", "-j"], ["-j", "--prometheus"], ["-f"], ["-n"], ["-t", "soon"], ["-t", "-3"],
                 ["-n", "a", "-n", "b"],
                 ["extra-arg"], ["--interval", "0"], ["--interval", "x"], ["-l", "-1"]):
        r = stat(*args)
        check(r.returncode == 2, f"{args}: exit 2 (got {r.returncode})")
        check("ringlog-stat:" in r.stderr and "--help" in r.stderr, f"{args}: error message: {r.stderr!r}")
    r = stat("--help")
    check(r.returncode == 0 and "--prometheus" in r.stdout, "--help exits 0 and lists options")
    r = stat("-V")
    check(r.returncode == 0 and "ringlog-stat" in r.stdout, "-V prints the version")


def case_one_shot():
    """-1: name value rate description, one line per counter."""
    with fixed_writer():
        rows = one_shot_rows()
        expect = {"MAIN.client_req": "1000", "MAIN.cache_hit": "600", "MAIN.cache_miss": "400",
                  "MAIN.sess_active": "5", "MAIN.s_resp_bodybytes": "4096", "MAIN.req_time": "1.000000",
                  "VBE.web1.req": "10", "VBE.web2.req": "20", "VBE.web1.happy": "5", "VBE.web2.conn": "2",
                  "RING.msgs_written": "3", "MAIN.sess_conn": "0"}
        for k, v in expect.items():
            check(k in rows and rows[k][0] == v, f"-1 {k} = {v} (got {rows.get(k)})")
        up = float(rows["STAT.uptime"][0])
        check(0 < up < 60 and rows["STAT.uptime"][1] == "1.00", "uptime and its rate of 1.00")
        rate = float(rows["MAIN.client_req"][1])
        check(abs(rate - 1000 / up) <= 0.01 * rate + 0.01, f"rate = value/uptime ({rate} vs {1000 / up})")
        check(rows["MAIN.sess_active"][1] == "." and rows["VBE.web1.happy"][1] == ".", "gauges and bitmaps rate '.'")
        check(rows["MAIN.client_req"][2] == "Good client requests received", "-1 description")
        names = list(rows)
        check(names[0] == "STAT.uptime" and names.index("MAIN.sess_conn") < names.index("VBE.web1.happy")
              < names.index("RING.msgs_written"), "counters in group order")

        # Not a terminal and no mode: the -1 output.
        r2 = stat("-n", "fixed")
        check(r2.returncode == 0 and r2.stdout.splitlines()[1:] and "MAIN.client_req" in r2.stdout,
              "no tty: prints like -1")


def case_json():
    """-j: valid JSON, varnishstat's shape, the same counters as -1."""
    with fixed_writer():
        rows = one_shot_rows()
        r = stat("-n", "fixed", "-j")
        check(r.returncode == 0, "-j exits 0")
        doc = json.loads(r.stdout)
        check(doc["version"] == 1, "json version 1")
        check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$", doc["timestamp"]) is not None, "json timestamp")
        cs = doc["counters"]
        for name, c in cs.items():
            check(set(c) == {"description", "flag", "format", "value"}, f"json keys of {name}")
            check(c["flag"] in "cgb" and c["format"] in ("i", "B", "b", "d"), f"json flag/format of {name}")
            check(isinstance(c["value"], (int, float)), f"json value of {name} is a number")
        check(cs["MAIN.client_req"]["value"] == 1000 and cs["MAIN.client_req"]["flag"] == "c"
              and cs["MAIN.client_req"]["format"] == "i", "json client_req")
        check(cs["MAIN.sess_active"]["value"] == 5 and cs["MAIN.sess_active"]["flag"] == "g", "json gauge")
        check(cs["MAIN.s_resp_bodybytes"]["format"] == "B" and cs["MAIN.s_resp_bodybytes"]["value"] == 4096,
              "json bytes")
        check(cs["MAIN.req_time"]["format"] == "d" and abs(cs["MAIN.req_time"]["value"] - 1.0) < 1e-9,
              "json duration")
        check(cs["VBE.web1.happy"]["flag"] == "b" and cs["VBE.web1.happy"]["format"] == "b"
              and cs["VBE.web1.happy"]["value"] == 5, "json bitmap")
        check(cs["RING.msgs_written"]["value"] == 3, "json RING group")
        check(set(cs) == set(rows), "json and -1 list the same counters")


def case_prometheus():
    """--prometheus: parsed by the real parser."""
    from prometheus_client.parser import text_string_to_metric_families
    with fixed_writer():
        r = stat("-n", "fixed", "--prometheus")
    check(r.returncode == 0, "--prometheus exits 0")
    fams = {f.name: f for f in text_string_to_metric_families(r.stdout)}

    def sample(fam, suffix="", **labels):
        f = fams.get(fam)
        if f is None:
            return None
        for s in f.samples:
            if s.name == fam + suffix and s.labels == {"ringlog_instance": "fixed", **labels}:
                return s.value
        return None

    check(fams["ringlog_main_client_req"].type == "counter", "prometheus counter type")
    check(sample("ringlog_main_client_req", "_total") == 1000, "prometheus client_req_total")
    check(fams["ringlog_main_sess_active"].type == "gauge" and sample("ringlog_main_sess_active") == 5,
          "prometheus gauge")
    check(sample("ringlog_main_s_resp_bodybytes", "_total") == 4096, "prometheus bytes counter")
    check(sample("ringlog_main_req_time_seconds", "_total") == 1.0, "prometheus seconds counter")
    check(sample("ringlog_vbe_req", "_total", ident="web1") == 10 and
          sample("ringlog_vbe_req", "_total", ident="web2") == 20, "prometheus ident labels")
    check(sample("ringlog_ring_msgs_written", "_total") == 3, "prometheus RING group")
    check(fams["ringlog_main_client_req"].documentation == "Good client requests received", "prometheus HELP")
    check(r.stdout.count("# TYPE ringlog_vbe_req_total ") == 1, "one TYPE line per family")
    check(sample("ringlog_up") == 1 and sample("ringlog_writer_running") == 1, "prometheus ringlog_up")


def case_filters():
    """-f inclusion and ^exclusion globs; -l; the instance as a directory or a file."""
    with fixed_writer():
        r = stat("-n", "fixed", "-1", "-f", "MAIN.*", "-f", "^MAIN.cache*")
        names = [l.split()[0] for l in r.stdout.splitlines()]
        check(names and all(n.startswith("MAIN.") and not n.startswith("MAIN.cache") for n in names)
              and "MAIN.client_req" in names, "-f include and ^exclude")
        r = stat("-n", "fixed", "-1", "-f", "^VBE.*", "-f", "^RING.*")
        names = [l.split()[0] for l in r.stdout.splitlines()]
        check("MAIN.client_req" in names and not any(n.startswith(("VBE.", "RING.")) for n in names),
              "-f exclusions only")
        r = stat("-n", "fixed", "-l", "-f", "VBE.web2.*")
        lines = r.stdout.splitlines()
        check(r.returncode == 0 and lines[0] == "Available fields:" and lines[1].startswith("Field name"),
              "-l header")
        check(any(l.startswith("VBE.web2.req ") and l.rstrip().endswith("Requests sent to the backend")
                  for l in lines) and not any(l.startswith("MAIN.") for l in lines), "-l lines and -f")
        r = stat("-n", os.path.join(WORK, "fixed"), "-1", "-f", "MAIN.client_req")
        check(r.stdout.split()[:2] == ["MAIN.client_req", "1000"], "-n DIR")
        r = stat("-n", os.path.join(WORK, "fixed", "stats"), "-1", "-f", "MAIN.client_req")
        check(r.stdout.split()[:2] == ["MAIN.client_req", "1000"], "-n FILE")
        r = stat("-n", os.path.join(WORK, "fixed", "ring"), "-1", "-f", "MAIN.client_req", "-f", "RING.msgs_written")
        check(r.stdout.split()[:2] == ["MAIN.client_req", "1000"] and "RING.msgs_written" in r.stdout,
              "-n RINGFILE: " + r.stdout + r.stderr)


def case_damaged():
    """A damaged stats file (no ring beside it): exit 3 with the reason."""
    os.makedirs(os.path.join(WORK, "broken"))
    with open(os.path.join(WORK, "broken", "stats"), "wb") as f:
        f.write(b"\0" * 8192)
    r = stat("-n", "broken", "-1")
    check(r.returncode == 3 and "bad magic" in r.stderr, f"damaged file exits 3: {r.returncode} {r.stderr!r}")


def case_late():
    """-t: a reader started before the writer waits for it."""
    p = subprocess.Popen([STAT, "-n", "late", "-j", "-t", "20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV)
    try:
        # Asleep in its retry loop, not gone: it waits for the instance rather than failing.
        check(procs.wait_for(lambda: procs.idle(p)), "-t 20 is still waiting for the instance")
        w = start_writer("late", "--fixed")
        try:
            out, err = p.communicate(timeout=20)
            check(p.returncode == 0, f"-t: exits 0 once the instance appears ({p.returncode}, {err!r})")
            # It reads the instance as soon as it exists: the counters may still be filling in.
            check("STAT.uptime" in json.loads(out)["counters"], "-t: reads the late instance")
        finally:
            procs.stop(w, timeout=10)
    finally:
        procs.stop(p, timeout=10)


def case_no_wait():
    n, rc = procs.sleeps([STAT, "-n", "nosuch", "-1"], ENV)
    check(rc == 1 and n == 0, f"missing instance without -t: exit 1 at once, no sleep ({rc}, {n} sleeps)")
    n, rc = procs.sleeps([STAT, "-n", "nosuch", "-1", "-t", "0.5"], ENV)
    check(rc == 1 and n > 0, f"missing instance with -t 0.5: waits (sleeps), then exit 1 ({rc}, {n} sleeps)")


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    sys.exit(checks.run_cases(checks.cases_of(globals()), CASE))
