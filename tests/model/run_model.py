#!/usr/bin/env python3
"""Runs the ring's Promela model (tests/model/ring.pml) through Spin: one configuration
of the real model, which must pass (no assertion violated, no invalid end state, the
search complete; for the liveness case no acceptance cycle under weak fairness), or
one mutant (a known-bad variant, MUTANT_* in the model), which must fail with a
counterexample trail. Prints the state count and the time of the search.

    run_model.py --case NAME --work DIR [--model ring.pml] [--show-trail]
    run_model.py --list
    run_model.py --big NAME --work DIR   a larger configuration, bitstate (see docs/RING.md)

Exit codes: 0 as expected, 1 not as expected (a real configuration failed or a
mutant survived), 2 bad usage, 77 (skipped) when spin or a C compiler is missing.
"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import time

SKIPPED = 77
HERE = os.path.dirname(os.path.abspath(__file__))

# Configurations of the real model: (defines, what it covers). Each fits the CI
# budget (all of them, two at a time, in under 5 minutes on 2 cores).
REAL = {
    "writers": ("NA=2 NB=1 MSGS=1 PINNED=0 PASSIVE=0 N=6",
                "3 writers in 2 processes, 2 sharing a wait queue: lead/carry, reclaim, drop, "
                "the wait for a writer still copying"),
    "pinned": ("NA=1 NB=1 MSGS=2 PINNED=1 PASSIVE=0 N=5",
               "2 writers and a pinned reader over a 5-byte ring (wraps 3 times)"),
    "passive": ("NA=1 NB=1 MSGS=2 PINNED=0 PASSIVE=1 N=5",
                "2 writers and a passive reader copying batches of 1 or 2 messages over a 5-byte ring"),
    "carry-pinned": ("NA=2 NB=0 MSGS=2 PINNED=1 PASSIVE=0 N=5",
                     "2 writers of one process and a pinned reader: the lock holder carries its queue (Q12)"),
    "death-writers": ("NA=1 NB=1 MSGS=2 PINNED=0 PASSIVE=0 N=5 KILL=1 CHECKS=1",
                      "a writer process dies at any step; the other recovers its lock and "
                      "discards its torn batch"),
    "death-readers": ("NA=1 NB=1 MSGS=1 PINNED=1 PASSIVE=0 N=5 KILL=9 CHECKS=1",
                      "a writer or the pinned reader dies at any step; recovery"),
    "liveness": ("NA=1 NB=1 MSGS=1 PINNED=1 PASSIVE=0 N=4 LTL_DONE",
                 "every write of a live process ends (weak fairness), the reader too"),
}

# Mutants: (defines, what must fail). Each must yield a counterexample.
MUTANTS = {
    "drop-restore-late": ("MUTANT_DROP_RESTORE_LATE NA=1 NB=1 MSGS=2 PINNED=1 PASSIVE=0 N=5",
                          "hide the tail RC first (as HAProxy) and restore it after writing the "
                          "tail on the drop path: a 0xFF is left at tail-1"),
    "reclaim-past-reader": ("MUTANT_RECLAIM_PAST_READER NA=1 NB=1 MSGS=2 PINNED=1 PASSIVE=0 N=5",
                            "reclaim over an RC != 0: the pinned reader loses messages"),
    "reader-release-first": ("MUTANT_READER_RELEASE_FIRST NA=1 NB=1 MSGS=2 PINNED=1 PASSIVE=0 N=5",
                             "the pinned reader leaves its RC before taking the next: it loses"),
    "passive-no-recheck": ("MUTANT_PASSIVE_NO_RECHECK NA=1 NB=1 MSGS=2 PINNED=0 PASSIVE=1 N=5",
                           "the passive reader returns a copy without re-reading head"),
    "passive-recheck-last": ("MUTANT_PASSIVE_RECHECK_LAST NA=1 NB=1 MSGS=2 PINNED=0 PASSIVE=1 N=6",
                             "the passive reader re-checks head against the last message of its "
                             "batch, not the first: it returns a first message overwritten meanwhile"),
    "carry-no-reclaim": ("MUTANT_CARRY_NO_RECLAIM NA=2 NB=0 MSGS=2 PINNED=1 PASSIVE=0 N=5",
                         "the lock holder carries its queue without reclaiming room for it: "
                         "the batch overwrites messages not yet reclaimed"),
    "unknown-owner-keeps-record": ("MUTANT_UNKNOWN_OWNER_KEEPS_RECORD NA=1 NB=1 NC=1 MSGS=1 PINNED=0 PASSIVE=0 N=5 KILL=1 CHECKS=1",
                                   "the recovery of an unrecorded owner that died between L3 and W3 keeps "
                                   "its record of the batch it never published: a live batch is padded"),
    "unknown-owner-no-backoff": ("MUTANT_NO_UNKNOWN_OWNER_BACKOFF NA=1 NB=1 NC=1 MSGS=1 PINNED=0 PASSIVE=0 N=5 KILL=1 CHECKS=1",
                                 "the second recoverer of an unrecorded owner's lock does not back off "
                                 "(no D9): it takes a live holder's lock"),
}

# Search settings of a mutant whose first counterexample a plain depth-first search
# meets only after millions of states: (extra pan cc flags, pan options). A depth bound
# (-m) above the trail's depth prunes what lies deeper; -DREVERSE explores the processes
# in reverse order. The trail is a counterexample all the same; a change of the model
# that takes it below the bound makes the mutant survive (then raise the bound).
SEARCH = {
    "unknown-owner-keeps-record": ("-DREVERSE", "-m400"),   # trail at depth 361
    "unknown-owner-no-backoff": ("", "-m250"),              # trail at depth 216
}

# Findings: the code as it is, with a known bug the model found (docs/RING.md
# section 7); each yields a counterexample until the code is fixed, then becomes a
# mutant. None open.
FINDINGS = {}

# Releasing the tail after the copy instead of before: checked, and expected to pass
# (it serialises the copies, which costs throughput, but loses nothing and deadlocks
# nowhere): the model shows the early release is an optimisation.
EQUIVALENT = {
    "release-after-copy": ("MUTANT_RELEASE_AFTER_COPY NA=2 NB=1 MSGS=1 PINNED=0 PASSIVE=0 N=6",
                           "the tail released after the copy: slower, not wrong"),
}

# Larger configurations, for a bigger machine (not in CI): --big NAME. Every one is
# searched in bitstate mode (BIG_SEARCH): a hash array of 2^33 bits (1 GiB) instead of
# a stored state set, so the coverage is approximate: a state whose hash collides
# with one already seen is not explored, and a pass is no proof.
BIG = {
    "unknown-owner": ("NA=1 NB=1 NC=1 MSGS=1 PINNED=0 PASSIVE=0 N=5 KILL=1 CHECKS=1",
                      "a lock holder dies at any step, two other writers recover (the "
                      "unknown-owner back-off, D9); bitstate, approximate coverage"),
    "all": ("NA=2 NB=1 MSGS=2 PINNED=1 PASSIVE=1 N=7 KILL=15 CHECKS=1",
            "3 writers (2 queued), both readers, any process may die, over a 7-byte ring; "
            "bitstate, approximate coverage"),
}
BIG_SEARCH = ("-O1 -DBITSTATE", "-w33")  # pan cc flags, pan options of every --big search


def search_text(search):
    """Search settings as --list and the result line show them: pan cc flags, pan options."""
    cc, pan = search
    return "; ".join(x for x in (cc and "pan cc " + cc, pan and "pan " + pan) if x)


def depth_bound(search):
    """The depth bound (-mN) among a search's pan options, or None."""
    m = re.search(r"(?:^|\s)(-m\d+)", search[1])
    return m.group(1) if m else None


