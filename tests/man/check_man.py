#!/usr/bin/env python3
"""Checks that a binary's --help and its man page document the same options and exit
codes.

Every option that --help lists must appear in the rendered man page, and every
option the man page's OPTIONS section describes must exist in --help. The exit
codes that --help lists ("Exit codes: 0 ok, 1 ...") are the items of the page's EXIT
STATUS, and all of them belong to the set every ringlog program shares (ringlog(7)).
Usage: check_man.py BINARY MANPAGE
"""
import re
import subprocess
import sys


def options(text):
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)", text))


SHARED_EXIT_CODES = {"0", "1", "2", "3", "4"}  # ringlog(7), EXIT STATUS; readers/common/program.hpp


def help_exit_codes(text):
    """The codes of the "Exit codes:" paragraph of --help (parenthesised details dropped)."""
    m = re.search(r"Exit codes:(.*)", text, re.S)
    if not m:
        return set()
    body = re.sub(r"\([^)]*\)", "", m.group(1))
    return set(re.findall(r"(?:^|,)\s*(\d+)\s", body))


def man_exit_codes(page):
    """The .TP items of the EXIT STATUS section of the page's source."""
    src = open(page).read()
    m = re.search(r"^\.SH EXIT STATUS\n(.*?)(?=^\.SH |\Z)", src, re.S | re.M)
    return set(re.findall(r"^\.TP\n\.B (\d+)$", m.group(1), re.M)) if m else set()


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
    codes_help, codes_man = help_exit_codes(helptext.stdout), man_exit_codes(page)
    if not codes_help or codes_help != codes_man:
        print(f"exit codes: --help lists {sorted(codes_help)}, {page} EXIT STATUS {sorted(codes_man)}"); ok = False
    if codes_help - SHARED_EXIT_CODES:
        print(f"exit codes {sorted(codes_help - SHARED_EXIT_CODES)} are not in the shared set of ringlog(7)"); ok = False
    if not help_opts:
        print("no options found in --help"); ok = False
    if missing:
        print(f"in --help but not in {page}: {' '.join(missing)}"); ok = False
    if extra:
        print(f"in {page} OPTIONS but not in --help: {' '.join(extra)}"); ok = False
    if ok:
        print(f"{len(help_opts)} options and exit codes {sorted(codes_help)} match between --help and {page}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
