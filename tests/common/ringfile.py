"""A ring file's header as the scripted tests see it: tail, head, the wake-up counters
and the pinned-reader table, so that a test can wait for a reader's state (attached,
asleep on the futex, caught up with the tail) instead of sleeping.

The offsets come from docs/FORMAT.md's tables (the ones tests/docs checks against the
compiled layout), so there is no second copy of the layout here. Reads are plain
file reads of a live mapping: callers poll them (procs.wait_for), never trust one
read of a field that is changing.
"""
import os
import re
import struct

_FORMAT_MD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "FORMAT.md")
_SIZES = {1: "B", 2: "H", 4: "I", 8: "Q"}
_TAIL_LOCK = 1 << 63


def _tables():
    """{table: {field: (offset, size)}} from FORMAT.md's `<!-- offsets: NAME -->` tables."""
    tables, name = {}, None
    with open(_FORMAT_MD, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"<!-- offsets: (\w+) -->", line)
            if m:
                name = m.group(1)
                tables[name] = {}
                continue
            if name is None:
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[0].isdigit() and cells[1].isdigit():
                tables[name][cells[2]] = (int(cells[0]), int(cells[1]))
            elif not line.startswith("|"):
                name = None
    return tables


_T = _tables()
HEADER_LEN = _T["Header"]["readers"][0] + _T["Header"]["readers"][1]
_READERS = _T["Header"]["readers"][0]
_SLOT = 64


def _field(buf, base, table, name):
    off, size = _T[table][name]
    return struct.unpack_from("<" + _SIZES[size], buf, base + off)[0]


def header(path):
    """The header fields the tests wait on, and `readers`: the claimed reader slots
    ({pid, pos, msgs_read, next_pos})."""
    with open(path, "rb") as f:
        buf = f.read(HEADER_LEN)
    h = {k: _field(buf, 0, "Header", k) for k in ("tail", "head", "msgs_written", "msgs_dropped", "pinned",
                                                    "waiters", "futex")}
    h["locked"] = bool(h["tail"] & _TAIL_LOCK)
    h["tail"] &= ~_TAIL_LOCK
    h["readers"] = []
    for i in range(_field(buf, 0, "Header", "reader_slots")):
        base = _READERS + _SLOT * i
        pid = _field(buf, base, "ReaderSlot", "pid")
        if pid:
            h["readers"].append({k: _field(buf, base, "ReaderSlot", k) for k in ("pid", "pos", "msgs_read",
                                                                                 "next_pos")})
    return h


def reader(path, pid):
    """The reader slot that process pid holds in the ring at path, or None."""
    try:
        h = header(path)
    except (OSError, struct.error):
        return None
    return next((r for r in h["readers"] if r["pid"] == pid), None)


def caught_up(path, pid):
    """True when pid's pinned reader holds the newest position (nothing left to read:
    tail - 1 - pos == 0) and is not moving."""
    try:
        h = header(path)
    except (OSError, struct.error):
        return False
    r = next((r for r in h["readers"] if r["pid"] == pid), None)
    return r is not None and r["next_pos"] == 0 and r["pos"] + 1 == h["tail"]
