#!/usr/bin/env python3
"""ringlog-dump against a real HAProxy ring.

Starts Debian's haproxy (2.6) on 127.0.0.1 with a `ring` section whose storage is a
`backing-file` in a scratch directory and a frontend that logs each request to that
ring with a known log-format; sends a bounded number of requests with curl; stops
haproxy by pid; checks that ringlog-dump prints exactly the expected lines (while
haproxy runs, and after it stopped), that it detected the pre-3.0 layout, that an
in-place repair is refused while haproxy runs, and that a repaired copy is clean.
Usage: dump_haproxy_test.py RINGLOG_DUMP WORKDIR   (skipped where haproxy is not installed)
"""
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import need  # noqa: E402
from procs import free_port, port_open, wait_for, wait_started  # noqa: E402

N = 12


def dump(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, timeout=30)


def main():
    tool, work = sys.argv[1], sys.argv[2]
    haproxy = need("haproxy")
    need("curl")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ring = os.path.join(work, "events.ring")
    port = free_port()
    cfg = os.path.join(work, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(f"""global
    pidfile {work}/haproxy.pid
ring events
    description "ringlog-dump test"
    format raw
    maxlen 1024
    size 65536
    backing-file {ring}
defaults
    mode http
    option dontlognull
    timeout connect 2s
    timeout client 5s
    timeout server 5s
frontend web
    bind 127.0.0.1:{port}
    log ring@events local0 info
    log-format "ringlog-dump-test %HM %HU status=%ST"
    http-request return status 200 content-type text/plain string ok
""")
    check = subprocess.run([haproxy, "-c", "-f", cfg], capture_output=True, text=True, timeout=30)
    if check.returncode != 0:
        print("haproxy rejects the configuration:", check.stdout, check.stderr)
        return 1
    err = open(os.path.join(work, "haproxy.stderr"), "w+")
    proc = subprocess.Popen([haproxy, "-db", "-f", cfg], stdout=subprocess.DEVNULL, stderr=err)

    def stderr_text():
        err.seek(0)
        return err.read()
    try:
        why = wait_started(f"haproxy (listening on 127.0.0.1:{port})", proc, lambda: port_open(port), stderr_text)
        if why:
            print(why)
            return 1
        expected = []
        for i in range(N):
            path = f"/item/{i}?q={i * 7}"
            r = subprocess.run(["curl", "-s", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}",
                                f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, timeout=10)
            if r.stdout != "200":
                print("request failed:", r.stdout, r.stderr)
                return 1
            expected.append(f"ringlog-dump-test GET {path} status=200")
        # Live: the ring is mapped shared by haproxy; the file is current.
        # haproxy writes its log lines after the responses: poll the dump until all are in.
        live = wait_for(lambda: (lambda d: d if d.stdout.decode().splitlines() == expected else None)(dump(tool, ring)),
                        5) or dump(tool, ring)
        if live.returncode != 0 or live.stdout.decode().splitlines() != expected:
            print("live dump differs:", live.returncode, live.stdout, live.stderr)
            return 1
        # The writer lives: an in-place repair must refuse, naming it.
        busy = dump(tool, "--repair", "--in-place", ring)
        if busy.returncode != 3 or f"process {proc.pid} (haproxy)".encode() not in busy.stderr:
            print("in-place repair while haproxy runs:", busy.returncode, busy.stdout, busy.stderr)
            return 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    out = dump(tool, ring)
    lines = out.stdout.decode().splitlines()
    if out.returncode != 0 or lines != expected:
        print("dump after stop differs: exit", out.returncode)
        print("expected:", expected)
        print("got:     ", lines, out.stderr.decode())
        return 1
    info = dump(tool, "--info", "--json", ring)
    j = json.loads(info.stdout)
    if j["layout"] != "haproxy-v1" or j["header_len"] + j["area_size"] != os.path.getsize(ring) or j["messages"] != N:
        print("unexpected --info:", j)
        return 1
    js = json.loads(dump(tool, "--json", ring).stdout)
    if [m["payload"] for m in js["messages"]] != expected or not js["complete"]:
        print("unexpected --json:", js)
        return 1
    fixed = os.path.join(work, "events.fixed")
    rep = dump(tool, "--repair", "-o", fixed, ring)
    if rep.returncode != 0 or dump(tool, fixed).stdout.decode().splitlines() != expected:
        print("repair of a clean HAProxy ring:", rep.returncode, rep.stdout, rep.stderr)
        return 1
    print(f"haproxy {subprocess.run([haproxy, '-v'], capture_output=True, text=True).stdout.split()[2]}: "
          f"{N} lines logged to a backing-file ring, all dumped exactly ({j['layout']}, header {j['header_len']} bytes)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
