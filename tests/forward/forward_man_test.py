#!/usr/bin/env python3
"""ringlog-forward(1) against the tool and the counter list: the COUNTERS section lists
exactly the counters of readers/ringlog-forward/counters_forward.def with their descriptions.
(Options and exit codes: tests/man/check_man.py.)

usage: forward_man_test.py RINGLOG_FORWARD MAN_PAGE COUNTERS_DEF
"""
import re
import subprocess
import sys

tool, man_path, def_path = sys.argv[1:4]
help_text = subprocess.run([tool, "--help"], capture_output=True, text=True, check=True, timeout=30).stdout


def plain(s):
    return re.sub(r"\\f[BIRP]", "", s).replace("\\-", "-").replace('"', "")


sections, cur = {}, None
for line in open(man_path).read().splitlines():
    if line.startswith(".SH "):
        cur = plain(line[4:]).strip()
        sections[cur] = []
    elif cur:
        sections[cur].append(line)

failures = []
man_counters = {}
cl = sections.get("COUNTERS", [])
for i, line in enumerate(cl):
    if line.strip() == ".TP" and i + 2 < len(cl):
        man_counters[plain(re.sub(r"^\.B\s+", "", cl[i + 1])).strip()] = plain(cl[i + 2]).strip()
def_counters = {}
for line in open(def_path):
    m = re.match(r'^RINGLOG_COUNTER\((\w+),\s*(\w+),\s*(\w+),\s*(\w+),\s*"(.*)"\)\s*$', line)
    if m:
        name, t, l, fm, d = m.groups()
        def_counters["FORWARD.NAME." + name] = f"{d} ({t}, {l}, {fm})."
if len(def_counters) < 4:
    failures.append(f"could not read {def_path}")
for k, v in def_counters.items():
    if man_counters.get(k) != v:
        failures.append(f"counter {k}: man page has {man_counters.get(k)!r}, .def has {v!r}")
for k in man_counters.keys() - def_counters.keys():
    failures.append(f"counter {k} is in the man page but not in {def_path}")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"man page matches: {len(def_counters)} counters")
