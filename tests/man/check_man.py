#!/usr/bin/env python3
"""Checks that a binary's --help and its man page document the same options.

Every option that --help lists must appear in the rendered man page, and every
option the man page's OPTIONS section describes must exist in --help.
Usage: check_man.py BINARY MANPAGE
"""
import re
import subprocess
import sys


def options(text):
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)", text))


def main():
    binary, page = sys.argv[1], sys.argv[2]
    helptext = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    if helptext.returncode != 0:
        print(f"{binary} --help exited {helptext.returncode}")
        return 1
    help_opts = set()
    for line in helptext.stdout.splitlines():
        s = line.strip()
        if s.startswith("-"):
            help_opts |= options(s.split("  ")[0])
    rendered = subprocess.run(["groff", "-man", "-Tutf8", "-P-cbou", page], capture_output=True,
                              text=True, timeout=30)
    if rendered.returncode != 0 or rendered.stderr.strip():
        print(f"groff could not render {page} cleanly: {rendered.stderr}")
        return 1
    man = rendered.stdout.replace("\u2010", "-").replace("\u2212", "-")
    missing = sorted(o for o in help_opts if o not in options(man))
    # Options the man page describes: lines of the OPTIONS section that start with one.
    section = re.search(r"\nOPTIONS\n(.*?)(\n[A-Z][A-Z ]+\n|\Z)", man, re.S)
    documented = set()
    if section:
        for line in section.group(1).splitlines():
            s = line.strip()
            if s.startswith("-") and line.startswith("       -"):
                documented |= options(s.split("  ")[0])
    extra = sorted(o for o in documented if o not in help_opts)
    ok = True
    if not help_opts:
        print("no options found in --help"); ok = False
    if missing:
        print(f"in --help but not in {page}: {' '.join(missing)}"); ok = False
    if extra:
        print(f"in {page} OPTIONS but not in --help: {' '.join(extra)}"); ok = False
    if ok:
        print(f"{len(help_opts)} options match between --help and {page}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
