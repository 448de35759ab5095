#!/usr/bin/env python3
"""The tree speaks of the product, never of its tracker: no tracked file may name a
tracker issue or a work session by its number (the word, a space, an optional '#', a
digit). A benchmark target or a test is named by what it measures or pins down instead.

Usage: no_tracker_references_test.py GIT SOURCE_DIR
Exits 0 when nothing matches, 1 listing every match, 77 (skipped) when SOURCE_DIR is not
a git checkout (a release tarball: there are no tracked files to search).
"""
import subprocess
import sys

# Written so that this file does not match itself: "[ ]" is not a space in the text.
PATTERN = r"(issue|session)[ ]#?[0-9]"


def main():
    git, src = sys.argv[1], sys.argv[2]
    inside = subprocess.run([git, "-C", src, "rev-parse", "--is-inside-work-tree"],
                            capture_output=True, text=True)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        print(f"SKIPPED: {src} is not a git checkout")
        return 77
    # -I: binary files (the plot) are not text; -i: a capital letter counts as well.
    r = subprocess.run([git, "-C", src, "grep", "-n", "-I", "-i", "-E", "-e", PATTERN],
                       capture_output=True, text=True)
    if r.returncode == 1:
        print("no tracker references in the tracked files")
        return 0
    if r.returncode != 0:
        print(f"git grep failed ({r.returncode}): {r.stderr.strip()}")
        return 2
    print("tracker references (name the thing by what it is instead):")
    print(r.stdout, end="")
    return 1


if __name__ == "__main__":
    sys.exit(main())
