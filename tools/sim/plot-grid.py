#!/usr/bin/env python3
"""Plots and summarizes a run-grid CSV.

    tools/sim/plot-grid.py docs/scale/grid.csv        # PNGs beside the CSV + summary.md

One PNG per platform family (topology, ranks per node): a panel per rank count, simulated
time over the per-rank size, one line per agx algorithm, auto dashed, SMPI's selectors in
grey. summary.md: per platform an overview; per point the simulated best, auto's choice
and its prediction error; per algorithm and topology the model's error.
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


def points(rows):
    """One dict per (platform, size): agx's best, SMPI's best, auto's pick and errors."""
    grouped = defaultdict(dict)
    for r in rows:
        ok = r["status"] == "ok" and r["sim_s"] and r["sim_s"] != "nan"
        if ok or (r["status"] == "unsimulated" and r["algo"] == "auto"):
            grouped[(r["platform"], int(r["nranks"]), int(r["ppn"]), int(r["bytes"]))][r["algo"]] = r
    out = []
    for key in sorted(grouped, key=lambda k: (k[1], k[0], k[3])):
        algos = grouped[key]
        agx = {a: float(r["sim_s"]) for a, r in algos.items() if not a.startswith("smpi:") and a != "auto"}
        auto = algos.get("auto")
        if auto and auto["status"] == "ok" and "/" not in auto["ran"] and auto["ran"] not in agx:
            agx[auto["ran"]] = float(auto["sim_s"])  # a planner the grid runs only through auto
        smpi = {a: float(r["sim_s"]) for a, r in algos.items() if a.startswith("smpi:")}
        if not agx:
            continue
        best = min(agx, key=agx.get)
        sbest = min(smpi, key=smpi.get) if smpi else None
        pt = dict(platform=key[0], n=key[1], ppn=key[2], bytes=key[3], best=best, best_s=agx[best],
                  sbest=sbest, sbest_s=smpi[sbest] if sbest else None, auto=None, auto_ratio=None,
                  auto_err=None, unsimulated=False)
        if auto:
            pt["auto"] = auto["ran"]
            if auto["status"] == "unsimulated":
                pt["unsimulated"] = True
            else:
                pt["auto_ratio"] = float(auto["sim_s"]) / agx[best]
                pt["auto_err"] = float(auto["pred_s"]) / float(auto["sim_s"])
        out.append(pt)
    return out


def summary(rows):
    """Markdown table: one line per (platform, size)."""
    out = ["| platform | N | ppn | size | best agx (µs) | best SMPI selector (µs) | agx/SMPI | auto picks | auto/best agx | pred/sim of auto |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for p in points(rows):
        s_txt = f"{p['sbest'][5:]} {p['sbest_s'] * 1e6:.1f}" if p["sbest"] else "—"
        vs = f"{p['best_s'] / p['sbest_s']:.2f}" if p["sbest"] else "—"
        auto_txt = "—" if p["auto"] is None else p["auto"] + (" (not simulated)" if p["unsimulated"] else "")
        ratio = f"{p['auto_ratio']:.2f}" if p["auto_ratio"] is not None else "—"
        err = f"{p['auto_err']:.2f}" if p["auto_err"] is not None else "—"
        out.append(f"| {p['platform']} | {p['n']} | {p['ppn']} | {fmt_bytes(p['bytes'])} | {p['best']} "
                   f"{p['best_s'] * 1e6:.1f} | {s_txt} | {vs} | {auto_txt} | {ratio} | {err} |")
    return "\n".join(out) + "\n"


def overview(rows):
    """Per platform: agx's best over SMPI's best, and auto over agx's best (min-max)."""
    by = defaultdict(list)
    for p in points(rows):
        by[(p["n"], p["platform"])].append(p)
    out = ["| platform | sizes | agx/SMPI min–max (sizes with a selector) | auto/best agx median, max | auto loses most at |",
           "|---|---|---|---|---|"]
    for (n, platform), ps in sorted(by.items()):
        vs = [p["best_s"] / p["sbest_s"] for p in ps if p["sbest"]]
        au = sorted((p["auto_ratio"], p["bytes"]) for p in ps if p["auto_ratio"] is not None)
        vs_txt = f"{min(vs):.2f}–{max(vs):.2f} ({len(vs)})" if vs else "—"
        au_txt = f"{au[len(au) // 2][0]:.2f}, {au[-1][0]:.2f}" if au else "—"
        worst = f"{fmt_bytes(au[-1][1])}" if au and au[-1][0] > 1.005 else "—"
        out.append(f"| {platform} | {len(ps)} | {vs_txt} | {au_txt} | {worst} |")
    return "\n".join(out) + "\n"


def prediction_table(rows):
    """Per agx algorithm and topology: median and range of predicted/simulated."""
    ratios = defaultdict(list)
    for r in rows:
        if r["status"] == "ok" and r["pred_s"] not in ("", "nan") and r["sim_s"] and r["algo"] != "auto":
            ratios[(r["algo"], r["topology"])].append(float(r["pred_s"]) / float(r["sim_s"]))
    out = ["| algorithm | topology | points | pred/sim median | min | max |", "|---|---|---|---|---|---|"]
    for (a, topo) in sorted(ratios):
        v = sorted(ratios[(a, topo)])
        out.append(f"| {a} | {topo} | {len(v)} | {v[len(v) // 2]:.2f} | {v[0]:.2f} | {v[-1]:.2f} |")
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
        f.write(overview(rows) + "\n" + summary(rows) + "\n" + prediction_table(rows))
    print(f"wrote {os.path.join(folder, 'summary.md')}")
    if plt is None:
        sys.stderr.write("plot-grid: no matplotlib, no PNGs (apt-get install python3-matplotlib)\n")
        return 0
    plot(rows, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
