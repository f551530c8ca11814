#!/usr/bin/env python3
"""Runs agx-bench under mpirun (no Slurm) and checks what it writes.

    bench-test.py --mpirun MPIRUN [--mpirun-arg ARG]... --np N --bench AGX_BENCH
                  [--kind openmpi|mpich] [--preload LIB] [--env K=V]...
                  [--expect-rc RC] [--expect-wrong NAME] [--expect-methods M,M]
                  [--expect-dropin active|inactive|absent] [--plot AGX_PLOT] -- BENCH_ARGS...

Checks: exit status; CSV metadata ('# key: value': agx version, host, CPU, cores, MPI
library, N, nodes, ranks per node) and columns; every row verified ok (or, for
--expect-wrong NAME, exactly NAME's rows WRONG and never timed); every asked form and
place present; per timing method, the MPI library's ratio is 1; busbw = algbw (N-1)/N;
algbw = total bytes / median; min <= mean <= max; window columns only on window rows;
every --expect-methods method present for every candidate; the drop-in candidate
(mpi-agx) went through agx's interposer (active: `ran` is an agx algorithm), through the
MPI library (inactive) or is absent; JSON has the same rows and metadata; the table
names every candidate. --preload LIB and --env K=V reach the ranks only (-x for Open
MPI, -genv for MPICH). With --plot, agx-plot turns the CSV into PNGs (exit 77, SKIP,
without matplotlib).
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

COLUMNS = ("ranks,nodes,ranks_per_node,memory,form,in_place,bytes_per_rank,total_bytes,method,candidate,"
           "ran,iters,samples,invalid,median_us,mean_us,p10_us,p90_us,min_us,max_us,algbw_GBps,busbw_GBps,"
           "ratio_to_mpi,window_us,sync_us,verified,note").split(",")
META = ("agx_version", "date_utc", "hostname", "cpu_model", "cores", "mpi_library", "mpi_standard",
        "ranks", "nodes", "ranks_per_node_min", "ranks_per_node_max", "memory", "calls", "command")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def read_csv(path):
    meta, lines = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                k, _, v = line[1:].partition(":")
                meta[k.strip()] = v.strip()
            elif line.strip():
                lines.append(line)
    reader = csv.DictReader(lines)
    return meta, reader.fieldnames, list(reader)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--mpirun-arg", action="append", default=[])
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--kind", choices=["openmpi", "mpich"], default="openmpi")
    ap.add_argument("--preload")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--expect-rc", type=int, default=0)
    ap.add_argument("--expect-wrong")
    ap.add_argument("--expect-methods")
    ap.add_argument("--expect-dropin", choices=["active", "inactive", "absent"])
    ap.add_argument("--expect-calls", choices=["blocking", "nonblocking"], default="blocking")
    ap.add_argument("--expect-message", help="with --expect-rc 2: text the message must contain")
    ap.add_argument("--plot")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    plot_skipped = ""
    bench_args = [x for x in a.bench_args if x != "--"]

    with tempfile.TemporaryDirectory(prefix="agx-bench-test.") as tmp:
        csv_path, json_path = os.path.join(tmp, "b.csv"), os.path.join(tmp, "b.json")
        env = ([f"LD_PRELOAD={a.preload}"] if a.preload else []) + a.env
        launch_env = []
        for kv in env:
            k, _, v = kv.partition("=")
            launch_env += ["-x", f"{k}={v}"] if a.kind == "openmpi" else ["-genv", k, v]
        cmd = ([a.mpirun] + a.mpirun_arg + ["-np", str(a.np)] + launch_env + [a.bench, "--csv", csv_path,
               "--json", json_path, "--no-progress"] + bench_args)
        print("$", " ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=500)
        print(p.stdout[-6000:])
        print(p.stderr[-3000:], file=sys.stderr)
        if a.expect_rc == 2:  # a usage error: message, no output files
            check(p.returncode == 2, f"exit status {p.returncode}, expected 2")
            check("agx-bench:" in p.stderr, "no agx-bench message on stderr")
            if a.expect_message:
                check(a.expect_message in p.stderr, f"message lacks {a.expect_message!r}")
            if failures:  # (an early return here once let every usage test pass)
                print(f"{len(failures)} check(s) failed")
                sys.exit(1)
            print("agx-bench: usage error reported as expected")
            return
        check(p.returncode == a.expect_rc, f"exit status {p.returncode}, expected {a.expect_rc}")
        at = [i for i, x in enumerate(bench_args) if x == "--passes"]  # the last one wins
        passes = int(bench_args[at[-1] + 1]) if at else 5

        meta, fields, rows = read_csv(csv_path)
        check(fields == COLUMNS, f"CSV columns {fields}")
        for k in META:
            check(meta.get(k), f"CSV metadata {k} missing")
        check(meta.get("ranks") == str(a.np), f"metadata ranks {meta.get('ranks')} != {a.np}")
        check(meta.get("calls") == a.expect_calls, f"metadata calls {meta.get('calls')!r} != {a.expect_calls!r}")
        if a.expect_calls == "nonblocking":
            check("# calls: nonblocking" in p.stdout, "the table does not say the calls were nonblocking")
        check(meta.get("agx_version") not in (None, "", "unknown"), "agx version not recorded")
        check(rows, "no CSV rows")
        n = a.np
        algorithms = set()  # agx's algorithm names, as auto's `ran` shows them
        for r in rows:
            tag = f"{r['form']}/{r['in_place']}/{r['bytes_per_rank']}/{r['method']}/{r['candidate']}"
            check(r["invalid"].isdigit(), f"{tag}: invalid {r['invalid']!r} is not a count")
            if r["method"] == "window" and r["verified"] == "ok":
                check(float(r["window_us"]) > 0 and float(r["sync_us"]) >= 0, f"{tag}: window/sync columns")
            else:
                check(r["window_us"] == "" and r["sync_us"] == "", f"{tag}: window columns on a {r['method']} row")
            if a.expect_wrong and r["candidate"] == a.expect_wrong:
                check(r["verified"] == "WRONG", f"{tag}: verified {r['verified']}, expected WRONG")
                check(r["median_us"] == "" and r["busbw_GBps"] == "", f"{tag}: a WRONG row has times")
                continue
            check(r["verified"] == "ok", f"{tag}: verified {r['verified']} {r['note']}")
            if r["verified"] != "ok":
                continue
            if r["samples"] == "0":  # window method: every start missed (reported, not timed)
                check(int(r["invalid"]) > 0 and r["median_us"] == "", f"{tag}: no samples, yet times")
                continue
            check(int(r["ranks"]) == n and int(r["total_bytes"]) == n * int(r["bytes_per_rank"]),
                  f"{tag}: ranks/total_bytes")
            med, alg, bus = float(r["median_us"]), float(r["algbw_GBps"]), float(r["busbw_GBps"])
            check(float(r["min_us"]) <= med <= float(r["max_us"]), f"{tag}: min <= median <= max")
            check(float(r["p10_us"]) <= med <= float(r["p90_us"]), f"{tag}: p10 <= median <= p90")
            check(float(r["min_us"]) <= float(r["mean_us"]) <= float(r["max_us"]), f"{tag}: min <= mean <= max")
            check(int(r["samples"]) + int(r["invalid"]) == int(r["iters"]) * passes,
                  f"{tag}: samples {r['samples']} + invalid {r['invalid']} != iters {r['iters']} x {passes} passes")
            if med > 0:
                # median_us is printed to 1 ns (0.0005 us of rounding); an osu sample is a
                # mean over ranks, so its median need not be a whole number of ns.
                total = int(r["total_bytes"]) / 1e3
                lo, hi = total / (med + 0.0005), total / max(med - 0.0005, 1e-9)
                check(lo * (1 - 1e-3) - 1e-4 <= alg <= hi * (1 + 1e-3) + 1e-4,
                      f"{tag}: algbw {alg} != total / median {total / med}")
            check(abs(bus - alg * (n - 1) / n) <= 1e-4 + 1e-3 * alg, f"{tag}: busbw {bus} != algbw (N-1)/N")
            if r["candidate"] == "mpi":
                check(r["ratio_to_mpi"] == "1.0000", f"{tag}: mpi ratio {r['ratio_to_mpi']}")
            if r["candidate"] == "auto":
                check(r["ran"] not in ("", "auto"), f"{tag}: auto did not say what ran")
            if r["candidate"] not in ("mpi", "mpi-agx", "copy-bound"):
                algorithms.add(r["ran"].split(":")[0])
        dropin = [r for r in rows if r["candidate"] == "mpi-agx"]
        if a.expect_dropin == "absent":
            check(not dropin, "mpi-agx rows present without the interposer")
        elif a.expect_dropin:
            check(dropin, "no mpi-agx rows")
            for r in dropin:  # (a row whose window starts were all missed still says who took it)
                if r["verified"] != "ok":
                    continue
                if a.expect_dropin == "active":
                    check(r["ran"] not in ("", "mpi") and r["note"].startswith("through libagx_pmpi.so"),
                          f"mpi-agx at {r['bytes_per_rank']}: ran {r['ran']!r} ({r['note']}), not through agx")
                    check(not algorithms or r["ran"].split(":")[0] in algorithms | {"shared_memory"},
                          f"mpi-agx ran {r['ran']!r}, not an agx algorithm")
                else:
                    check(r["ran"] == "mpi" and "not loaded" in r["note"],
                          f"mpi-agx at {r['bytes_per_rank']}: ran {r['ran']!r} ({r['note']}) without the interposer")
        if a.expect_methods:
            want = set(a.expect_methods.split(","))
            for cand in {r["candidate"] for r in rows}:
                got = {r["method"] for r in rows if r["candidate"] == cand}
                check(got == want, f"{cand}: methods {sorted(got)}, expected {sorted(want)}")
        for m in {r["method"] for r in rows}:
            for key in {(r["form"], r["in_place"], r["bytes_per_rank"]) for r in rows}:
                n_mpi = [r for r in rows if r["method"] == m and r["candidate"] == "mpi"
                         and (r["form"], r["in_place"], r["bytes_per_rank"]) == key]
                check(len(n_mpi) <= 1, f"{m} {key}: {len(n_mpi)} mpi rows")
        if "--forms" in bench_args:
            forms = bench_args[bench_args.index("--forms") + 1]
            want = {"regular", "one_large", "many_zero", "ramp"} if forms == "all" else set(forms.split(","))
            check({r["form"] for r in rows} == want, f"forms {sorted({r['form'] for r in rows})}")
        if "--place" in bench_args and bench_args[bench_args.index("--place") + 1] == "both":
            check({r["in_place"] for r in rows} == {"0", "1"}, "in place and out of place not both present")

        with open(json_path) as f:
            doc = json.load(f)
        check(len(doc["rows"]) == len(rows), f"JSON has {len(doc['rows'])} rows, CSV {len(rows)}")
        check(doc["meta"]["ranks"] == n and doc["meta"]["mpi_library"] == meta.get("mpi_library"),
              "JSON metadata differs from the CSV")
        for cand in {r["candidate"] for r in rows}:
            check(cand in p.stdout, f"table lacks {cand}")

        if a.plot:
            q = subprocess.run([a.plot, csv_path, "-o", os.path.join(tmp, "png")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if q.returncode != 0 and "matplotlib is missing" in q.stderr:
                plot_skipped = "agx-plot needs python3-matplotlib: " + q.stderr.strip()
            else:
                check(q.returncode == 0, f"agx-plot failed: {q.stderr}")
                pngs = q.stdout.split()
                check(pngs and all(os.path.getsize(x) > 10000 for x in pngs), f"agx-plot wrote {pngs}")
                print("agx-plot wrote", len(pngs), "figures")

    if failures:  # (before any skip: a failing run never reads as skipped)
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    if plot_skipped:
        print("SKIP:", plot_skipped)
        sys.exit(77)
    print(f"agx-bench: {len(rows)} rows checked")


if __name__ == "__main__":
    main()
