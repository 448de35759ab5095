"""Driving a full-screen tool through tmux (its own server socket, -L): start it in a
detached session of a given size, send keys, read the screen (capture-pane), poll the
screen until a condition holds."""
import subprocess
import time

from checks import check, need
from procs import wait_file


class Tmux:
    def __init__(self, sock):
        self.sock = sock
        self.bin = need("tmux")  # skipped where tmux is not installed

    def __call__(self, *args, check_rc=True):
        """Runs `tmux -L SOCK ARGS...`; a failure raises RuntimeError unless check_rc=False."""
        r = subprocess.run([self.bin, "-L", self.sock, *args], capture_output=True, text=True, timeout=20)
        if check_rc and r.returncode != 0:
            raise RuntimeError(f"tmux {args}: {r.stderr}")
        return r

    def capture(self, session):
        return self("capture-pane", "-p", "-t", session).stdout

    def keys(self, session, *k):
        self("send-keys", "-t", session, *k)

    def wait_screen(self, session, pred, what, timeout=10.0):
        """Polls the screen until pred(screen) holds and returns it; otherwise `what` is a
        failed check (showing the last screen)."""
        end = time.monotonic() + timeout
        s = ""
        while time.monotonic() < end:
            s = self.capture(session)
            if pred(s):
                return s
            time.sleep(0.1)  # bounded poll on the screen's content (above)
        check(False, what, s)
        return s

    def kill_server(self):
        self("kill-server", check_rc=False)


def run_in_session(tm, session, command, marker, width, height, linger=60):
    """Runs the shell command in a new detached session of width x height; its exit code
    goes to the file marker, and the pane stays linger seconds so it can still be read.
    The code is written beside the marker and renamed onto it, so that the marker never
    exists empty (exit_code() would read it between the shell's open and its write)."""
    tm("new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), "sh", "-c",
       f"{command}; echo $? > {marker}.part; mv {marker}.part {marker}; sleep {linger}")


def exit_code(marker, timeout=10):
    """The exit code run_in_session wrote (as text), or None if it is not there in time."""
    if not wait_file(marker, timeout):
        return None
    with open(marker) as f:
        return f.read().strip()
