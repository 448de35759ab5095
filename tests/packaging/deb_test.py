#!/usr/bin/env python3
"""The .deb, made by `cpack -G DEB` from this build tree, checked the way dpkg and an
operator see it. One script, five steps, each its own ctest entry (packaging_tests/deb_STEP):

  build     cpack -G DEB into WORK/deb, the package copied to WORK/ringlog.deb
  contents  dpkg-deb -I/-c/-x: the control fields (Depends from dpkg-shlibdeps covers
            every library the binaries need), the files where Debian expects them
            (/usr/bin, /usr/sbin, /usr/lib/<multiarch>, /usr/include, /usr/share/man,
            /usr/lib/systemd/system, /etc/logrotate.d...), nothing naming the build
            tree or the configured prefix; the extracted binaries run, the shipped
            ringproxy.conf starts ringproxy, which stops on SIGTERM with exit 0
  install   dpkg --root SCRATCH -i, maintainer scripts included (run chrootless with
            DPKG_ROOT): the postinst creates the group ringlog and the users ringproxy
            and ringlog in SCRATCH/etc; systemd-tmpfiles makes /dev/shm/ringlog
            3775 root:ringlog there; then dpkg --purge removes every file
  units     systemd-analyze verify --root on every unit the package ships: no error,
            no warning (SKIPPED without systemd-analyze)
  logrotate logrotate -d (parse, change nothing) accepts the shipped snippet
            (SKIPPED without logrotate)

usage: deb_test.py deb_STEP BUILD_DIR WORK_DIR [CPACK]
"""
import glob
import os
import re
import shutil
import signal
import stat
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import checks  # noqa: E402
import procs  # noqa: E402
from checks import check, skip  # noqa: E402

CASE, BUILD, WORK = sys.argv[1:4]
CPACK = sys.argv[4] if len(sys.argv) > 4 else "cpack"
DEB = os.path.join(WORK, "ringlog.deb")


