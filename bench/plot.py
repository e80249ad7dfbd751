"""Plots the client latency time series written by `make bench` (examples/bench/).

Usage: python3 bench/plot.py target/bench/latency.csv docs/bench-latency.png

The CSV has one row per request: series, t_ms (start time, ms from the start of the drain window or
of the baseline window), op, latency_us; and one comment line per series,
`# window,<series>,<window length in ms>`. Each series name is "<drain kind>: drain" or
"<drain kind>: baseline". One panel per drain kind: the drain and its baseline on the same axes,
the window shaded.
"""

import csv
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    series = OrderedDict()
    windows = {}
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#"):
                parts = line[1:].strip().split(",")
                if len(parts) == 3 and parts[0] == "window":
                    windows[parts[1]] = float(parts[2])
                continue
            if line.startswith("series,"):
                continue
            row = next(csv.reader([line]))
            name, t_ms, _op, lat_us = row
            series.setdefault(name, ([], []))
            series[name][0].append(float(t_ms))
            series[name][1].append(float(lat_us) / 1000.0)
    return series, windows


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py LATENCY_CSV OUT_PNG")
    src, out = sys.argv[1], sys.argv[2]
    series, windows = load(src)
    kinds = list(OrderedDict.fromkeys(name.split(":")[0] for name in series))
    if not kinds:
        sys.exit(f"no samples in {src}")
    fig, axes = plt.subplots(len(kinds), 1, figsize=(10, 3.6 * len(kinds)), squeeze=False)
    for ax, kind in zip(axes[:, 0], kinds):
        drain, base = f"{kind}: drain", f"{kind}: baseline"
        span = windows.get(drain, 0.0)
        lo, hi = -0.25 * max(span, 20.0), span + 0.25 * max(span, 20.0)
        for name, colour, label in (
            (base, "tab:blue", "baseline (no sweep)"),
            (drain, "tab:red", "during the drain"),
        ):
            if name not in series:
                continue
            ts, ls = series[name]
            pts = [(t, l) for t, l in zip(ts, ls) if lo <= t <= hi]
            if not pts:
                continue
            ax.scatter(
                [p[0] for p in pts],
                [p[1] for p in pts],
                s=4 if name == drain else 3,
                alpha=0.5,
                color=colour,
                label=f"{label}, {len(pts)} requests",
                linewidths=0,
            )
        ax.axvspan(0, span, color="tab:red", alpha=0.07, label=f"drain window ({span:.0f} ms)")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_xlabel("request start, ms from the start of the window (drain: its first tick)")
        ax.set_ylabel("round trip, ms (log)")
        ax.set_title(f"Client latency (PING / XADD / XREADGROUP) while the module drains: {kind}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper right", fontsize=8, markerscale=3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
