"""Processes, ports and files for the scripted (python) tests: every server listens on
127.0.0.1 only, every wait is bounded, every process is stopped by its pid (and dies
with the test: PR_SET_PDEATHSIG)."""
import ctypes
import os
import signal
import socket
import subprocess
import tempfile
import time

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def pdeathsig():
    """preexec_fn for subprocess.Popen: the child gets SIGKILL when the test dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port(kind=socket.SOCK_STREAM):
    """A loopback port nobody listens on right now (TCP, or UDP with SOCK_DGRAM)."""
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(pred, timeout=10.0, interval=0.05):
    """Polls pred() until it returns something true (returned) or timeout seconds have
    passed; then returns one last pred(). The one poll loop of the scripted tests: pred
    reads observable state (a file, a socket, /proc, a counter); the timeout only bounds
    a wait that would otherwise hang, it never decides a result on its own."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)  # bounded poll on pred's observable state (see above)
    return pred()


# ---- what a process is doing, from /proc (Linux) --------------------------------------

def task_states(pid):
    """The scheduler state letter of every thread of pid (R, S, D, T, t, Z, ...); [] once
    it is gone."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                out.append(f.read().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            pass
    return out


def sleeping(pid):
    """True when every thread of pid is in an interruptible sleep (S): blocked in a
    wait (a timer, a futex, poll or epoll, a socket read), so it does nothing until an
    event or its timeout comes."""
    st = task_states(pid)
    return bool(st) and all(s == "S" for s in st)


def stopped(pid):
    """True once pid is stopped by a signal (SIGSTOP): state T."""
    st = task_states(pid)
    return bool(st) and all(s in "Tt" for s in st)


def maps(pid, path):
    """True when pid has the file at path mapped (/proc/PID/maps names it)."""
    want = os.path.realpath(path)
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any(line.rstrip("\n").endswith(" " + want) for line in f)
    except OSError:
        return False


def attached(proc, path):
    """A reader process that has mapped the ring at path and then gone to sleep waiting
    for data: its start position is taken, so whatever is written from now on is new to
    it. False once it has exited."""
    return proc.poll() is None and maps(proc.pid, path) and sleeping(proc.pid)


def idle(proc):
    """A process still running and asleep in every thread (waiting for input)."""
    return proc.poll() is None and sleeping(proc.pid)


# ---- TCP sockets on this machine, from /proc/net/tcp{,6} ------------------------------

TCP_ESTABLISHED, TCP_LISTEN = 0x01, 0x0A


def tcp_sockets():
    """Every TCP socket as a dict: local and remote port, state, tx_queue (bytes sent but
    not acknowledged) and rx_queue (bytes received but not read; for a listener, the
    connections waiting in its accept queue)."""
    out = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    w = line.split()
                    tx, rx = w[4].split(":")
                    out.append({"lport": int(w[1].rsplit(":", 1)[1], 16), "rport": int(w[2].rsplit(":", 1)[1], 16),
                                "state": int(w[3], 16), "tx_queue": int(tx, 16), "rx_queue": int(rx, 16)})
        except OSError:
            pass
    return out


def listening(port):
    """True while something listens on TCP port `port`."""
    return any(s["lport"] == port and s["state"] == TCP_LISTEN for s in tcp_sockets())


def accept_queue(port):
    """Connections completed and waiting in the accept queue of the listener on port."""
    return sum(s["rx_queue"] for s in tcp_sockets() if s["lport"] == port and s["state"] == TCP_LISTEN)


def port_open(port):
    """True when a TCP connection to 127.0.0.1:port is accepted."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def wait_port(port, proc=None, timeout=20):
    """Waits until 127.0.0.1:port accepts connections; False if proc exits first or the
    time runs out."""
    ok = wait_for(lambda: (proc is not None and proc.poll() is not None) or port_open(port), timeout)
    return bool(ok) and (proc is None or proc.poll() is None)


