"""Plots the scaling figures `make bench` (examples/bench/) writes into target/bench.

Usage: python3 bench/plot_scaling.py target/bench docs

- readgroup.csv (pel,count,ratio): RECLAIM.READGROUP's server time per call over XREADGROUP's,
  by PEL size, one line per COUNT -> docs/bench-readgroup.png
- many.csv (policies,interval_ms,cpu_over_pct,ping_p99_base_us,ping_p99_module_us): the server's
  CPU over a server without the module, and another client's PING p99 on both, by number of
  policies -> docs/bench-many.png

A missing CSV (its section not run) is skipped.
"""

import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(path):
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def readgroup(data, out):
    r = rows(os.path.join(data, "readgroup.csv"))
    if not r:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    pels = sorted({int(x["pel"]) for x in r})
    labels = [f"{p:,}" for p in pels]
    for count in sorted({int(x["count"]) for x in r}):
        ys = []
        for p in pels:
            m = [float(x["ratio"]) for x in r if int(x["pel"]) == p and int(x["count"]) == count]
            ys.append(m[0] if m else float("nan"))
        ax.plot(labels, ys, marker="o", label=f"COUNT {count}")
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.axhline(1.1, color="red", linewidth=0.8, linestyle="--", label="target 1.1x")
    ax.set_xlabel("pending entries held by live consumers")
    ax.set_ylabel("server time per call / XREADGROUP's")
    ax.set_title("RECLAIM.READGROUP with nothing due, over XREADGROUP")
    ax.set_ylim(0.8, max(1.5, max(float(x["ratio"]) for x in r) + 0.1))
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bench-readgroup.png"), dpi=110)


def many(data, out):
    r = rows(os.path.join(data, "many.csv"))
    if not r:
        return
    labels = [f"{int(x['policies']):,}\nINTERVAL {int(x['interval_ms'])}" for x in r]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.bar(labels, [float(x["cpu_over_pct"]) for x in r], color="tab:blue")
    a.axhline(5.0, color="red", linewidth=0.8, linestyle="--", label="target 5%")
    a.set_ylabel("server CPU over the baseline, % of a core")
    a.set_title("CPU, nothing to do")
    a.legend()
    xs = range(len(r))
    w = 0.38
    b.bar([i - w / 2 for i in xs], [float(x["ping_p99_base_us"]) / 1000 for x in r], w, label="without the module")
    b.bar([i + w / 2 for i in xs], [float(x["ping_p99_module_us"]) / 1000 for x in r], w, label="with the module")
    b.set_xticks(list(xs))
    b.set_xticklabels(labels)
    b.set_ylabel("PING p99, ms")
    b.set_title("another client's PING")
    b.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bench-many.png"), dpi=110)


if __name__ == "__main__":
    data, out = sys.argv[1], sys.argv[2]
    readgroup(data, out)
    many(data, out)