def run(cmd, timeout=300, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def multiarch():
    r = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"])
    return r.stdout.strip() if r.returncode == 0 else "x86_64-linux-gnu"


def need_deb():
    if not os.path.exists(DEB):
        raise RuntimeError(f"no package at {DEB}: the packaging_tests/deb_build test makes it")


def extract(root):
    shutil.rmtree(root, ignore_errors=True)
    r = run(["dpkg-deb", "-x", DEB, root])
    if r.returncode != 0:
        raise RuntimeError(f"dpkg-deb -x failed: {r.stderr}")


def case_deb_build():
    for tool in ("dpkg-deb", "dpkg-shlibdeps", "fakeroot"):
        if not shutil.which(tool):
            raise RuntimeError(f"{tool} is missing (scripts/install-deps.sh installs dpkg-dev and fakeroot)")
    out = os.path.join(WORK, "deb")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    r = run([CPACK, "-G", "DEB", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-B", out], timeout=600)
    print(r.stdout[-4000:], r.stderr[-4000:])
    debs = glob.glob(os.path.join(out, "*.deb"))
    if not check(r.returncode == 0 and len(debs) == 1, "cpack -G DEB makes one package"):
        return
    shutil.copyfile(debs[0], DEB)
    print("package:", os.path.basename(debs[0]), os.path.getsize(DEB), "bytes")


def control_field(text, name):
    for line in text.splitlines():
        if line.startswith(f" {name}:"):
            return line.split(":", 1)[1].strip()
    return ""


def package_names(depends):
    """'libc6 (>= 2.34), a | b' -> {'libc6', 'a', 'b'}"""
    names = set()
    for alt in depends.split(","):
        for p in alt.split("|"):
            p = p.strip().split(" ")[0].split(":")[0]
            if p:
                names.add(p)
    return names


def case_deb_contents():
    need_deb()
    ma = multiarch()
    info = run(["dpkg-deb", "-I", DEB]).stdout
    print(info)
    check(control_field(info, "Package") == "ringlog", "Package: ringlog")
    check(control_field(info, "Architecture") == run(["dpkg", "--print-architecture"]).stdout.strip(),
          "Architecture is the build machine's")
    depends = control_field(info, "Depends")
    deps = package_names(depends)
    for p in ("libc6", "libstdc++6", "adduser"):
        check(p in deps, f"Depends names {p}", depends)
    for name in ("postinst", "prerm", "postrm", "conffiles"):
        check(f" {name}" in info, f"control archive has {name}")

    listing = run(["dpkg-deb", "-c", DEB]).stdout
    paths = set()
    for line in listing.splitlines():
        # drwxr-xr-x root/root 0 2026-12-01 20:00 ./usr/bin/ -> target for symlinks
        f = line.split(None, 5)
        if len(f) == 6:
            paths.add(f[5].split(" -> ")[0].lstrip(".").rstrip("/"))
    want = ["/usr/bin/ringlog", "/usr/bin/ringlog-ncsa", "/usr/bin/ringlog-top", "/usr/bin/ringlog-stat",
            "/usr/bin/ringlog-dump", "/usr/bin/ringlog-forward", "/usr/sbin/ringproxy",
            f"/usr/lib/{ma}/cmake/ringlog/ringlogConfig.cmake", f"/usr/lib/{ma}/cmake/ringlog/ringlogTargets.cmake",
            f"/usr/lib/{ma}/pkgconfig/ringlog.pc",
            "/usr/include/ringlog/log.hpp", "/usr/include/ringlog/ring.hpp", "/usr/include/ringlog/defs/tags.def",
            "/usr/share/man/man1/ringlog.1.gz", "/usr/share/man/man1/ringlog-ncsa.1.gz",
            "/usr/share/man/man5/ringlog-format.5.gz", "/usr/share/man/man7/ringlog.7.gz",
            "/usr/share/man/man8/ringproxy.8.gz",
            "/usr/lib/systemd/system/ringproxy.service", "/usr/lib/systemd/system/ringlog-ncsa.service",
            "/usr/lib/systemd/system/ringlog-forward.service",
            "/usr/lib/sysusers.d/ringlog.conf", "/usr/lib/tmpfiles.d/ringlog.conf",
            "/etc/logrotate.d/ringlog", "/etc/ringlog/ringproxy.conf", "/etc/default/ringlog-forward"]
    for p in want:
        check(p in paths, f"package has {p}")
    # The library as built: static by default, shared with -DBUILD_SHARED_LIBS=ON.
    shared = f"/usr/lib/{ma}/libringlog.so.0" in paths
    check(shared or f"/usr/lib/{ma}/libringlog.a" in paths, f"package has libringlog.a or .so in /usr/lib/{ma}")
    if shared:
        check(f"/usr/lib/{ma}/libringlog.so" in paths, "package has the libringlog.so link")
        check(" shlibs" in info, "control archive has shlibs (the package provides libringlog.so.0)")
    src_headers = glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                         "ringlog", "include", "ringlog", "*.hpp"))
    for h in src_headers:
        check(f"/usr/include/ringlog/{os.path.basename(h)}" in paths, f"package has public header {os.path.basename(h)}")
    for p in sorted(paths):
        if p and not p.startswith(("/usr/bin", "/usr/sbin", "/usr/lib", "/usr/include", "/usr/share/man", "/etc",
                                   "/usr/share/doc")) and p not in ("/usr", "/usr/share"):
            check(False, f"{p} is in a place Debian does not expect")
        check("/usr/local" not in p, f"{p} is not under /usr/local")

    root = os.path.join(WORK, "root")
    extract(root)
    # Text files must not name the build tree or the configured prefix.
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            with open(path, "rb") as f:
                data = f.read()
            if b"\0" in data[:4096]:
                continue
            rel = path[len(root):]
            check(BUILD.encode() not in data, f"{rel} does not name the build tree")
            check(b"/usr/local" not in data, f"{rel} does not name /usr/local")
    static = os.path.join(root, f"usr/lib/{ma}/libringlog.a")
    if os.path.exists(static):
        h = run(["objdump", "-h", static], timeout=60).stdout
        check(".text" in h and ".debug_info" not in h, "libringlog.a is stripped of debug sections (dh_strip's rule)")
    pc = open(os.path.join(root, f"usr/lib/{ma}/pkgconfig/ringlog.pc")).read()
    check("prefix=/usr\n" in pc, "ringlog.pc: prefix=/usr", pc)
    unit = open(os.path.join(root, "usr/lib/systemd/system/ringproxy.service")).read()
    check("ExecStart=/usr/sbin/ringproxy --config /etc/ringlog/ringproxy.conf" in unit,
          "ringproxy.service starts /usr/sbin/ringproxy with /etc/ringlog/ringproxy.conf")

    # Every library a binary needs directly (its NEEDED entries) comes from a package that
    # Depends names (or is ours); what those libraries need in turn, their packages depend
    # on (Debian's rule, and what dpkg-shlibdeps computes).
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(root, f"usr/lib/{ma}"))
    elves = sorted(glob.glob(os.path.join(root, "usr/bin/*")) + glob.glob(os.path.join(root, "usr/sbin/*")) +
                   glob.glob(os.path.join(root, f"usr/lib/{ma}/libringlog.so.*.*")))
    check(elves, "the package has binaries")
    owners = {}  # library path -> package (dpkg -S is slow)
    for elf in elves:
        needed = set(re.findall(r"^\s*NEEDED\s+(\S+)", run(["objdump", "-p", elf], timeout=60).stdout, re.M))
        check(needed, f"{os.path.basename(elf)}: its NEEDED libraries are read")
        r = run(["ldd", elf], env=env)
        for line in r.stdout.splitlines():
            if "=>" not in line or line.split("=>")[0].strip() not in needed:
                continue
            lib = line.split("=>")[1].strip().split(" ")[0]
            if not lib or lib.startswith(root):
                continue
            if lib not in owners:
                o = run(["dpkg", "-S", lib]).stdout.split(":")[0].strip()
                owners[lib] = o or run(["dpkg", "-S", os.path.realpath(lib)]).stdout.split(":")[0].strip()
            owner = owners[lib]
            check(owner in deps, f"{os.path.basename(elf)} needs {os.path.basename(lib)} from {owner or '?'}, "
                                 f"which Depends names", depends)
        check("not found" not in r.stdout, f"{os.path.basename(elf)}: every library found", r.stdout)
        if "/bin/" in elf:
            v = run([elf, "--help"], env=env)
            check(v.returncode == 0 and "Usage:" in v.stdout, f"{os.path.basename(elf)} --help runs", v.stdout + v.stderr)
    for page in glob.glob(os.path.join(root, "usr/share/man/man*/*")):
        check(page.endswith(".gz"), f"man page {os.path.basename(page)} is gzipped")

    # The shipped config starts ringproxy (its listen address overridden by -a).
    inst = os.path.join(WORK, "instances")
    shutil.rmtree(inst, ignore_errors=True)
    os.makedirs(inst)
    port = procs.free_port()
    penv = dict(env, RINGLOG_DIR=inst)
    p = subprocess.Popen([os.path.join(root, "usr/sbin/ringproxy"), "--config",
                          os.path.join(root, "etc/ringlog/ringproxy.conf"), "-a", f"127.0.0.1:{port}", "-t", "1"],
                         env=penv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=procs.pdeathsig)
    try:
        check(procs.wait_port(port, p), "ringproxy starts with the shipped ringproxy.conf")
        check(os.path.exists(os.path.join(inst, "default", "ring")), "its ring is the instance the config names")
    finally:
        rc = procs.stop(p, signal.SIGTERM, timeout=30)
        out = p.stdout.read().decode(errors="replace")
        check(rc == 0, f"ringproxy stops on SIGTERM with exit 0 (got {rc})", out)


