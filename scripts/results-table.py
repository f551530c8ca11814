#!/usr/bin/env python3
"""The drop-in against the MPI library, one markdown table per place (docs/results.md).

    scripts/results-table.py BENCH.csv [--method window] [--place out|in|both]

BENCH.csv: an agx-bench --csv run with the interposer preloaded (scripts/bench.sh, or
agx-bench --dropin require): the MPI library's own MPI_Allgather (mpi), the same call
through agx's interposer (mpi-agx), auto, the forced agx algorithms and the copy bound.
Per size of the regular form: MPI's median µs; the drop-in's, its ratio to MPI and what
it ran; the best forced algorithm and its ratio; the copy bound (N·M bytes written per
rank) and the drop-in's ratio to it. Below 1 in "vs MPI": agx is faster. The CSV's
'# load' comments, if any, are not read: the caller quotes the load average.
Exit status 2 when the CSV lacks the mpi or mpi-agx rows.
"""
import argparse
import csv
import sys


def size_text(b):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale and b % scale == 0:
            return "%d %s" % (b // scale, unit)
    return "%d B" % b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--method", default="window")
    ap.add_argument("--place", default="both", choices=["out", "in", "both"])
    a = ap.parse_args()
    meta, lines = {}, []
    with open(a.csv) as f:
        for line in f:
            if line.startswith("# ") and ":" in line:
                k, v = line[2:].split(":", 1)
                meta[k.strip()] = v.strip()
            elif not line.startswith("#"):
                lines.append(line)
    rows = [r for r in csv.DictReader(lines) if r["form"] == "regular" and r["method"] == a.method]
    places = {"out": ["0"], "in": ["1"], "both": ["0", "1"]}[a.place]
    for place in places:
        by = {}
        for r in rows:
            if r["in_place"] != place or r["verified"] not in ("ok", ""):
                continue
            by.setdefault(int(r["bytes_per_rank"]), {})[r["candidate"]] = r
        if not by or not all("mpi" in c and "mpi-agx" in c for c in by.values()):
            print("results-table.py: %s lacks mpi or mpi-agx rows (%s, in_place=%s)" %
                  (a.csv, a.method, place), file=sys.stderr)
            sys.exit(2)
        n = next(iter(rows))["ranks"]
        print("N = %s, %s, %s method (µs, median of the slowest rank; ratio to MPI):\n" %
              (n, "in place" if place == "1" else "out of place", a.method))
        print("| per rank | MPI | drop-in | vs MPI | drop-in ran | best forced | vs MPI | copy bound | drop-in / bound |")
        print("|---|---|---|---|---|---|---|---|---|")
        for b in sorted(by):
            c = by[b]
            mpi = float(c["mpi"]["median_us"])
            d = float(c["mpi-agx"]["median_us"])
            forced = [(float(r["median_us"]), k) for k, r in c.items()
                      if k not in ("mpi", "mpi-agx", "auto", "copy-bound")]
            best = min(forced) if forced else (float("nan"), "-")
            bound = float(c["copy-bound"]["median_us"]) if "copy-bound" in c else float("nan")
            print("| %s | %.2f | %.2f | %.2fx | %s | %s %.2f | %.2fx | %.2f | %.2fx |" %
                  (size_text(b), mpi, d, d / mpi, c["mpi-agx"]["ran"], best[1], best[0],
                   best[0] / mpi, bound, d / bound))
        print()


if __name__ == "__main__":
    main()
