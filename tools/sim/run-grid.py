#!/usr/bin/env python3
"""Runs the simulation grid: agx's algorithms, agx auto and SMPI's built-in selectors on the
platforms of platforms/ (tools/sim/gen-platforms.py), and writes a CSV and plots.

    tools/sim/run-grid.py                      # full grid -> docs/scale/grid.csv + PNGs
    tools/sim/run-grid.py --quick              # 64 ranks only, 2 sizes (a minute or two)
    tools/sim/run-grid.py --only fattree-64r-8ppn -o /tmp/x.csv

One smpirun per (platform, selector): the first runs every agx algorithm plus
MPI_Allgather under --cfg=smpi/allgather:ompi, the others MPI_Allgather only under
mpich and mvapich2. Every SMPI setting is in SETTINGS below and in the CSV's header;
the wall time of each smpirun and of each point is in the CSV. A run past --timeout
seconds is killed and its missing points are written with status 'timeout'.
"""
import argparse
import concurrent.futures
import csv
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KiB, MiB = 1024, 1024 * 1024
SETTINGS = [
    "--cfg=smpi/simulate-computation:no",          # communication only; local copies are free
    "--cfg=smpi/shared-malloc-blocksize:67108864",  # SMPI_SHARED_MALLOC buffers, 64 MiB blocks
    "--cfg=smpi/os:0:0.5e-6:0",                     # 0.5 us CPU overhead per message sent
    "--cfg=smpi/or:0:0.5e-6:0",                     # 0.5 us per message received
    "--cfg=smpi/bw-factor:0:1",                     # links give their nominal bandwidth
    "--cfg=smpi/lat-factor:0:1",                    # and their nominal latency
    "--cfg=network/crosstraffic:0",                 # no reverse (ack) flows
    "--log=root.thres:warning",
]
SELECTORS = ["ompi", "mpich", "mvapich2"]
AGX = ["direct", "ring", "neighbor_exchange", "recursive_doubling", "bruck", "distance_halving"]
# Per rank count: sizes (bytes per rank) and agx algorithms left out (N^2 messages or
# N rounds are too slow to simulate there, and far from the best anyway).
# Per rank count: sizes, agx algorithms left out, selectors run, platforms run (None: all).
GRID = {
    64: ([8, 256, 4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB], [], SELECTORS, None),
    256: ([8, 4 * KiB, 64 * KiB, 1 * MiB], ["direct"], SELECTORS, None),
    1024: ([8, 64 * KiB], ["direct", "ring", "neighbor_exchange"], ["ompi", "mpich"],
           {"fattree-1024r-8ppn", "dragonfly-1024r-8ppn"}),
    # 4096 ranks: one run (8 B, 4 log-depth algorithms) took over 6 min here and the mpich
    # selector over 5 min, so the default grid leaves it out; run it with --only.
    4096: ([8], ["direct", "ring", "neighbor_exchange"], ["mpich"], set()),
}
COLUMNS = ["platform", "topology", "nranks", "ppn", "selector", "algo", "ran", "bytes",
           "sim_s", "pred_s", "point_wall_s", "run_wall_s", "status"]


def extra_algos(name):
    return [a for a in os.environ.get("AGX_SIM_EXTRA_ALGOS", "").split(",") if a]