def case_deb_install():
    need_deb()
    if os.geteuid() != 0 and not shutil.which("fakeroot"):
        skip("dpkg --root needs root or fakeroot")
    if not shutil.which("systemd-sysusers"):
        skip("no systemd-sysusers: the postinst cannot create accounts under a scratch root")
    root = os.path.join(WORK, "dpkg-root")
    shutil.rmtree(root, ignore_errors=True)
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "etc"):
        os.makedirs(os.path.join(root, d))
    open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
    dpkg = ["dpkg", f"--root={root}", f"--log={os.path.join(WORK, 'dpkg.log')}", "--force-script-chrootless",
            "--force-depends", "--force-not-root"]
    r = run(dpkg + ["-i", DEB])
    if not check(r.returncode == 0, "dpkg --root -i installs the package", r.stdout + r.stderr):
        return
    ma = multiarch()
    for p in ("usr/sbin/ringproxy", "usr/bin/ringlog-ncsa", f"usr/lib/{ma}/pkgconfig/ringlog.pc",
              "usr/lib/systemd/system/ringlog-ncsa.service", "etc/logrotate.d/ringlog"):
        check(os.path.exists(os.path.join(root, p)), f"installed: /{p}")

    def entries(name):
        try:
            with open(os.path.join(root, "etc", name)) as f:
                return {line.split(":")[0]: line.rstrip("\n").split(":") for line in f if ":" in line}
        except FileNotFoundError:
            return {}
    groups, users = entries("group"), entries("passwd")
    check("ringlog" in groups, "postinst created the group ringlog", groups)
    gid = groups.get("ringlog", ["", "", "?"])[2]
    for u in ("ringproxy", "ringlog"):
        check(u in users and users[u][3] == gid, f"postinst created the user {u}, primary group ringlog", users.get(u))
        if u in users:
            check(users[u][6].endswith("nologin"), f"{u} cannot log in (shell {users[u][6]})")
            check(0 < int(users[u][2]) < 1000, f"{u} is a system user (uid {users[u][2]})")
    # The tmpfiles.d snippet (run at boot, and by the postinst on a live system) makes
    # /dev/shm/ringlog setgid ringlog, group-writable and sticky.
    tmpfiles = shutil.which("systemd-tmpfiles")
    if check(tmpfiles, "systemd-tmpfiles is installed (package systemd)"):
        r = run([tmpfiles, f"--root={root}", "--create", "ringlog.conf"])
        check(r.returncode == 0 and not r.stderr.strip(), "systemd-tmpfiles --create ringlog.conf", r.stderr)
        shm = os.path.join(root, "dev/shm/ringlog")
        if check(os.path.isdir(shm), "it makes /dev/shm/ringlog"):
            st = os.stat(shm)
            check(stat.S_IMODE(st.st_mode) == 0o3775 and str(st.st_gid) == gid and st.st_uid == 0,
                  f"/dev/shm/ringlog is 3775 root:ringlog (got {oct(stat.S_IMODE(st.st_mode))} "
                  f"{st.st_uid}:{st.st_gid})")
            shutil.rmtree(os.path.join(root, "dev"))
    r = run(dpkg + ["--purge", "ringlog"])
    check(r.returncode == 0, "dpkg --root --purge removes the package", r.stdout + r.stderr)
    left = [os.path.join(d, f)[len(root):] for d, _s, fs in os.walk(root) for f in fs
            if not os.path.join(d, f).startswith(os.path.join(root, "var/lib/dpkg")) and
            not os.path.join(d, f).startswith(os.path.join(root, "etc"))]
    check(not left, "purge leaves no file of the package", left)
    for conf in ("etc/logrotate.d/ringlog", "etc/ringlog/ringproxy.conf"):
        check(not os.path.exists(os.path.join(root, conf)), f"purge removes the conffile /{conf}")


