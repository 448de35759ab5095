#!/usr/bin/env python3
"""Plots bench_ring's JSON output (--json=FILE): msg/s against writers for ringlog and
every peer measured in the same run (median of the rounds, min..max as error bars);
writers in one process as solid lines, in two processes as dashed lines at 2N writers.
Reads only what bench_ring wrote; it never reruns anything."""
import argparse
import json
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PEERS = (("ringlog", "ringlog", "o", "C0"),
         ("mutex", "mutex ring (lock, memcpy, unlock)", "s", "C1"),
         ("lttng", "LTTng-UST (snapshot session)", "^", "C2"),
         ("spdlog", "spdlog async (overrun_oldest)", "v", "C3"))


def load(paths):
    rates = defaultdict(list)  # (peer, procs, writers) -> [msg/s]
    context, unavailable = {}, {}
    for p in paths:
        with open(p) as f:
            doc = json.load(f)
        context = doc.get("context", context)
        unavailable.update(doc.get("unavailable", {}))
        for r in doc.get("results", []):
            rates[(r["peer"], r["procs"], r["writers"])].append(r["rate"])
    return rates, context, unavailable


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("json", nargs="+", help="bench_ring --json=FILE output(s)")
    ap.add_argument("-o", "--out", default="bench/ring-scaling.png")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()

    rates, ctx, unavailable = load(args.json)
    if not rates:
        sys.exit("no results in " + ", ".join(args.json))

    fig, ax = plt.subplots(figsize=(8.5, 6), dpi=110)
    for peer, label, marker, color in PEERS:
        for procs, style in ((1, "-"), (2, "--")):
            xs = sorted(w for (p, n, w) in rates if p == peer and n == procs)
            if not xs:
                continue
            vals = [rates[(peer, procs, w)] for w in xs]
            med = [statistics.median(v) / 1e6 for v in vals]
            lo = [m - min(v) / 1e6 for m, v in zip(med, vals)]
            hi = [max(v) / 1e6 - m for m, v in zip(med, vals)]
            ax.errorbar(xs, med, yerr=[lo, hi], fmt=marker + style, color=color, capsize=3,
                        label=label + (" - 2 processes" if procs == 2 else ""))
    xs_all = sorted({w for (_, _, w) in rates})
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs_all)
    ax.set_xticklabels([str(x) for x in xs_all])
    ax.set_xlabel("writers (threads in all processes)")
    ax.set_ylabel("million messages / s (HAProxy mix, ~213 B)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(args.title or "ring write throughput, {} CPUs, {}".format(ctx.get("num_cpus", "?"),
                                                                           ctx.get("date", "")[:16]))
    note = ["load {:.1f} to {:.1f}, nice {}; median of {} rounds of {} ms, bars min..max".format(
        ctx.get("load_start", 0), ctx.get("load_end", 0), ctx.get("nice", "?"), ctx.get("rounds", "?"),
        ctx.get("slice_ms", "?"))]
    if ctx.get("lttng_field"):
        note.append("LTTng event fields: " + ctx["lttng_field"])
    for k, v in sorted(unavailable.items()):
        note.append(f"{k}: {v}")
    ax.text(0.01, 0.99, "\n".join(note), transform=ax.transAxes, fontsize=7, va="top")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(args.out)

    names = [p for p, *_ in PEERS]
    print(f"{'writers':>8} {'procs':>5} " + " ".join(f"{n:>10}" for n in names))
    for procs in (1, 2):
        for w in xs_all:
            row = [rates.get((n, procs, w)) for n in names]
            if not any(row):
                continue
            print(f"{w:>8} {procs:>5} " + " ".join(
                f"{statistics.median(r) / 1e6:10.2f}" if r else f"{'-':>10}" for r in row))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
