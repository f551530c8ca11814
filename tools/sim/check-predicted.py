#!/usr/bin/env python3
"""A model change against simulated times, without simulating again (SMPI's times do not
depend on the model): the predictions of `run-grid.py --predict-only` joined with a grid's
simulated rows of the same points.

    tools/sim/check-predicted.py GRID.csv PREDICTED.csv [--platforms P1,P2] [--misses]

Prints pred/sim per algorithm (radix variants together) and topology, then per point
auto's new pick, its simulated time (from the grid: the row that ran the same algorithm),
agx's best and the best fair rule there; --misses: only the points where auto is more
than 5 % above agx's best or above the best fair rule, or its pick was not simulated.
"""
import argparse
import csv
import statistics
from collections import defaultdict

RULES = ("ompi41", "mpich", "han")


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def agx_row(algo):
    return not algo.startswith("smpi:") and algo not in ("auto", "mpi") + RULES


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("grid")
    ap.add_argument("predicted")
    ap.add_argument("--platforms")
    ap.add_argument("--misses", action="store_true")
    args = ap.parse_args()
    only = set(args.platforms.split(",")) if args.platforms else None
    sim = defaultdict(dict)  # (platform, bytes) -> what ran -> simulated seconds
    rules = defaultdict(dict)
    for r in load(args.grid):
        if r["status"] != "ok" or r["sim_s"] in ("", "nan") or (only and r["platform"] not in only):
            continue
        key = (r["platform"], int(r["bytes"]))
        if r["algo"] in RULES:
            rules[key][r["algo"]] = float(r["sim_s"])
        elif agx_row(r["algo"]) or r["algo"] == "auto":
            sim[key][r["ran"]] = float(r["sim_s"])
    err = defaultdict(list)
    picks = {}
    for r in load(args.predicted):
        key = (r["platform"], int(r["bytes"]))
        if key not in sim:
            continue
        if r["algo"] == "auto":
            picks[key] = (r["ran"], float(r["pred_s"]))
        elif agx_row(r["algo"]) and r["ran"] in sim[key]:
            err[(r["algo"].split(":")[0], r["topology"])].append(float(r["pred_s"]) / sim[key][r["ran"]])
    print("| algorithm | topology | pred/sim median, min-max (points) |\n|---|---|---|")
    for (a, t), v in sorted(err.items()):
        print(f"| {a} | {t} | {statistics.median(v):.2f}, {min(v):.2f}-{max(v):.2f} ({len(v)}) |")
    print("\n| platform | size | agx best us | auto picks | auto us | auto/best | best fair rule | auto/fair |")
    print("|---|---|---|---|---|---|---|---|")
    within = below = total = 0
    for key in sorted(picks, key=lambda k: (k[0].split("-")[1], k[0], k[1])):
        pick, _ = picks[key]
        best = min(sim[key], key=sim[key].get)
        fair = min(rules[key], key=rules[key].get) if rules[key] else None
        t = sim[key].get(pick)
        total += 1
        if t is None:
            print(f"| {key[0]} | {key[1]} | {best} {sim[key][best] * 1e6:.1f} | {pick} | not simulated | | | |")
            continue
        ratio = t / sim[key][best]
        fratio = t / rules[key][fair] if fair else float("nan")
        within += ratio <= 1.05
        below += not fair or fratio <= 1.0 + 1e-9
        if args.misses and ratio <= 1.05 and (not fair or fratio <= 1.0 + 1e-9):
            continue
        print(f"| {key[0]} | {key[1]} | {best} {sim[key][best] * 1e6:.1f} | {pick} | {t * 1e6:.1f} | "
              f"{ratio:.2f} | {fair} | {fratio:.2f} |")
    print(f"\nauto within 5 % of agx's best at {within} of {total} points, "
          f"at or below the best fair rule at {below} of {total}")


if __name__ == "__main__":
    main()
