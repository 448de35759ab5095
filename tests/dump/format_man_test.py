#!/usr/bin/env python3
"""ringlog-format(5) must match docs/FORMAT.md, whose tables tests/docs checks against
the compiled layout: the header table (offset, size, field), the writer- and
reader-slot fields (offset and type), the message kinds, the varint examples, and the
HAProxy ring layouts. A stale man page (a field moved in the code and in FORMAT.md
but not here) fails with the differing rows.
Usage: format_man_test.py MAN_PAGE FORMAT_MD
"""
import re
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def md_table(md, marker):
    """Rows (lists of cells) of the markdown table after '<!-- marker -->'."""
    lines = md.splitlines()
    try:
        i = next(k for k, l in enumerate(lines) if l.strip() == f"<!-- {marker} -->")
    except StopIteration:
        check(False, f"FORMAT.md has no table marked {marker}")
        return []
    rows = []
    for l in lines[i + 1:]:
        t = l.strip()
        if not t.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip().strip("`") for c in re.split(r"(?<!\\)\|", t)[1:-1]]
        rows.append(cells)
    return rows[2:]  # header and separator rows


def md_table_after(md, heading):
    """Rows of the first markdown table after a line starting with `heading`."""
    lines = md.splitlines()
    i = next((k for k, l in enumerate(lines) if l.startswith(heading)), None)
    if i is None:
        check(False, f"FORMAT.md has no '{heading}'")
        return []
    rows = []
    for l in lines[i + 1:]:
        t = l.strip()
        if not t.startswith("|"):
            if rows:
                break
            continue
        rows.append([c.strip().strip("`") for c in re.split(r"(?<!\\)\|", t)[1:-1]])
    return rows[2:]


def roff_text(s):
    """The man page with font escapes and roff quoting removed, one line per line."""
    s = re.sub(r"\\f[BIRP]", "", s)
    s = s.replace("\\-", "-").replace("\\(mu", "*").replace("\\(en", "-").replace("\\(em", "-")
    return s


def main():
    man_path, md_path = sys.argv[1:3]
    man = roff_text(open(man_path, encoding="utf-8").read())
    md = open(md_path, encoding="utf-8").read()

    # -- header: the tbl table between .TS and .TE, rows "offset<TAB>size<TAB>field<TAB>...".
    m = re.search(r"^\.TS\n(.*?)^\.TE$", man, re.S | re.M)
    check(m is not None, "no header table (.TS/.TE) in the man page")
    man_rows = set()
    if m:
        for l in m.group(1).splitlines():
            f = l.split("\t")
            if len(f) >= 3 and f[0].isdigit():
                man_rows.add((int(f[0]), int(f[1]), f[2]))
    md_rows = {(int(r[0]), int(r[1]), r[2]) for r in md_table(md, "offsets: Header") if r[2] != "(padding)"}
    check(len(md_rows) > 30, f"FORMAT.md header table has {len(md_rows)} rows")
    for r in sorted(md_rows - man_rows):
        check(False, f"header field {r} (offset, size, name) of FORMAT.md is not in the man page")
    for r in sorted(man_rows - md_rows):
        check(False, f"header field {r} of the man page is not in FORMAT.md")
    # The padding the man page names must be exactly FORMAT.md's.
    pad_md = sorted((int(r[0]), int(r[0]) + int(r[1]) - 1) for r in md_table(md, "offsets: Header") if r[2] == "(padding)")
    pm = re.search(r"Bytes not listed \(([^)]*)\)", man)
    pad_man = sorted(tuple(int(x) for x in p.strip().split("-")) for p in pm.group(1).split(",")) if pm else []
    check(pad_man == pad_md, f"padding: man page {pad_man}, FORMAT.md {pad_md}")

    # -- slots: ".B name\n(uNN at OFF" in the man page; the offsets tables in FORMAT.md.
    for section, marker, base in (("Writer slot", "offsets: WriterSlot", 4096), ("Reader slot", "offsets: ReaderSlot", 20480)):
        sm = re.search(r"^\.SS " + section + r"\n(.*?)(?=^\.S[SH] )", man, re.S | re.M)
        check(sm is not None, f"no '{section}' section in the man page")
        if not sm:
            continue
        body = sm.group(1)
        check(f"at offset {base} + 64*i" in body.replace(" * ", "*").replace("*i", "*i"),
              f"{section}: base offset {base} not stated")
        man_f = {name: (int(off), typ) for name, typ, off in re.findall(r"^\.B (\w+)\n\((u\d+) at (\d+)", body, re.M)}
        md_f = {}
        for r in md_table(md, marker):
            if r[2].startswith("reserved"):
                continue
            md_f[r[2]] = (int(r[0]), r[3].split()[0])
        check(man_f == md_f, f"{section}: man page {man_f} != FORMAT.md {md_f}")

    # -- message kinds.
    kinds = {r[0]: int(r[1]) for r in md_table(md, "kinds")}
    km = re.search(r"^\.B kind\n", man, re.M)
    ktext = man[km.end():km.end() + 200] if km else ""
    for name, v in (("data", kinds.get("data")), ("notice", kinds.get("notice")), ("pad", kinds.get("pad"))):
        check(f"{v} = {name}" in ktext, f"kind {name} = {v} not in the man page")

    # -- varint examples: every "V = HEX" the man page gives must be in FORMAT.md's table.
    ex = dict((int(r[0]), r[1]) for r in md_table(md, "varint-examples"))
    em = re.search(r"Examples: (.*?)\.\n", man)
    check(em is not None, "no varint examples in the man page")
    if em:
        for v, b in re.findall(r"(\d+) = ([0-9A-F ]+?)(?:,|$)", em.group(1)):
            check(ex.get(int(v)) == b.strip(), f"varint {v}: man page '{b.strip()}', FORMAT.md '{ex.get(int(v))}'")

    # -- HAProxy layouts: the offsets of FORMAT.md's tables appear in the man page's section.
    hm = re.search(r"^\.SH HAPROXY RING FILES\n(.*?)(?=^\.SH )", man, re.S | re.M)
    check(hm is not None, "no HAPROXY RING FILES section in the man page")
    if hm:
        h = " ".join(hm.group(1).replace("\n.I ", " ").replace("\n.IR ", " ").replace('"', "").split())
        for r in md_table_after(md, "**Pre-3.0 (`haproxy-v1`)**"):
            check(re.search(rf"{r[2]}( pointer)? \({r[0]}\)", h) is not None, f"v1 {r[2]} at {r[0]} not in the man page: {h}")
        for r in md_table_after(md, "**3.0 and later"):
            name, v2, v2a = r[3], r[0], r[1]
            if name == "area":
                check(f"area at rsvd" in h and f"area at {v2a}" in h, f"v2 area offsets not in the man page")
                continue
            check(re.search(rf"{name} \({v2}\)", h) is not None, f"v2 {name} at {v2} not in the man page")
            if v2a != v2:
                check(re.search(rf"{name} at {v2a}", h) is not None, f"v2a {name} at {v2a} not in the man page")
        check("rsvd < 4096" in h and "(v2a when rsvd >= 192)" in h, f"the v2 detection rule is not in the man page: {h}")

    print(f"{len(failures)} failures" if failures else "ringlog-format(5) agrees with docs/FORMAT.md")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
