#!/usr/bin/env python3
"""Plots bench_ring's JSON output: msg/s against writer threads, ringlog and the
global-mutex baseline (median of the repetitions, min..max as error bars). Reads only
what Google Benchmark wrote; it never reruns anything."""
import argparse
import json
import re
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = re.compile(r"^(ringlog|mutex)/threads:(\d+)")


def load(paths):
    rates = defaultdict(list)  # (series, threads) -> [msg/s]
    passive = defaultdict(list)  # reader:0/1 -> [msg/s]
    context = {}
    for p in paths:
        with open(p) as f:
            doc = json.load(f)
        context = doc.get("context", context)
        for b in doc.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
                continue
            ips = b.get("items_per_second")
            if ips is None:
                continue
            name = b.get("run_name", b["name"])
            m = NAME.match(name)
            if m:
                rates[(m.group(1), int(m.group(2)))].append(ips)
            elif name.startswith("passive/reader:"):
                passive[name.split(":")[1].split("/")[0]].append(ips)
    return rates, passive, context


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("json", nargs="+", help="bench_ring --json=FILE output(s)")
    ap.add_argument("-o", "--out", default="bench/ring-scaling.png")
    ap.add_argument("--title", default=None)
    ap.add_argument("--compare", action="append", default=[], metavar="LABEL=JSON",
                    help="also plot the ringlog series of another run (e.g. a patched library)")
    args = ap.parse_args()

    rates, passive, ctx = load(args.json)
    if not rates:
        sys.exit("no ringlog/mutex results in " + ", ".join(args.json))

    fig, ax = plt.subplots(figsize=(8, 5.6), dpi=110)
    table = {}
    for series, label, style in (("ringlog", "ringlog (HAProxy 3.x queued ring)", "o-"),
                                 ("mutex", "global-mutex ring (baseline)", "s--")):
        xs = sorted(t for (s, t) in rates if s == series)
        if not xs:
            continue
        med = [statistics.median(rates[(series, t)]) / 1e6 for t in xs]
        lo = [m - min(rates[(series, t)]) / 1e6 for m, t in zip(med, xs)]
        hi = [max(rates[(series, t)]) / 1e6 - m for m, t in zip(med, xs)]
        ax.errorbar(xs, med, yerr=[lo, hi], fmt=style, capsize=3, label=label)
        table[series] = dict(zip(xs, med))
    for spec in args.compare:
        label, _, path = spec.partition("=")
        other, _, _ = load([path])
        xs = sorted(t for (s, t) in other if s == "ringlog")
        if xs:
            ax.plot(xs, [statistics.median(other[("ringlog", t)]) / 1e6 for t in xs], "^:", label=label)
    ax.set_xscale("log", base=2)
    xs_all = sorted({t for (_, t) in rates})
    ax.set_xticks(xs_all)
    ax.set_xticklabels([str(x) for x in xs_all])
    ax.set_xlabel("writer threads")
    ax.set_ylabel("million messages / s (HAProxy mix, ~213 B)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    cpus = ctx.get("num_cpus", "?")
    date = ctx.get("date", "")
    ax.set_title(args.title or f"ring write throughput, {cpus} CPUs, {date[:16]}")
    note = []
    if "0" in passive and "1" in passive:
        a, w = statistics.median(passive["0"]), statistics.median(passive["1"])
        note.append(f"1 writer + passive reader (other process): {w / a:.2f}x alone")
    q = ctx.get("ringlog_queues")
    if q:
        note.append(f"ringlog queues: {q}; median of {max(len(v) for v in rates.values())} run(s), bars min..max")
    if note:
        ax.text(0.01, 0.99, "\n".join(note), transform=ax.transAxes, fontsize=8, va="top")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(args.out)

    print(f"{'threads':>8} {'ringlog M/s':>12} {'mutex M/s':>10} {'ratio':>6}")
    for t in xs_all:
        r, m = table.get("ringlog", {}).get(t), table.get("mutex", {}).get(t)
        ratio = f"{r / m:6.2f}" if r and m else "     -"
        print(f"{t:>8} {r or 0:12.2f} {m or 0:10.2f} {ratio}")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
