"""Processes, ports and files for the scripted (python) tests: every server listens on
127.0.0.1 only, every wait is bounded, every process is stopped by its pid (and dies
with the test: PR_SET_PDEATHSIG)."""
import ctypes
import os
import signal
import socket
import subprocess
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
    passed; then returns one last pred()."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()


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
