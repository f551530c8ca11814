#!/usr/bin/env python3
"""The report of scripts/cluster/compare.sh: per profile and shape, each MPI library's
all-gather time and agx's drop-in time of the same run as a ratio to it (below 1: agx is
faster), with the link bound: the bytes a node must receive over its link (the blocks of
the ranks on other nodes) divided by the link rate. A PNG per profile beside the CSVs
(matplotlib, when installed)."""
import argparse
import csv
import os
import statistics
import sys

RATE = {"1g": 1e9 / 8, "10g": 10e9 / 8}  # bytes per second of one node link (tbf)
NAME = {"ompi": "Open MPI (tuned)", "han": "Open MPI coll/han", "mpich": "MPICH"}


def medians(path):
    """{bytes: {candidate: median µs over passes}} of an agx-bench CSV (out of place)."""
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            if r["in_place"] != "0" or not r["median_us"]:
                continue  # (a row without a median: a run stopped before its pass ended)
            rows.setdefault(int(r["bytes_per_rank"]), {}).setdefault(r["candidate"], []).append(
                float(r["median_us"]))
    return {b: {c: statistics.median(v) for c, v in cands.items()} for b, cands in rows.items()}


def human(b):
    for unit, name in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= unit:
            return f"{b // unit} {name}"
    return f"{b} B"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--profiles", required=True)
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--libs", default="ompi,han,mpich")
    a = ap.parse_args()
    libs = a.libs.split(",")
    for p in a.profiles.split(","):
        rate = RATE.get(p)
        figure = []
        print(f"## Profile {p}\n")
        for s in a.shapes.split(","):
            k, r = (int(x) for x in s.split("x"))
            data = {}
            for lib in libs:
                path = os.path.join(a.dir, f"{p}-{s}-{lib}.csv")
                if os.path.exists(path):
                    data[lib] = medians(path)
                else:
                    print(f"(missing: {path})", file=sys.stderr)
            sizes = sorted(set().union(*(d.keys() for d in data.values()))) if data else []
            print(f"### {k} nodes x {r} ranks, {p}\n")
            head = "| per rank |"
            for lib in data:
                head += f" {NAME[lib]} µs | agx drop-in / it |"
            head += " link bound µs |"
            print(head)
            print("|---|" + "---|---|" * len(data) + "---|")
            wins = {lib: [] for lib in data}
            for b in sizes:
                line = f"| {human(b)} |"
                for lib, d in data.items():
                    c = d.get(b, {})
                    if "mpi" in c and "mpi-agx" in c:
                        ratio = c["mpi-agx"] / c["mpi"]
                        wins[lib].append(ratio)
                        line += f" {c['mpi']:.1f} | {ratio:.2f}x |"
                    else:
                        line += " | |"
                bound = (k - 1) * r * b / rate * 1e6 if rate else float("nan")
                line += f" {bound:.1f} |"
                print(line)
            print()
            for lib, rs in wins.items():
                if rs:
                    faster = sum(1 for x in rs if x < 1)
                    print(f"- against {NAME[lib]}: agx faster at {faster} of {len(rs)} sizes, "
                          f"ratios {min(rs):.2f}-{max(rs):.2f}x")
            print()
            figure.append((s, k, r, data, sizes))
        plot(a.dir, p, rate, figure)


def plot(directory, profile, rate, figure):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no PNG)", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, len(figure), figsize=(5 * len(figure), 4), squeeze=False)
    for ax, (s, k, r, data, sizes) in zip(axes[0], figure):
        for lib, d in data.items():
            xs = [b for b in sizes if "mpi" in d.get(b, {})]
            ax.plot(xs, [d[b]["mpi"] for b in xs], marker="o", label=NAME[lib])
        if "ompi" in data:
            d = data["ompi"]
            xs = [b for b in sizes if "mpi-agx" in d.get(b, {})]
            ax.plot(xs, [d[b]["mpi-agx"] for b in xs], marker="s", linewidth=2, label="agx drop-in")
        if rate:
            ax.plot(sizes, [(k - 1) * r * b / rate * 1e6 for b in sizes], "k--", label="link bound")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{k} nodes x {r} ranks, {profile}")
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("µs (median, slowest rank)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(directory, f"compare-{profile}.png")
    fig.savefig(path, dpi=90)
    print(f"(PNG: {path})", file=sys.stderr)


if __name__ == "__main__":
    main()
