"""Check bookkeeping shared by the scripted (python) tests: a failed check is recorded
and printed, never raised, so one run reports every failure; the script exits 1 when
FAILURES is not empty. Golden files are compared byte for byte.

Import from a test script (tests/<folder>/x.py) with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
"""
import os
import shutil
import sys
import traceback

FAILURES = []
SKIPPED = 77  # tests/CMakeLists.txt: RINGLOG_TEST_SKIPPED, which ctest reports as skipped


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


def skip(reason):
    """Ends the test as skipped (ctest shows it so): it cannot run here, for `reason`.
    A test that has already failed a check still fails."""
    print(f"SKIPPED: {reason}", flush=True)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s) before the skip", flush=True)
        sys.exit(1)
    sys.exit(SKIPPED)


def need(tool):
    """The path of an external program the test runs (on PATH, or in /usr/sbin or /sbin
    where Debian puts daemons); skips the test when it is not installed here
    (scripts/install-deps.sh installs every one of them)."""
    path = shutil.which(tool, path=os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin")
    if not path:
        skip(f"{tool} is not installed (scripts/install-deps.sh installs it)")
    return path


def cases_of(namespace):
    """The functions named case_* of a module's globals(), by name without the prefix."""
    return {k[5:]: v for k, v in namespace.items() if k.startswith("case_") and callable(v)}


def run_cases(cases, case, title="", cleanup=None):
    """Runs one case (or "all"), as each ctest entry TARGET/case does: an exception is a
    failed check (a RuntimeError says why without a traceback); cleanup() runs after each
    case (e2e kills what a case left running). Returns the exit code: 0 all checks passed,
    1 some failed, 2 an unknown case. A case that cannot run here calls skip()."""
    names = list(cases) if case == "all" else [case]
    if any(n not in cases for n in names):
        print(f"unknown case {case}; cases: {' '.join(cases)}")
        return 2
    for n in names:
        print(f"== {n}{title}", flush=True)
        try:
            cases[n]()
        except Exception as e:  # noqa: BLE001 - a case that cannot run fails, never crashes the run
            if not isinstance(e, RuntimeError):
                traceback.print_exc()
            check(False, f"{n}: {type(e).__name__}: {e}")
        finally:
            if cleanup:
                cleanup()
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all checks passed")
    return 0
