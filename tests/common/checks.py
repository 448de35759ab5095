"""Check bookkeeping shared by the scripted (python) tests: a failed check is recorded
and printed, never raised, so one run reports every failure; the script exits 1 when
FAILURES is not empty. Golden files are compared byte for byte.

Import from a test script (tests/<folder>/x.py) with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
"""
import os

FAILURES = []


def check(cond, what, detail=None):
    """Records `what` as a failure unless cond holds; detail (a screen, an output) is
    printed under it. Returns cond."""
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)
        if detail is not None:
            print("----\n" + str(detail) + "\n----", flush=True)
    return cond


def update_golden():
    """UPDATE_GOLDEN=1 (any value but 0) rewrites golden files instead of comparing."""
    return os.environ.get("UPDATE_GOLDEN", "") not in ("", "0")


def golden(path, out):
    """Compares bytes `out` with the golden file at path (or rewrites it, see
    update_golden); a difference is a failed check showing both."""
    if update_golden():
        with open(path, "wb") as f:
            f.write(out)
        return True
    with open(path, "rb") as f:
        want = f.read()
    return check(out == want, f"golden {os.path.basename(path)}",
                 f"got:\n{out.decode('utf-8', 'backslashreplace')}\n"
                 f"want:\n{want.decode('utf-8', 'backslashreplace')}")
