#!/usr/bin/env python3
"""The cost model against measured times (scripts/cluster/calibrate.sh, docs/cluster.md).

    calibrate-report.py --label L --tuning FILE --predicted FILE --bench FILE [--csv OUT]

--predicted: agx-info --predictions (bytes_per_rank,algorithm,predicted_us,auto);
--bench: agx-bench --csv of the same job shape and tuning file. Joins them on (size,
algorithm) for the regular, out-of-place, barrier-timed rows and prints markdown: the two
levels of the tuning file; per algorithm the median relative error of the prediction,
(predicted - measured) / measured, over the sizes (median of the absolute values, and the
signed median: > 0 the model is slow, < 0 it is fast); per size what `auto` ran against
the best forced algorithm (within 10%?). --csv writes every joined row. Exit status 1
when a file lacks what is needed (a message says which).
"""
import argparse
import csv
import statistics
import sys


def read_tuning(path):
    keys, header = {}, []
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] in ("machine", "mpi", "date", "command"):
                header.append(line.rstrip("\n"))
            elif len(w) == 2:
                try:
                    keys[w[0]] = float(w[1])
                except ValueError:
                    pass
    return keys, header


def read_bench(path):
    with open(path) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    out = {}
    for r in rows:
        if r["form"] != "regular" or r["in_place"] != "0" or r["method"] != "barrier":
            continue
        if r["verified"] != "ok" or not r["median_us"]:
            continue
        out[(int(r["bytes_per_rank"]), r["candidate"])] = (float(r["median_us"]), r["ran"])
    return out, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--tuning", required=True)
    ap.add_argument("--predicted", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--csv")
    a = ap.parse_args()

    keys, header = read_tuning(a.tuning)
    with open(a.predicted) as f:
        pred = list(csv.DictReader(f))
    if not pred:
        sys.exit(f"calibrate-report: no predictions in {a.predicted}")
    measured, rows = read_bench(a.bench)
    if not measured:
        sys.exit(f"calibrate-report: no verified regular out-of-place barrier rows in {a.bench}")
    shape = rows[0]
    nodes, rpn, ranks = shape["nodes"], shape["ranks_per_node"], shape["ranks"]

    print(f"### {a.label}: {nodes} nodes x {rpn} ranks ({ranks} ranks)\n")
    for h in header:
        print(f"    {h}")
    print()
    print("| level | alpha (us) | beta (GB/s) | overhead (us/msg) | rendezvous (us) |")
    print("|---|---|---|---|---|")
    for lv in ("node", "network"):
        beta = keys.get(f"{lv}.beta_s_per_byte", 0)
        print(f"| {lv} | {keys.get(f'{lv}.alpha_s', 0) * 1e6:.2f} | "
              f"{(1e-9 / beta) if beta > 0 else float('inf'):.3f} | "
              f"{keys.get(f'{lv}.overhead_s', 0) * 1e6:.2f} | {keys.get(f'{lv}.rendezvous_s', 0) * 1e6:.2f} |")
    print()

    joined, model_choice = [], {}
    for p in pred:
        b, alg, us = int(p["bytes_per_rank"]), p["algorithm"], float(p["predicted_us"])
        if p["auto"] == "1":
            model_choice[b] = alg
        m = measured.get((b, alg))
        if m:
            joined.append((b, alg, us, m[0], (us - m[0]) / m[0]))
    if not joined:
        sys.exit("calibrate-report: no size and algorithm is in both the predictions and the bench CSV")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["profile", "nodes", "ranks_per_node", "bytes_per_rank", "algorithm",
                        "predicted_us", "measured_us", "error"])
            for b, alg, us, m, e in joined:
                w.writerow([a.label, nodes, rpn, b, alg, f"{us:.2f}", f"{m:.2f}", f"{e:.3f}"])

    algs = sorted({j[1] for j in joined}, key=lambda x: [j[1] for j in joined].index(x))
    sizes = sorted({j[0] for j in joined})
    print("Predicted against measured (median over sizes of (predicted - measured) / measured):\n")
    print("| algorithm | sizes | median abs error | median signed error | worst (size) |")
    print("|---|---|---|---|---|")
    all_abs = []
    for alg in algs:
        errs = [(j[4], j[0]) for j in joined if j[1] == alg]
        ab = [abs(e) for e, _ in errs]
        all_abs += ab
        worst = max(errs, key=lambda x: abs(x[0]))
        print(f"| {alg} | {len(errs)} | {statistics.median(ab) * 100:.0f}% | "
              f"{statistics.median([e for e, _ in errs]) * 100:+.0f}% | {worst[0] * 100:+.0f}% ({worst[1]} B) |")
    print(f"| all | {len(all_abs)} | {statistics.median(all_abs) * 100:.0f}% | | |")
    print()

    print("`auto` against the best forced algorithm (measured medians, us):\n")
    print("| bytes/rank | model's choice | auto ran | auto | best forced | best | auto/best | within 10% |")
    print("|---|---|---|---|---|---|---|---|")
    ok = 0
    for b in sizes:
        forced = [(m[0], alg) for (bb, alg), m in measured.items()
                  if bb == b and alg not in ("auto", "mpi", "mpi-agx", "copy")]
        au = measured.get((b, "auto"))
        if not forced or not au:
            continue
        best_us, best = min(forced)
        ratio = au[0] / best_us
        ok += ratio <= 1.10
        print(f"| {b} | {model_choice.get(b, '?')} | {au[1]} | {au[0]:.1f} | {best} | {best_us:.1f} | "
              f"{ratio:.2f} | {'yes' if ratio <= 1.10 else 'no'} |")
    print(f"\n`auto` within 10% of the best forced algorithm at {ok} of {len(sizes)} sizes.")
    mpi = [(b, measured[(b, 'mpi')][0]) for b in sizes if (b, "mpi") in measured]
    if mpi:
        print("\nThe MPI library's MPI_Allgather (us): " +
              ", ".join(f"{b} B {us:.1f}" for b, us in mpi))


if __name__ == "__main__":
    main()
