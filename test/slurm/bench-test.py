#!/usr/bin/env python3
"""Runs agx-bench under mpirun (no Slurm) and checks what it writes.

    bench-test.py --mpirun MPIRUN [--mpirun-arg ARG]... --np N --bench AGX_BENCH
                  [--expect-rc RC] [--expect-wrong NAME] [--plot AGX_PLOT] -- BENCH_ARGS...

Checks: exit status; CSV metadata ('# key: value': agx version, host, CPU, cores, MPI
library, N, nodes, ranks per node) and columns; every row verified ok (or, for
--expect-wrong NAME, exactly NAME's rows WRONG and never timed); every asked form and
place present; the MPI library's ratio is 1; busbw = algbw (N-1)/N; algbw = total
bytes / median; JSON has the same rows and metadata; the table names every candidate.
With --plot, agx-plot turns the CSV into PNGs (exit 77, SKIP, without matplotlib).
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

COLUMNS = ("ranks,nodes,ranks_per_node,memory,form,in_place,bytes_per_rank,total_bytes,candidate,ran,"
           "iters,samples,median_us,p10_us,p90_us,min_us,max_us,algbw_GBps,busbw_GBps,ratio_to_mpi,"
           "verified,note").split(",")
META = ("agx_version", "date_utc", "hostname", "cpu_model", "cores", "mpi_library", "mpi_standard",
        "ranks", "nodes", "ranks_per_node_min", "ranks_per_node_max", "memory", "command")

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
    ap.add_argument("--expect-rc", type=int, default=0)
    ap.add_argument("--expect-wrong")
    ap.add_argument("--expect-message", help="with --expect-rc 2: text the message must contain")
    ap.add_argument("--plot")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    bench_args = [x for x in a.bench_args if x != "--"]

    with tempfile.TemporaryDirectory(prefix="agx-bench-test.") as tmp:
        csv_path, json_path = os.path.join(tmp, "b.csv"), os.path.join(tmp, "b.json")
        cmd = ([a.mpirun] + a.mpirun_arg + ["-np", str(a.np), a.bench, "--csv", csv_path,
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

        meta, fields, rows = read_csv(csv_path)
        check(fields == COLUMNS, f"CSV columns {fields}")
        for k in META:
            check(meta.get(k), f"CSV metadata {k} missing")
        check(meta.get("ranks") == str(a.np), f"metadata ranks {meta.get('ranks')} != {a.np}")
        check(meta.get("agx_version") not in (None, "", "unknown"), "agx version not recorded")
        check(rows, "no CSV rows")
        n = a.np
        for r in rows:
            tag = f"{r['form']}/{r['in_place']}/{r['bytes_per_rank']}/{r['candidate']}"
            if a.expect_wrong and r["candidate"] == a.expect_wrong:
                check(r["verified"] == "WRONG", f"{tag}: verified {r['verified']}, expected WRONG")
                check(r["median_us"] == "" and r["busbw_GBps"] == "", f"{tag}: a WRONG row has times")
                continue
            check(r["verified"] == "ok", f"{tag}: verified {r['verified']} {r['note']}")
            if r["verified"] != "ok":
                continue
            check(int(r["ranks"]) == n and int(r["total_bytes"]) == n * int(r["bytes_per_rank"]),
                  f"{tag}: ranks/total_bytes")
            med, alg, bus = float(r["median_us"]), float(r["algbw_GBps"]), float(r["busbw_GBps"])
            check(float(r["min_us"]) <= med <= float(r["max_us"]), f"{tag}: min <= median <= max")
            check(float(r["p10_us"]) <= med <= float(r["p90_us"]), f"{tag}: p10 <= median <= p90")
            if med > 0:
                want = int(r["total_bytes"]) / (med * 1e-6) / 1e9
                check(abs(alg - want) <= 1e-4 + 1e-3 * want, f"{tag}: algbw {alg} != {want}")
            check(abs(bus - alg * (n - 1) / n) <= 1e-4 + 1e-3 * alg, f"{tag}: busbw {bus} != algbw (N-1)/N")
            if r["candidate"] == "mpi":
                check(r["ratio_to_mpi"] == "1.0000", f"{tag}: mpi ratio {r['ratio_to_mpi']}")
            if r["candidate"] == "auto":
                check(r["ran"] not in ("", "auto"), f"{tag}: auto did not say what ran")
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
                print("SKIP: agx-plot needs python3-matplotlib:", q.stderr.strip())
                sys.exit(77)
            check(q.returncode == 0, f"agx-plot failed: {q.stderr}")
            pngs = q.stdout.split()
            check(pngs and all(os.path.getsize(x) > 10000 for x in pngs), f"agx-plot wrote {pngs}")
            print("agx-plot wrote", len(pngs), "figures")

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print(f"agx-bench: {len(rows)} rows checked")


if __name__ == "__main__":
    main()