def defines(spec):
    return ["-D" + d for d in spec.split()]


def run(cmd, cwd, timeout=None):
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout)


def check_model(model, spec, work, liveness=False, big=False, show_trail=False, search=("", "")):
    """Builds and runs pan; returns (errors, states, seconds, cpu, cc_cpu, output, complete)."""
    os.makedirs(work, exist_ok=True)
    for f in os.listdir(work):
        if f.startswith("pan") or f.endswith(".trail"):
            os.remove(os.path.join(work, f))
    shutil.copy(model, os.path.join(work, "ring.pml"))
    r = run(["spin", "-a"] + defines(spec) + ["ring.pml"], work)
    if r.returncode != 0 or not os.path.exists(os.path.join(work, "pan.c")):
        print(r.stdout)
        raise SystemExit("spin -a failed")
    # -O0: pan.c is large (800 KB) and cc -O1 spends 30 CPU s on it, more than a CI
    # configuration's search takes at -O1 (2-5 CPU s); at -O0 it compiles in 3 s and
    # searches about half as fast. A big configuration's search outweighs its compile.
    cflags = ["-DVECTORSZ=1024", "-DMEMLIM=3072"]
    cflags += BIG_SEARCH[0].split() if big else ["-O0", "-DCOLLAPSE"]
    if not liveness:
        cflags += ["-DSAFETY"]
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run(["cc"] + cflags + search[0].split() + ["-o", "pan", "pan.c"], work)
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cc_cpu = (k1.ru_utime - k0.ru_utime) + (k1.ru_stime - k0.ru_stime)
    if r.returncode != 0:
        print(r.stdout)
        raise SystemExit("cannot compile pan")
    args = ["./pan", search[1] or "-m1000000", "-c1"]
    args += BIG_SEARCH[1].split() if big else ["-w24"]
    if liveness:
        args += ["-a", "-f", "-N", "done"]
    t0 = time.monotonic()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run(args, work)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    secs = time.monotonic() - t0
    cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
    out = r.stdout
    m = re.search(r"errors: (\d+)", out)
    errors = int(m.group(1)) if m else -1
    m = re.search(r"(\d+) states, stored", out)
    states = int(m.group(1)) if m else -1
    complete = "Search not completed" not in out and "max search depth too small" not in out
    if errors and show_trail and os.path.exists(os.path.join(work, "ring.pml.trail")):
        t = run(["spin", "-t", "-p"] + defines(spec) + ["ring.pml"], work)
        print(t.stdout[-12000:])
    return errors, states, secs, cpu, cc_cpu, out, complete


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case")
    ap.add_argument("--work")
    ap.add_argument("--model", default=os.path.join(HERE, "ring.pml"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--big", metavar="NAME", choices=sorted(BIG))
    ap.add_argument("--show-trail", action="store_true")
    a = ap.parse_args()
    if a.list:
        for table, kind in ((REAL, "real"), (MUTANTS, "mutant"), (EQUIVALENT, "equivalent"),
                            (FINDINGS, "finding"), (BIG, "big")):
            for name, (spec, what) in table.items():
                print("%-10s %-22s %s\n%35s-D %s" % (kind, name if kind in ("real", "big") else kind.replace("equivalent", "mutant") + "-" + name,
                                                    what, "", spec))
                settings = SEARCH.get(name) if kind == "mutant" else BIG_SEARCH if kind == "big" else None
                if settings:
                    print("%35ssearch: %s" % ("", search_text(settings)))
        return 0
    if not a.work or (not a.case and not a.big):
        ap.print_usage(sys.stderr)
        print("run_model.py: --work and one of --case, --big, --list are needed", file=sys.stderr)
        return 2
    if not shutil.which("spin") or not shutil.which("cc"):
        print("SKIP: spin or cc not installed (scripts/install-deps.sh installs spin)")
        return SKIPPED
    if a.big:
        spec, what = BIG[a.big]
        kind = "big"
    elif a.case in REAL:
        spec, what = REAL[a.case]
        kind = "real"
    elif a.case.startswith("mutant-") and a.case[7:] in MUTANTS:
        spec, what = MUTANTS[a.case[7:]]
        kind = "mutant"
    elif a.case.startswith("finding-") and a.case[8:] in FINDINGS:
        spec, what = FINDINGS[a.case[8:]]
        kind = "finding"
    elif a.case.startswith("mutant-") and a.case[7:] in EQUIVALENT:
        spec, what = EQUIVALENT[a.case[7:]]
        kind = "equivalent"
    else:
        print("run_model.py: unknown case %r (--list shows them)" % a.case, file=sys.stderr)
        return 2
    liveness = "LTL_DONE" in spec.split()
    search = SEARCH.get(a.case[7:], ("", "")) if kind == "mutant" else ("", "")
    errors, states, secs, cpu, cc_cpu, out, complete = check_model(a.model, spec, a.work, liveness=liveness,
                                                      big=a.big, show_trail=a.show_trail, search=search)
    label = a.case or "big-" + a.big
    print("model %s (%s): %s\n  -D %s%s\n  %d states stored, %.1f s (%.1f s of CPU; compiling pan %.1f s of CPU), "
          "errors: %d%s" % (label, kind, what, spec,
                            ("; search: " + search_text(BIG_SEARCH if a.big else search)) if a.big or any(search) else "",
                            states, secs, cpu, cc_cpu, errors,
                            "" if complete else ", search NOT complete"))
    if kind in ("real", "big", "equivalent"):
        ok = errors == 0 and complete and states > 0
        if not ok:
            print(out[-4000:])
            print("FAIL: the model of the ring fails in configuration %s" % label)
            return 1
        return 0
    if errors > 0 and os.path.exists(os.path.join(a.work, "ring.pml.trail")):
        v = re.search(r"pan:\d+: (.*)", out)
        print("  killed: %s (trail %s)" % (v.group(1) if v else "counterexample",
                                          os.path.join(a.work, "ring.pml.trail")))
        return 0
    print(out[-4000:])
    bound = depth_bound(search)
    print("FAIL: mutant %s survived: the model no longer detects %s" % (label, what))
    if bound:
        print("  (searched within the depth bound %s, SEARCH in run_model.py: its counterexample may "
              "now lie deeper; raise the bound above the trail's depth, or remove it)" % bound)
    return 1


if __name__ == "__main__":
    sys.exit(main())
