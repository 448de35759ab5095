#!/usr/bin/env python3
"""Checks that every man page's .TH line names the CMake project version.

The fourth field of .TH (the page's source, "ringlog X.Y.Z") must be "ringlog" and
the version the project declares; a page whose .TH carries no version at all is
refused too, so that a new page cannot leave it out.
Usage: check_th_version.py VERSION MAN_DIR
"""
import os
import re
import shlex
import sys


def main():
    version, man_dir = sys.argv[1], sys.argv[2]
    want = f"ringlog {version}"
    pages = sorted(f for f in os.listdir(man_dir) if re.search(r"\.[1-8]$", f))
    ok = bool(pages)
    if not pages:
        print(f"no man pages in {man_dir}")
    for name in pages:
        th = [l for l in open(os.path.join(man_dir, name)).read().splitlines() if l.startswith(".TH ")]
        if len(th) != 1:
            print(f"{name}: {len(th)} .TH lines, expected one")
            ok = False
            continue
        fields = shlex.split(th[0][4:])
        if len(fields) < 4 or fields[3] != want:
            got = fields[3] if len(fields) >= 4 else "(none)"
            print(f"{name}: .TH says {got!r}, expected {want!r} (CMakeLists.txt project version)")
            ok = False
    if ok:
        print(f"{len(pages)} pages carry {want!r}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