def case_deb_units():
    need_deb()
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        skip("systemd-analyze is missing (Debian package systemd)")
    root = os.path.join(WORK, "units-root")
    extract(root)
    unitdir = os.path.join(root, "usr/lib/systemd/system")
    ours = sorted(os.path.basename(u) for u in glob.glob(os.path.join(unitdir, "*.service")))
    check(ours == ["ringlog-forward.service", "ringlog-ncsa.service", "ringproxy.service"],
          "the package ships three units", ours)
    # The units they name (network.target, multi-user.target...) come from the host.
    for host_dir in ("/usr/lib/systemd/system", "/lib/systemd/system"):
        if os.path.isdir(host_dir):
            for f in os.listdir(host_dir):
                src, dst = os.path.join(host_dir, f), os.path.join(unitdir, f)
                if not os.path.lexists(dst) and (f.endswith(".target") or f.endswith(".slice")):
                    shutil.copy(src, dst, follow_symlinks=True) if os.path.isfile(src) else None
    # Commands the units run that other packages provide (/bin/kill: procps) come from
    # the host, as they would on a system with the package installed.
    for u in ours:
        for line in open(os.path.join(unitdir, u)):
            if line.startswith("Exec") and "=" in line:
                cmd = line.split("=", 1)[1].strip().lstrip("-+!@:").split()[0]
                dst = os.path.join(root, cmd.lstrip("/"))
                if cmd.startswith("/") and not os.path.exists(dst) and os.path.exists(cmd):
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copy(cmd, dst)
    # Documentation= pages: systemd-analyze runs man(1), which finds the package's pages
    # through MANPATH.
    env = dict(os.environ, MANPATH=os.path.join(root, "usr/share/man"))
    for u in ours:
        r = run([analyze, "verify", f"--root={root}", u], env=env)
        out = (r.stdout + r.stderr).strip()
        check(r.returncode == 0 and out == "", f"systemd-analyze verify {u}: no error, no warning", out)
        sec = run([analyze, "security", "--offline=yes", f"--root={root}", "--no-pager", u])
        last = [line for line in sec.stdout.splitlines() if "Overall exposure level" in line]
        print(f"{u}: {last[0].strip() if last else sec.stderr.strip()}")


def case_deb_logrotate():
    need_deb()
    lr = shutil.which("logrotate") or ("/usr/sbin/logrotate" if os.path.exists("/usr/sbin/logrotate") else None)
    if not lr:
        skip("logrotate is missing")
    root = os.path.join(WORK, "logrotate-root")
    extract(root)
    conf = os.path.join(root, "etc/logrotate.d/ringlog")
    r = run([lr, "-d", "-s", os.path.join(WORK, "logrotate.state"), conf])
    out = r.stdout + r.stderr
    check(r.returncode == 0 and "error" not in out.lower(), "logrotate -d accepts /etc/logrotate.d/ringlog", out)
    check("/var/log/ringlog/ncsa.log" in out, "the snippet rotates /var/log/ringlog/ncsa.log", out)


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    sys.exit(checks.run_cases(checks.cases_of(globals()), CASE))
