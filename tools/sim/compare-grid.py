#!/usr/bin/env python3
"""The model's error and auto's standing in run-grid CSVs, as markdown (docs/scale.md).

    tools/sim/compare-grid.py BEFORE.csv AFTER.csv [--platforms P1,P2]

pred/sim per algorithm (radix variants together) and topology, median and min-max, before
and after; then per point: agx's best (every agx row, auto's pick and radix variants
included), auto's pick and auto/best, the best fair rule (ompi41, mpich, han) and
auto/fair, before and after. A point counts where both files simulated it.
"""
import argparse
import csv
import statistics
from collections import defaultdict

RULES = ("ompi41", "mpich", "han")


def load(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    return [r for r in rows if r["status"] == "ok" and r["sim_s"] not in ("", "nan")]


def errors(rows):
    out = defaultdict(list)
    for r in rows:
        a = r["algo"]
        if a.startswith("smpi:") or a in ("auto", "mpi") + RULES:
            continue
        out[(a.split(":")[0], r["topology"])].append(float(r["pred_s"]) / float(r["sim_s"]))
    return out


def points(rows):
    pts = defaultdict(dict)
    for r in rows:
        pts[(r["platform"], int(r["bytes"]))][r["algo"]] = r
    out = {}
    for key, d in pts.items():
        agx = {a: float(r["sim_s"]) for a, r in d.items()
               if not a.startswith("smpi:") and a not in ("auto", "mpi") + RULES}
        if "auto" in d:
            agx.setdefault(d["auto"]["ran"], float(d["auto"]["sim_s"]))
        if not agx or "auto" not in d:
            continue
        best = min(agx, key=agx.get)
        rules = {a: float(d[a]["sim_s"]) for a in RULES if a in d}
        fair = min(rules, key=rules.get) if rules else None
        auto = float(d["auto"]["sim_s"])
        out[key] = dict(best=best, best_s=agx[best], auto=d["auto"]["ran"], auto_s=auto,
                        ratio=auto / agx[best], fair=fair,
                        fair_ratio=auto / rules[fair] if fair else float("nan"))
    return out


def summary(values):
    return f"{statistics.median(values):.2f}, {min(values):.2f}–{max(values):.2f} ({len(values)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--platforms", help="comma-separated: only these")
    args = ap.parse_args()
    keep = set(args.platforms.split(",")) if args.platforms else None
    b, a = ([r for r in load(p) if keep is None or r["platform"] in keep] for p in (args.before, args.after))
    eb, ea = errors(b), errors(a)
    print("| algorithm | topology | before: median, min–max (points) | after |\n|---|---|---|---|")
    for k in sorted(set(eb) | set(ea)):
        print(f"| {k[0]} | {k[1]} | {summary(eb[k]) if k in eb else '—'} | {summary(ea[k]) if k in ea else '—'} |")
    pb, pa = points(b), points(a)
    print("\n| platform | size | before: auto (auto/best, auto/fair) | after: agx best µs | auto | auto/best | best fair rule | auto/fair |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(set(pb) & set(pa), key=lambda k: (int(k[0].split("-")[1][:-1]), k[0], k[1])):
        x, y = pb[key], pa[key]
        print(f"| {key[0]} | {key[1]} | {x['auto']} ({x['ratio']:.2f}, {x['fair_ratio']:.2f}) | "
              f"{y['best']} {y['best_s'] * 1e6:.1f} | {y['auto']} | {y['ratio']:.2f} | {y['fair']} | "
              f"{y['fair_ratio']:.2f} |")
    for name, p in (("before", pb), ("after", pa)):
        common = [p[k] for k in set(pb) & set(pa)]
        within = sum(1 for v in common if v["ratio"] <= 1.05)
        fair = sum(1 for v in common if v["fair_ratio"] <= 1.0 + 1e-9)
        worst = max(common, key=lambda v: v["ratio"])
        print(f"\n{name}: auto within 5 % of agx's best at {within} of {len(common)} points, worst "
              f"{worst['ratio']:.2f}; auto at or below the best fair rule at {fair} of {len(common)}, "
              f"auto/fair {min(v['fair_ratio'] for v in common):.2f}–{max(v['fair_ratio'] for v in common):.2f}")


if __name__ == "__main__":
    main()
