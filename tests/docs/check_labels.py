#!/usr/bin/env python3
"""Keeps the memory-order labels of the code and their table in a document in step.

The document has a table whose header starts with `prefix` (the label prefixes and the
subsystems they name) and one or more tables whose header starts with `label` (one row
per label). In the sources, a label is *defined* by a comment that starts with it
(`// W3: ...`, `// L1`, `// K8, K4: ...`) on a statement that makes an atomic access,
or in the comment block right above such a statement. Fails when
  - a label defined in the code is not in the document's table, or the other way round;
  - a label-like token (`P1b`, `W12`) mentioned in a source or in the document names no
    row of the table;
  - an ordered access (a memory order other than relaxed, a fence, or an atomic call
    with the default seq_cst order) carries no label.
--drop-label X checks the checker: the first definition of X is removed in memory, and
the run must then fail (exit 0 if it did, 1 if it did not).
"""
import argparse
import re
import sys
from pathlib import Path

ATOMIC_CALL = re.compile(
    r"\.(load|store|exchange|compare_exchange_weak|compare_exchange_strong|fetch_add|fetch_sub|fetch_or|fetch_and)\s*\(")
# Relaxed atomic accessors of repair::View: a label may be defined at them.
WRAPPED = re.compile(r"\.(put|byte)\s*\(")
ORDERED = re.compile(r"memory_order_(acquire|release|acq_rel|seq_cst|consume)\b|atomic_thread_fence|atomic_signal_fence")


def table_rows(text):
    """Yields (header_first_cell, row_cells, line_no) for every Markdown table row."""
    header = None
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s.startswith("|"):
            header = None
            continue
        cells = [c.strip().strip("`").strip("*") for c in s.strip("|").split("|")]
        if header is None:
            header = cells[0].lower()
            continue
        if set(s) <= set("|-: "):
            continue
        yield header, cells, no


def parse_doc(path):
    text = Path(path).read_text()
    prefixes, labels = {}, {}
    for header, cells, no in table_rows(text):
        if header == "prefix" and re.fullmatch(r"[A-Z]{1,2}", cells[0]):
            prefixes[cells[0]] = cells[1] if len(cells) > 1 else ""
        elif header == "label" and re.fullmatch(r"[A-Z]{1,2}\d+", cells[0]):
            if cells[0] in labels:
                raise SystemExit(f"{path}:{no}: label {cells[0]} has two rows")
            labels[cells[0]] = no
    if not prefixes:
        raise SystemExit(f"{path}: no table with a `prefix` header")
    if not labels:
        raise SystemExit(f"{path}: no table with a `label` header")
    return text, prefixes, labels


def split_code(src):
    """Per line: (code with comments and literals blanked, comment text)."""
    code_lines, comment_lines = [], []
    code, comment = [], []
    i, n = 0, len(src)
    state = None  # None, 'line', 'block', 'str', 'chr'
    while i < n:
        c = src[i]
        if c == "\n":
            code_lines.append("".join(code))
            comment_lines.append("".join(comment))
            code, comment = [], []
            if state == "line":
                state = None
            i += 1
            continue
        if state is None:
            if src.startswith("//", i):
                state = "line"
                i += 2
                continue
            if src.startswith("/*", i):
                state = "block"
                i += 2
                continue
            if c == '"':
                state = "str"
            elif c == "'" and not (i > 0 and (src[i - 1].isalnum())):  # not a digit separator
                state = "chr"
            code.append(c)
        elif state in ("line", "block"):
            if state == "block" and src.startswith("*/", i):
                state = None
                i += 2
                continue
            comment.append(c)
        else:
            quote = '"' if state == "str" else "'"
            if c == "\\":
                code.append("  ")
                i += 2
                continue
            if c == quote:
                state = None
                code.append(c)
            else:
                code.append(" ")
        i += 1
    code_lines.append("".join(code))
    comment_lines.append("".join(comment))
    return code_lines, comment_lines


def statements(code_lines):
    """Statements as (first_line, last_line, text), split at ; { } (0-based lines)."""
    out, buf, start = [], [], None
    for no, line in enumerate(code_lines):
        if line.lstrip().startswith("#"):
            continue
        for ch in line:
            if ch in ";{}":
                if start is not None and "".join(buf).strip():
                    out.append((start, no, "".join(buf)))
                buf, start = [], None
                continue
            if start is None and not ch.isspace():
                start = no
            buf.append(ch)
        buf.append(" ")
    if start is not None and "".join(buf).strip():
        out.append((start, len(code_lines) - 1, "".join(buf)))
    return out


