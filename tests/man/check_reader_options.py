#!/usr/bin/env python3
"""Checks the reader options' one table (readers/common/reader_options.def) against the
tools that share it and their man pages.

For every tool given and every option of the table that the tool's --help lists:
its --help line carries the table's HELP text (and TYPE), and the entry of that option
in the OPTIONS section of the tool's man page opens with the table's MAN text, to the
letter; what follows it in the entry is the tool's own. Fails when a page's text of a
shared option differs from the table, or when a tool shows an option of the table with
other words than the table's.
Usage: check_reader_options.py DEF_FILE BINARY PAGE [BINARY PAGE...]
"""
import re
import subprocess
import sys

TOKEN = re.compile(r'\s+|//[^\n]*|"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z_0-9]*|[(),|]')


def c_string(lit):
    """The value of one C string literal (the escapes the table uses)."""
    out, i, body = [], 0, lit[1:-1]
    while i < len(body):
        c = body[i]
        if c == "\\":
            e = body[i + 1]
            if e not in 'n"\\':
                raise ValueError(f"unexpected escape \\{e} in {lit}")
            out.append("\n" if e == "n" else e)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_table(path):
    """[(group, name, field, type, help, man)] in the order of the .def."""
    src = open(path).read()
    tokens, pos = [], 0
    while pos < len(src):
        m = TOKEN.match(src, pos)
        if not m:
            raise ValueError(f"{path}: cannot read at offset {pos}: {src[pos:pos + 20]!r}")
        t = m.group(0)
        pos = m.end()
        if not t.strip() or t.startswith("//"):
            continue
        tokens.append(t)
    entries, i = [], 0
    while i < len(tokens):
        if tokens[i] != "READER_OPTION" or tokens[i + 1] != "(":
            raise ValueError(f"{path}: expected READER_OPTION(, got {tokens[i]!r}")
        i += 2
        args, cur = [], []
        while tokens[i] != ")":
            if tokens[i] == ",":
                args.append(cur)
                cur = []
            else:
                cur.append(tokens[i])
            i += 1
        args.append(cur)
        i += 1
        if len(args) != 6:
            raise ValueError(f"{path}: READER_OPTION with {len(args)} arguments, expected 6")
        vals = []
        for a in args:
            if a[0].startswith('"'):
                vals.append("".join(c_string(x) for x in a))
            else:
                vals.append(" ".join(a))
        entries.append(tuple(vals))
    return entries


def entry_in_page(src, name):
    """The text of the OPTIONS entry of option name (from its .B/.BI line), or None."""
    sect = re.search(r"^\.SH OPTIONS\n(.*?)(?=^\.SH |\Z)", src, re.S | re.M)
    if not sect:
        return None
    roff = name.replace("-", "\\-")
    for m in re.finditer(r"^\.TP\n(\.BI? [^\n]*\n.*?)(?=^\.TP\n|^\.SH |^\.SS |^\.PP\n|^\.IP|\Z)", sect.group(1),
                         re.S | re.M):
        head = m.group(1).split("\n", 1)[0]
        if re.match(r"\.BI? " + re.escape(roff) + r"(?![\w\\-])", head):
            return m.group(1)
    return None


def help_entries(text):
    """{option: its line(s) of --help}, continuation lines joined."""
    out, cur = {}, None
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"(-[\w-]+(?:,\s*-[\w-]+)*)\b(.*)", s)
        if m and line.startswith("  "):
            cur = [n.strip() for n in m.group(1).split(",")]
            for n in cur:
                out[n] = s
        elif cur and s and line.startswith("   "):
            for n in cur:
                out[n] += " " + s
        else:
            cur = None
    return out


def main():
    table = read_table(sys.argv[1])
    names = [e[1] for e in table]
    ok = True
    if len(set(names)) != len(names):
        print(f"options declared twice in {sys.argv[1]}")
        ok = False
    pairs = sys.argv[2:]
    for binary, page in zip(pairs[0::2], pairs[1::2]):
        r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            print(f"{binary} --help exited {r.returncode}")
            ok = False
            continue
        helps = help_entries(r.stdout)
        src = open(page).read()
        shared = 0
        for group, name, field, typ, help_text, man in table:
            if name not in helps:
                continue
            shared += 1
            line = " ".join(helps[name].split())
            if " ".join(help_text.split()) not in line or (typ and typ not in line):
                print(f"{binary}: --help shows {name} as {line!r}, the table as {typ} {help_text!r}")
                ok = False
            entry = entry_in_page(src, name)
            if entry is None:
                print(f"{page}: no OPTIONS entry for {name}")
                ok = False
            elif not entry.startswith(man):
                print(f"{page}: the entry of {name} does not open with the table's text.\n"
                      f"--- table:\n{man}--- page:\n{entry}")
                ok = False
        if shared == 0:
            print(f"{binary}: none of the table's options in --help")
            ok = False
        elif ok:
            print(f"{page}: {shared} shared options as the table says")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
