#!/usr/bin/env python3
"""Checks that a program's --version (and -V) prints "NAME (ringlog) VERSION" with the
CMake project version, exits 0 and writes nothing to stderr.

Usage: check_version.py BINARY VERSION
"""
import os
import subprocess
import sys


def main():
    binary, version = sys.argv[1], sys.argv[2]
    want = f"{os.path.basename(binary)} (ringlog) {version}\n"
    ok = True
    for flag in ("--version", "-V"):
        r = subprocess.run([binary, flag], capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or r.stdout != want or r.stderr:
            print(f"{binary} {flag}: exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}; want {want!r}")
            ok = False
    if ok:
        print(f"{binary}: {want.strip()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
