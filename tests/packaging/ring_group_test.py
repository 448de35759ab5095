#!/usr/bin/env python3
"""The ringlog group, as the package sets it up: root runs ringproxy, whose ring and
stats file get the default mode (0640) and the group named by $RINGLOG_GROUP (here a
throwaway group; the package's is "ringlog"). An unprivileged user in that group (a
supplementary member, as an operator added with adduser) reads them with ringlog,
ringlog-ncsa and ringlog-stat; a user outside it gets "permission denied" with the
documented exit code (3, the one every ringlog program gives for what it may not use); a
pinned reader, which must write, is refused to the member too.

Needs root (useradd/groupadd, setpriv to drop privileges): otherwise SKIPPED (77).
The throwaway users and group are removed at the end, whatever happens.

usage: ring_group_test.py RINGPROXY RINGLOG RINGLOG_NCSA RINGLOG_STAT WORKDIR
"""
import http.client
import os
import shutil
import signal
import stat
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import procs  # noqa: E402
from checks import FAILURES as failures, check, skip  # noqa: E402

PROXY, TAIL, NCSA, STAT, WORK = sys.argv[1:6]

if os.geteuid() != 0:
    skip("needs root to create throwaway users and a group (useradd, groupadd)")
for tool in ("useradd", "userdel", "groupadd", "groupdel", "setpriv"):
    if not shutil.which(tool):
        skip(f"{tool} is missing")

tag = f"{os.getpid() % 100000}"
GROUP, MEMBER, OUTSIDER = f"rlgrp{tag}", f"rlin{tag}", f"rlout{tag}"
created_users, created_groups = [], []


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def cleanup():
    for u in created_users:
        run(["userdel", u])  # also removes the user's own group (USERGROUPS_ENAB)
    for g in created_groups:
        run(["groupdel", g])


def setup_accounts():
    r = run(["groupadd", GROUP])
    if r.returncode != 0:
        raise RuntimeError(f"groupadd {GROUP}: {r.stderr}")
    created_groups.append(GROUP)
    for user, extra in ((MEMBER, ["-G", GROUP]), (OUTSIDER, [])):
        r = run(["useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                 "--user-group", *extra, user])
        if r.returncode != 0:
            raise RuntimeError(f"useradd {user}: {r.stderr}")
        created_users.append(user)


def as_user(user, cmd, env):
    """cmd run as user (its own group as primary, its supplementary groups from
    /etc/group), the way a login shell or a unit's User= would."""
    return run(["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--", *cmd], env=env)


def main():
    setup_accounts()
    shutil.rmtree(WORK, ignore_errors=True)
    inst_root = os.path.join(WORK, "instances")
    os.makedirs(inst_root)
    # The throwaway users must reach the binaries and the instances: every directory
    # on the way is world-searchable (0755), as /dev/shm is.
    for d in (WORK, inst_root):
        os.chmod(d, 0o755)
    env = dict(os.environ, RINGLOG_DIR=inst_root, RINGLOG_GROUP=GROUP, TZ="UTC")
    port = procs.free_port()
    proxy = subprocess.Popen([PROXY, "-n", "pkg", "-a", f"127.0.0.1:{port}", "-t", "1"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=procs.pdeathsig)
    try:
        if not check(procs.wait_port(port, proxy), "ringproxy (as root) listens"):
            return
        for i in range(3):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", f"/1k/pkgtest-{i}")
            r = c.getresponse()
            r.read()
            check(r.status == 200, f"GET /1k/pkgtest-{i} through ringproxy: 200 (got {r.status})")
            c.close()
        inst = os.path.join(inst_root, "pkg")
        gid = int(run(["getent", "group", GROUP]).stdout.split(":")[2])
        for name in ("ring", "stats"):
            path = os.path.join(inst, name)
            if not check(os.path.exists(path), f"{name} file exists in the instance directory"):
                continue
            st = os.stat(path)
            check(stat.S_IMODE(st.st_mode) == 0o640, f"{name} file mode 0640 (got {oct(stat.S_IMODE(st.st_mode))})")
            check(st.st_uid == 0, f"{name} file owned by root, its creator")
            check(st.st_gid == gid, f"{name} file belongs to the group {GROUP} (got gid {st.st_gid})")
        # The proxy writes a transaction when it ends; the last one is in the ring once
        # a reader sees it.
        ok = procs.wait_for(lambda: "pkgtest-2" in as_user(MEMBER, [TAIL, "-n", "pkg", "-d", "-g", "raw"], env).stdout,
                            timeout=10)
        check(ok, "a group member reads ringproxy's requests with ringlog -d")

        r = as_user(MEMBER, [TAIL, "-n", "pkg", "-d", "-g", "request", "-q", 'ReqURL ~ "pkgtest-1"'], env)
        check(r.returncode == 0 and "ReqURL" in r.stdout and "/1k/pkgtest-1" in r.stdout,
              "member: ringlog -g request -q selects a request", r.stdout + r.stderr)
        r = as_user(MEMBER, [NCSA, "-n", "pkg", "-d"], env)
        check(r.returncode == 0 and r.stdout.count("GET ") == 3 and "/1k/pkgtest-0" in r.stdout,
              "member: ringlog-ncsa -d prints the three requests", r.stdout + r.stderr)
        r = as_user(MEMBER, [STAT, "-n", "pkg", "-1"], env)
        check(r.returncode == 0 and "MAIN." in r.stdout, "member: ringlog-stat -1 prints the counters",
              r.stdout + r.stderr)
        # A pinned reader registers itself in the ring: read access is not enough.
        r = as_user(MEMBER, [TAIL, "-n", "pkg", "-d", "--pinned"], env)
        check(r.returncode == 3 and "permission denied" in r.stderr,
              "member: ringlog --pinned is refused, permission denied, exit 3", r.stdout + r.stderr)

        # Exit codes as documented (ringlog(7), EXIT STATUS): 3, the ring or the
        # instance exists but cannot be used.
        for what, cmd, code in (("ringlog -d", [TAIL, "-n", "pkg", "-d"], 3),
                                ("ringlog-ncsa -d", [NCSA, "-n", "pkg", "-d"], 3),
                                ("ringlog-stat -1", [STAT, "-n", "pkg", "-1"], 3)):
            r = as_user(OUTSIDER, cmd, env)
            check(r.returncode == code and "permission denied" in r.stderr.lower() and r.stdout == "",
                  f"outsider: {what} fails with 'permission denied' and exit {code} (got {r.returncode})",
                  r.stdout + r.stderr)
            check("Traceback" not in r.stderr and "terminate" not in r.stderr, f"outsider: {what} does not crash")
    finally:
        rc = procs.stop(proxy, signal.SIGTERM, timeout=30)
        err = proxy.stderr.read().decode(errors="replace") if proxy.stderr else ""
        check(rc == 0, f"ringproxy stops on SIGTERM with exit 0 (got {rc})", err)


try:
    main()
finally:
    cleanup()
for u in (MEMBER, OUTSIDER):
    check(run(["getent", "passwd", u]).returncode != 0, f"throwaway user {u} removed")
check(run(["getent", "group", GROUP]).returncode != 0, f"throwaway group {GROUP} removed")
print("FAILED:" if failures else "all checks passed", *failures, sep="\n  " if failures else "")
sys.exit(1 if failures else 0)
