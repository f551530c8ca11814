#!/usr/bin/env python3
"""Plots and summarizes a run-grid CSV.

    tools/sim/plot-grid.py docs/scale/grid.csv        # PNGs beside the CSV + summary.md

One PNG per platform family (topology, ranks per node): a panel per rank count, simulated
time over the per-rank size, one line per agx algorithm, auto dashed, SMPI's selectors in
grey. summary.md: per point the simulated best, auto's choice and its prediction error.
Needs python3-matplotlib (Debian); re-executes under /usr/bin/python3 when the current
python lacks it.
"""
import csv
import os
import sys
from collections import defaultdict

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    plt = None


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def fmt_bytes(b):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b // k} {unit}"
    return f"{b} B"


def summary(rows):
    """Markdown table: one line per (platform, size)."""
    points = defaultdict(dict)
    for r in rows:
        ok = r["status"] == "ok" and r["sim_s"] and r["sim_s"] != "nan"
        if ok or (r["status"] == "unsimulated" and r["algo"] == "auto"):
            points[(r["platform"], int(r["nranks"]), int(r["ppn"]), int(r["bytes"]))][r["algo"]] = r
    out = ["| platform | N | ppn | size | best agx (µs) | best SMPI selector (µs) | agx/SMPI | auto picks | auto/best agx | pred/sim of auto |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(points, key=lambda k: (k[1], k[0], k[3])):
        algos = points[key]
        agx = {a: float(r["sim_s"]) for a, r in algos.items() if not a.startswith("smpi:") and a != "auto"}
        auto = algos.get("auto")
        if auto and auto["status"] == "ok" and "/" not in auto["ran"] and auto["ran"] not in agx:
            agx[auto["ran"]] = float(auto["sim_s"])  # a planner the grid runs only through auto
        smpi = {a: float(r["sim_s"]) for a, r in algos.items() if a.startswith("smpi:")}
        if not agx:
            continue
        best = min(agx, key=agx.get)
        sbest = min(smpi, key=smpi.get) if smpi else None
        auto_txt = ratio = err = "—"
        if auto and auto["status"] == "unsimulated":
            auto_txt = f"{auto['ran']} (not simulated)"
        elif auto:
            auto_txt = auto["ran"]
            ratio = f"{float(auto['sim_s']) / agx[best]:.2f}"
            err = f"{float(auto['pred_s']) / float(auto['sim_s']):.2f}"
        s_txt = f"{sbest[5:]} {smpi[sbest] * 1e6:.1f}" if sbest else "—"
        vs = f"{agx[best] / smpi[sbest]:.2f}" if sbest else "—"
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {fmt_bytes(key[3])} | {best} {agx[best] * 1e6:.1f} "
                   f"| {s_txt} | {vs} | {auto_txt} | {ratio} | {err} |")
    return "\n".join(out) + "\n"


def prediction_table(rows):
    """Per agx algorithm: median and range of predicted/simulated over all points."""
    ratios = defaultdict(list)
    for r in rows:
        if r["status"] == "ok" and r["pred_s"] not in ("", "nan") and r["sim_s"] and r["algo"] != "auto":
            ratios[r["algo"]].append(float(r["pred_s"]) / float(r["sim_s"]))
    out = ["| algorithm | points | pred/sim median | min | max |", "|---|---|---|---|---|"]
    for a in sorted(ratios):
        v = sorted(ratios[a])
        out.append(f"| {a} | {len(v)} | {v[len(v) // 2]:.2f} | {v[0]:.2f} | {v[-1]:.2f} |")
    return "\n".join(out) + "\n"


def plot(rows, folder):
    fams = defaultdict(list)
    for r in rows:
        fams[(r["topology"], int(r["ppn"]))].append(r)
    for (topo, ppn), rs in sorted(fams.items()):
        ns = sorted({int(r["nranks"]) for r in rs})
        fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 3.8), squeeze=False)
        for ax, n in zip(axes[0], ns):
            lines = defaultdict(list)
            for r in rs:
                if int(r["nranks"]) == n and r["status"] == "ok" and r["sim_s"]:
                    lines[r["algo"]].append((int(r["bytes"]), float(r["sim_s"]) * 1e6))
            for algo, pts in sorted(lines.items()):
                pts.sort()
                style = dict(color="grey", lw=1, ls=":") if algo.startswith("smpi:") else {}
                if algo == "auto":
                    style = dict(color="black", lw=2.5, ls="--", alpha=0.6)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=algo, **style)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{topo}, N={n}, {ppn}/node", fontsize=9)
            ax.set_xlabel("bytes per rank")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("simulated time (µs)")
        axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
        fig.tight_layout()
        path = os.path.join(folder, f"{topo}-{ppn}ppn.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        print(f"wrote {path}")


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    rows = load(sys.argv[1])
    folder = os.path.dirname(os.path.abspath(sys.argv[1]))
    with open(os.path.join(folder, "summary.md"), "w") as f:
        f.write(summary(rows) + "\n" + prediction_table(rows))
    print(f"wrote {os.path.join(folder, 'summary.md')}")
    if plt is None:
        sys.stderr.write("plot-grid: no matplotlib, no PNGs (apt-get install python3-matplotlib)\n")
        return 0
    plot(rows, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