def run_one(binary, pid, p, selector, algos, sizes, timeout, tmp):
    hostfile = os.path.join(tmp, f"{pid}.hosts")
    with open(hostfile, "w") as f:
        for h in range(p["hosts"]):
            f.write(f"node-{h}\n" * p["ppn"])
    cmd = (["smpirun", "-platform", os.path.join(ROOT, "platforms", pid + ".xml"),
            "-hostfile", hostfile, "-np", str(p["nranks"])] + SETTINGS +
           [f"--cfg=smpi/allgather:{selector}", binary, "--ppn", str(p["ppn"]),
            "--label", pid, "--cost", ",".join(repr(c) for c in p["cost"]),
            "--sizes", ",".join(map(str, sizes)), "--algos", ",".join(algos)])
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group: a timeout ends smpimain too
    try:
        out, err = proc.communicate(timeout=timeout)
        status = "ok" if proc.returncode == 0 else f"rc={proc.returncode}"
        if proc.returncode != 0:
            sys.stderr.write(err[-2000:])
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        status = "timeout"
    wall = time.monotonic() - t0
    rows, seen = [], set()
    for line in out.splitlines():
        f = line.split(",")
        if f[0] != "AGXSIM" or f[1] == "label":
            continue
        seen.add((f[4], int(f[6])))
        rows.append({"platform": pid, "topology": p["topology"], "nranks": f[2], "ppn": f[3],
                     "selector": selector, "algo": f[4] if f[4] != "mpi" else f"smpi:{selector}",
                     "ran": f[5], "bytes": f[6], "sim_s": f[7], "pred_s": f[8],
                     "point_wall_s": f[9], "run_wall_s": f"{wall:.1f}", "status": "ok"})
    for b in sizes:
        for a in algos:
            if (a, b) not in seen:
                rows.append({"platform": pid, "topology": p["topology"], "nranks": p["nranks"],
                             "ppn": p["ppn"], "selector": selector,
                             "algo": a if a != "mpi" else f"smpi:{selector}", "ran": "",
                             "bytes": b, "sim_s": "", "pred_s": "", "point_wall_s": "",
                             "run_wall_s": f"{wall:.1f}", "status": status})
    print(f"  {pid:24s} {selector:9s} {wall:7.1f} s  {status}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "docs", "scale", "grid.csv"))
    ap.add_argument("--only", help="comma-separated platform ids")
    ap.add_argument("--quick", action="store_true", help="64 ranks, 8 B and 64 KiB")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="smpirun processes at once")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()
    build = subprocess.run([os.path.join(ROOT, "tools", "sim", "build.sh")],
                           capture_output=True, text=True)
    if build.returncode != 0:
        sys.stderr.write(build.stderr)
        return build.returncode
    binary = build.stdout.strip().splitlines()[-1]
    params = json.load(open(os.path.join(ROOT, "platforms", "params.json")))
    only = set(args.only.split(",")) if args.only else None
    tmp = os.path.join(ROOT, "build-sim", "grid")
    os.makedirs(tmp, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    rows, t_start, tasks = [], time.monotonic(), []
    for pid in sorted(params, key=lambda k: (-params[k]["nranks"], k)):  # biggest first
        p = params[pid]
        sizes, skip, selectors, platforms = GRID[p["nranks"]]
        if (only and pid not in only) or (not only and platforms is not None and pid not in platforms):
            continue
        if args.quick and p["nranks"] != 64:
            continue
        if args.quick:
            sizes = [8, 64 * KiB]
        algos = [a for a in AGX + extra_algos(pid) if a not in skip]
        if p["ppn"] > 1:
            algos.append("hierarchical")
        for i, selector in enumerate(selectors):
            run_algos = algos + ["auto", "mpi"] if i == 0 else ["mpi"]
            tasks.append((binary, pid, p, selector, run_algos, sizes, args.timeout, tmp))
    def write(done):
        with open(args.output, "w", newline="") as f:
            f.write(f"# agx simulation grid, SimGrid SMPI, {time.strftime('%Y-%m-%d %H:%M')}\n")
            f.write(f"# settings: {' '.join(SETTINGS)}\n")
            f.write(f"# wall time: {time.monotonic() - t_start:.0f} s, "
                    f"{'complete' if done else 'partial'}, 2 smpirun at once at most\n")
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for result in pool.map(lambda t: run_one(*t), tasks):
            rows += result
            write(False)  # a partial grid is still readable
    total = time.monotonic() - t_start
    write(True)
    print(f"wrote {args.output} ({len(rows)} rows) in {total:.0f} s")
    if not args.no_plot:
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "sim", "plot-grid.py"),
                        args.output], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
