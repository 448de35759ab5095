#!/usr/bin/env python3
"""ringlog-stat(1) against `ringlog-stat --help` and the counter lists: every option of
--help is an item of the man page's OPTIONS section and every item there an option of
--help; the exit codes listed by --help are those of EXIT STATUS; the COUNTERS section
lists exactly the counters of the MAIN and VBE lists (ringproxy's, proxy/server/counters)
and of the RING list (ringlog/defs/counters_ring.def), with their descriptions.

usage: stat_man_test.py RINGLOG_STAT MAN_PAGE MAIN_DEF VBE_DEF RING_DEF
"""
import re
import subprocess
import sys

stat, man_path = sys.argv[1], sys.argv[2]
main_def, vbe_def, ring_def = sys.argv[3], sys.argv[4], sys.argv[5]
help_text = subprocess.run([stat, "--help"], capture_output=True, text=True, check=True).stdout

help_opts = set()
for line in help_text.splitlines():
    m = re.match(r"^  (-\S+)", line)
    if m:
        help_opts.update(o for o in m.group(1).split(",") if o.startswith("-"))


def plain(s):
    s = re.sub(r"\\f[BIRP]", "", s).replace("\\-", "-").replace('"', "")
    return s


man = open(man_path).read().splitlines()
sections, cur = {}, None
for line in man:
    if line.startswith(".SH "):
        cur = plain(line[4:]).strip()
        sections[cur] = []
    elif cur:
        sections[cur].append(line)

man_opts = set()
lines = sections.get("OPTIONS", [])
for i, line in enumerate(lines):
    if line.strip() == ".TP" and i + 1 < len(lines):
        item = plain(re.sub(r"^\.(BR|BI|B|IR|I)\s+", "", lines[i + 1]))
        man_opts.update(t.strip(",") for t in item.split() if t.startswith("-"))

failures = []
for o in sorted(help_opts - man_opts):
    failures.append(f"option {o} of --help is not in the man page's OPTIONS")
for o in sorted(man_opts - help_opts):
    failures.append(f"option {o} of the man page is not in --help")
if not help_opts or "--prometheus" not in help_opts:
    failures.append(f"could not read the options of --help: {help_opts}")

codes_help = set(re.findall(r"(\d) (?:ok|no such|bad command|instance unreadable|terminal)", help_text))
codes_man = set()
ex = sections.get("EXIT STATUS", [])
for i, line in enumerate(ex):
    if line.strip() == ".TP" and i + 1 < len(ex):
        codes_man.add(plain(re.sub(r"^\.B\s+", "", ex[i + 1])).strip())
if codes_help != codes_man or not codes_help:
    failures.append(f"exit codes differ: --help {sorted(codes_help)}, man {sorted(codes_man)}")

# COUNTERS: "GROUP.name" items (VBE.NAME.name for per-backend ones) with "desc (t, l, f)."
man_counters = {}
cl = sections.get("COUNTERS", [])
for i, line in enumerate(cl):
    if line.strip() == ".TP" and i + 2 < len(cl):
        man_counters[plain(re.sub(r"^\.B\s+", "", cl[i + 1])).strip()] = plain(cl[i + 2]).strip()
def_counters = {}
for fname, prefix in ((main_def, "MAIN."), (vbe_def, "VBE.NAME."), (ring_def, "RING.")):
    for line in open(fname):
        m = re.match(r'^RINGLOG_COUNTER\((\w+),\s*(\w+),\s*(\w+),\s*(\w+),\s*"(.*)"\)\s*$', line)
        if m:
            name, t, l, fm, d = m.groups()
            def_counters[prefix + name] = f"{d} ({t}, {l}, {fm})."
if len(def_counters) < 40:
    failures.append(f"could not read the .def lists: {len(def_counters)} counters")
for k, v in def_counters.items():
    if man_counters.get(k) != v:
        failures.append(f"counter {k}: man page has {man_counters.get(k)!r}, .def has {v!r}")
for k in man_counters.keys() - def_counters.keys():
    failures.append(f"counter {k} is in the man page but in no .def list")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"man page matches --help: {sorted(help_opts)}, exit codes {sorted(codes_man)}, "
      f"{len(def_counters)} counters")