# How long a peer daemon the tests run beside ours (varnishd, haproxy, rsyslogd,
# prometheus) may take to start. On a loaded machine that is tens of seconds (varnishd,
# which compiles its VCL with cc before its child starts, took more than 33 s at load
# 11-15): its start waits on what it does (a port that accepts, a CLI that answers, a
# file it writes), and this bound only keeps a start that never comes from hanging.
PEER_START_SECONDS = 120


def wait_started(what, proc, ready, output, timeout=PEER_START_SECONDS):
    """Waits until ready() is true while proc runs, for at most timeout seconds. Returns
    "" once it is; otherwise a message for the failure saying whether the peer exited
    (with its status) or is still not ready, after how long, and the tail of output()
    (the peer's stderr)."""
    t0 = time.monotonic()
    ok = wait_for(lambda: proc.poll() is not None or ready(), timeout, 0.1)
    waited = time.monotonic() - t0
    if ok and proc.poll() is None:
        return ""
    if proc.poll() is not None:
        how = f"exited with status {proc.returncode} after {waited:.1f} s"
    else:
        how = f"still not ready after {waited:.0f} s (pid {proc.pid} runs)"
    text = output().rstrip()
    return f"{what} did not start: {how}; its stderr:\n{text[-3000:] if text else '(empty)'}"


def wait_file(path, timeout=10.0):
    """Waits until path exists."""
    return bool(wait_for(lambda: os.path.exists(path), timeout))


def stop(proc, sig=signal.SIGTERM, timeout=30):
    """Sends sig to a running proc and waits for it; kills it after timeout seconds.
    Returns its exit code (negative: the signal), or None when it had to be killed."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def kill_all(procs):
    """Kills whatever in procs still runs (a failed case's leftovers) and empties it."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    procs.clear()


def instance_dir(root, name):
    """The instance directory root/name (made if missing), as `-n name` with
    RINGLOG_DIR=root finds it."""
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    return d


def ring_path(root, name):
    """The ring file of instance root/name (its directory made if missing)."""
    return os.path.join(instance_dir(root, name), "ring")


def start_ready(cmd, ready, what, timeout=10.0, **popen):
    """Starts a test writer that creates the file `ready` once it is set up (--ready);
    returns its Popen. Raises RuntimeError (after killing it) if the file does not
    appear in time."""
    if os.path.exists(ready):
        os.unlink(ready)
    p = subprocess.Popen(cmd, **popen)
    if not wait_file(ready, timeout):
        p.kill()
        p.wait()
        raise RuntimeError(f"{what} did not start")
    return p


def sleeps(cmd, env=None, timeout=60):
    """Runs cmd under strace and returns (how many times its main thread called
    nanosleep or clock_nanosleep, its exit code): whether a tool waited, without timing
    it. Skips the test where strace is not installed or cannot trace."""
    import checks  # noqa: PLC0415 - checks imports nothing from here
    strace = checks.need("strace")
    env = dict(env if env is not None else os.environ)
    # LeakSanitizer cannot run under ptrace: off for this run in the ASan build.
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    fd, log = tempfile.mkstemp(prefix="strace-")
    os.close(fd)
    try:
        r = subprocess.run([strace, "-f", "-e", "trace=execve,nanosleep,clock_nanosleep", "-o", log, *cmd],
                           capture_output=True, env=env, timeout=timeout)
        if r.returncode != 0 and b"ptrace" in r.stderr:
            checks.skip("strace cannot trace here (ptrace refused)")
        with open(log) as f:
            lines = [l.split(None, 1) for l in f if l.strip()]
    finally:
        os.unlink(log)
    main = lines[0][0] if lines else None  # the pid that made the first call (execve)
    n = sum(1 for l in lines if len(l) == 2 and l[0] == main and "nanosleep(" in l[1])
    return n, r.returncode


def io_uring_available():
    """True when this process may set up an io_uring (the kernel has it and no seccomp
    filter or sysctl refuses it): io_uring_setup(2) on a tiny ring, closed at once."""
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    fd = _libc.syscall(425, 4, params)  # __NR_io_uring_setup (the same on every 64-bit Linux)
    if fd < 0:
        return False
    os.close(fd)
    return True