def check(doc, sources, mention_files, drop=None):
    text, prefixes, table = parse_doc(doc)
    pfx = "|".join(sorted(prefixes, key=len, reverse=True))
    token = re.compile(rf"\b(?:{pfx})\d+[a-z]?\b")
    lead = re.compile(rf"^\s*((?:{pfx})\d+(?:\s*,\s*(?:{pfx})\d+)*)\s*(:|$)")
    errors, defined, ordered_total = [], {}, 0

    for name, no, tok in ((doc, no, t) for no, line in enumerate(text.splitlines(), 1) for t in token.findall(line)):
        if tok not in table:
            errors.append(f"{name}:{no}: mentions {tok}, which has no row in its label table")

    dropped = False
    for path in sources:
        src = Path(path).read_text()
        code_lines, comment_lines = split_code(src)
        stmts = statements(code_lines)
        by_line = {}
        for idx, (a, b, _) in enumerate(stmts):
            for k in range(a, b + 1):
                by_line.setdefault(k, []).append(idx)
        # Labels attached to statements.
        attached = {idx: [] for idx in range(len(stmts))}
        for k, com in enumerate(comment_lines):
            m = lead.match(com)
            for tok in token.findall(com):
                if tok not in table:
                    errors.append(f"{path}:{k + 1}: mentions {tok}, which has no row in {doc}'s label table")
            if not m:
                continue
            labels = re.split(r"\s*,\s*", m.group(1))
            target = k
            if not code_lines[k].strip():  # a comment line: the block ends at the next code line
                target = k + 1
                while target < len(code_lines) and not code_lines[target].strip() and comment_lines[target].strip():
                    target += 1
                if target >= len(code_lines) or not code_lines[target].strip() \
                        or code_lines[target].lstrip().startswith("#"):
                    continue  # not attached to code: a list or a note
            for idx in by_line.get(target, []):
                attached[idx].extend((lab, k + 1) for lab in labels)
        if drop and not dropped:  # the first definition at an access goes, as if deleted
            for idx, (a, b, stmt) in enumerate(stmts):
                hits = [x for x in attached[idx] if x[0] == drop]
                if hits and (ATOMIC_CALL.search(stmt) or "atomic_thread_fence" in stmt):
                    attached[idx] = [x for x in attached[idx] if x != hits[0]]
                    dropped = True
                    break
        for idx, (a, b, stmt) in enumerate(stmts):
            is_atomic = bool(ATOMIC_CALL.search(stmt) or WRAPPED.search(stmt) or "atomic_thread_fence" in stmt)
            is_ordered = bool(ORDERED.search(stmt)) or (
                ATOMIC_CALL.search(stmt) is not None and "memory_order" not in stmt)
            if is_atomic:
                for lab, line in attached[idx]:
                    defined.setdefault(lab, []).append(f"{path}:{line}")
            if is_ordered:
                ordered_total += 1
                if not any(True for _ in attached[idx]):
                    errors.append(f"{path}:{a + 1}: ordered access without a label: {' '.join(stmt.split())[:100]}")

    for path in mention_files:
        for no, line in enumerate(Path(path).read_text().splitlines(), 1):
            for tok in token.findall(line):
                if tok not in table:
                    errors.append(f"{path}:{no}: mentions {tok}, which has no row in {doc}'s label table")

    for lab in sorted(set(defined) - set(table)):
        errors.append(f"{defined[lab][0]}: label {lab} is not in {doc}'s label table")
    for lab in sorted(set(table) - set(defined)):
        errors.append(f"{doc}:{table[lab]}: label {lab} is in the table but at no access in the code")
    stats = (f"{len(table)} labels in {doc} ({', '.join(sorted(prefixes))}), "
             f"{sum(len(v) for v in defined.values())} labelled sites, {ordered_total} ordered accesses")
    return errors, stats, dropped


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--doc", required=True)
    ap.add_argument("--mention", action="append", default=[], metavar="FILE",
                    help="another file whose label mentions must name rows of the table")
    ap.add_argument("--drop-label")
    ap.add_argument("sources", nargs="+")
    a = ap.parse_args()
    errors, stats, dropped = check(a.doc, a.sources, a.mention, a.drop_label)
    if a.drop_label:
        if not dropped:
            print(f"--drop-label {a.drop_label}: no definition of it found")
            return 1
        print(f"with the first definition of {a.drop_label} removed:")
        for e in errors:
            print("  " + e)
        if errors:
            print("the check fails, as it must")
            return 0
        print("the check still passes: it cannot see a missing label")
        return 1
    for e in errors:
        print(e)
    if errors:
        print(f"FAILED: {len(errors)} problem(s); {stats}")
        return 1
    print(f"ok: {stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
