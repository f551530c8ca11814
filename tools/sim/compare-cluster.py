#!/usr/bin/env python3
"""Simulated against measured on a cluster: joins agx-bench's medians on the cluster, the
cost model's predictions there (agx-info --predictions, with the cluster's tuning file) and
the simulation of the same points on the platform made from that file
(tools/sim/cluster-platform.py, then tools/sim/run-grid.py --params), and prints markdown.

    tools/sim/compare-cluster.py [--dir docs/scale/cluster-1g] [--profile 1g] [--csv OUT.csv]

Reads DIR/bench-P.csv, DIR/predicted-P.csv and DIR/sim-P.csv. Per algorithm and size:
sim/measured (the simulator's error), model/measured (the cost model's) and model/sim;
`auto` is what agx-bench's auto ran (its prediction: that algorithm's), `mpi` is the MPI
library's MPI_Allgather against SMPI's `ompi` selector. Then per algorithm the median and
the worst ratio over the sizes (worst: farthest from 1, either way), and per size the
fastest algorithm measured, simulated and predicted.
"""
import argparse
import csv
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def size_text(b):
    return f"{b // 1048576} MiB" if b >= 1048576 else f"{b // 1024} KiB" if b >= 1024 else f"{b} B"


def worst(points):
    """(ratio, size) farthest from 1 (in log terms)."""
    return max(points, key=lambda p: abs(math.log(p[0])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=os.path.join(ROOT, "docs", "scale", "cluster-1g"))
    ap.add_argument("--profile", default="1g")
    ap.add_argument("--csv", help="write every joined point here")
    args = ap.parse_args()
    path = lambda kind: os.path.join(args.dir, f"{kind}-{args.profile}.csv")  # noqa: E731
    bench = {(r["candidate"], int(r["bytes_per_rank"])): r for r in rows(path("bench"))}
    pred = {(r["algorithm"], int(r["bytes_per_rank"])): float(r["predicted_us"]) for r in rows(path("predicted"))}
    sim = {}
    for r in rows(path("sim")):
        if r["status"] == "ok":
            name = "mpi" if r["algo"] == "smpi:ompi" else r["algo"]
            sim[(name, int(r["bytes"]))] = r
    algos = []
    for (a, _b) in bench:
        if a not in algos:
            algos.append(a)
    sizes = sorted({b for (_a, b) in bench})
    points = []  # every (algorithm, size) measured and simulated
    for a in algos:
        for b in sizes:
            m, s = bench.get((a, b)), sim.get((a, b))
            if m is None or s is None:
                continue
            ran = m["ran"]  # auto: what it ran on the cluster
            model = pred.get((ran, b))
            measured_us, sim_us = float(m["median_us"]), float(s["sim_s"]) * 1e6
            points.append({
                "algorithm": a, "bytes_per_rank": b, "cluster_ran": ran,
                "sim_ran": s["ran"], "measured_us": measured_us,
                "p10_us": float(m["p10_us"]), "p90_us": float(m["p90_us"]), "sim_us": sim_us,
                "model_us": model, "sim_model_us": float(s["pred_s"]) * 1e6 if s["pred_s"] != "nan" else None,
            })
    if not points:
        sys.exit("compare-cluster.py: no point is both measured and simulated")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(points[0]) + ["sim_over_measured", "model_over_measured"])
            w.writeheader()
            for p in points:
                w.writerow({**p, "sim_us": f"{p['sim_us']:.3f}",
                            "sim_model_us": f"{p['sim_model_us']:.3f}" if p["sim_model_us"] else "",
                            "sim_over_measured": f"{p['sim_us'] / p['measured_us']:.4f}",
                            "model_over_measured": f"{p['model_us'] / p['measured_us']:.4f}"
                            if p["model_us"] else ""})

    print(f"Per algorithm and size, µs (measured: agx-bench's median, p10–p90; sim: one simulated call; "
          f"model: the cost model's prediction on the cluster):\n")
    print("| algorithm | size | measured | p10–p90 | sim | sim/measured | model | model/measured | model/sim |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in points:
        name = p["algorithm"] + (f" ({p['cluster_ran']})" if p["algorithm"] == "auto" else "")
        model = p["model_us"]
        print(f"| {name} | {size_text(p['bytes_per_rank'])} | {p['measured_us']:.1f} | "
              f"{p['p10_us']:.0f}–{p['p90_us']:.0f} | {p['sim_us']:.1f} | {p['sim_us'] / p['measured_us']:.2f} | "
              + (f"{model:.1f} | {model / p['measured_us']:.2f} | {model / p['sim_us']:.2f} |" if model
                 else "— | — | — |"))

    print("\nPer algorithm over the sizes: median and worst (farthest from 1, its size):\n")
    print("| algorithm | sizes | sim/measured median | worst | model/measured median | worst | model/sim median | worst |")
    print("|---|---|---|---|---|---|---|---|")
    every = {"sim": [], "model": []}
    for a in algos:
        ps = [p for p in points if p["algorithm"] == a]
        if not ps:
            continue
        sm = [(p["sim_us"] / p["measured_us"], p["bytes_per_rank"]) for p in ps]
        mm = [(p["model_us"] / p["measured_us"], p["bytes_per_rank"]) for p in ps if p["model_us"]]
        ms = [(p["model_us"] / p["sim_us"], p["bytes_per_rank"]) for p in ps if p["model_us"]]
        every["sim"] += [r for r, _ in sm]
        every["model"] += [r for r, _ in mm]
        cell = lambda xs: (f"{statistics.median(r for r, _ in xs):.2f} | "  # noqa: E731
                           f"{worst(xs)[0]:.2f} ({size_text(worst(xs)[1])})") if xs else "— | —"
        print(f"| {a} | {len(ps)} | {cell(sm)} | {cell(mm)} | {cell(ms)} |")
    print(f"\nAll points: sim/measured median {statistics.median(every['sim']):.2f} "
          f"({min(every['sim']):.2f}–{max(every['sim']):.2f}, {len(every['sim'])} points); "
          f"model/measured median {statistics.median(every['model']):.2f} "
          f"({min(every['model']):.2f}–{max(every['model']):.2f}, {len(every['model'])} points).")

    print("\nPer size over agx's algorithms (auto and mpi aside): sim/measured median (min–max); the fastest "
          "measured, simulated and predicted; what auto ran and auto/best:\n")
    print("| size | sim/measured | measured best | sim best | model best | auto ran (cluster / sim) | "
          "auto/best measured | auto/best sim |")
    print("|---|---|---|---|---|---|---|---|")
    for b in sizes:
        ps = [p for p in points if p["bytes_per_rank"] == b and p["algorithm"] not in ("auto", "mpi")]
        if not ps:
            continue
        mb = min(ps, key=lambda p: p["measured_us"])
        sb = min(ps, key=lambda p: p["sim_us"])
        withm = [p for p in ps if p["model_us"]]
        pb = min(withm, key=lambda p: p["model_us"]) if withm else None
        au = next((p for p in points if p["bytes_per_rank"] == b and p["algorithm"] == "auto"), None)
        auto_cell = (f"{au['cluster_ran']} / {au['sim_ran']} | {au['measured_us'] / mb['measured_us']:.2f} | "
                     f"{au['sim_us'] / sb['sim_us']:.2f}") if au else "— | — | —"
        r = [p["sim_us"] / p["measured_us"] for p in ps]
        print(f"| {size_text(b)} | {statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f}) | "
              f"{mb['algorithm']} {mb['measured_us']:.1f} | {sb['algorithm']} {sb['sim_us']:.1f} | "
              + (f"{pb['algorithm']} {pb['model_us']:.1f}" if pb else "—") + f" | {auto_cell} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
