#!/usr/bin/env python3
"""Runs the simulation grid: agx's algorithms, agx auto and SMPI's built-in selectors on the
platforms of platforms/ (tools/sim/gen-platforms.py), and writes a CSV and plots.

    tools/sim/run-grid.py                      # full grid -> docs/scale/grid.csv + PNGs
    tools/sim/run-grid.py --quick              # 64 ranks only, 3 sizes (seconds)
    tools/sim/run-grid.py --only fattree-64r-8ppn -o /tmp/x.csv

One smpirun per platform, one at a time (-j): every agx algorithm, auto, and SMPI's ompi,
mpich and mvapich2 all-gather selectors, which the driver calls directly (smpi:<selector>).
Every SMPI setting is in SETTINGS below and in the CSV's header; the wall time of each
smpirun and of each point is in the CSV. A run past --timeout seconds is killed and its
missing points are written with status 'timeout'. --append keeps an existing CSV's rows
and replaces those of the points run now (e.g. one new algorithm: --algos NAME
--no-selectors --append).

--params FILE takes the platforms from another params file (default platforms/params.json),
such as the one tools/sim/cluster-platform.py writes for a measured cluster; a platform
there may name its own "xml" (path from the repository root), "grid" (its sizes,
algorithms run as listed, and selectors with their sizes, instead of GRID's for its rank
count), "settings" (SMPI settings replacing SETTINGS' values of the same name) and "args"
(further agx-sim arguments, e.g. --tuning); its "cost", "groups", "node_copy",
"group_alpha" and "routes" are passed where present.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import algorithms as registry  # noqa: E402  (tools/algorithms.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETTINGS = [
    "--cfg=smpi/simulate-computation:no",          # communication only; local copies are free
    "--cfg=smpi/shared-malloc-blocksize:67108864",  # SMPI_SHARED_MALLOC buffers, 64 MiB blocks
    "--cfg=smpi/privatization:0",                   # agx-sim has no per-rank globals; saves
                                                    # copying the binary once per rank
    "--cfg=smpi/os:0:0.5e-6:0",                     # 0.5 us CPU overhead per message sent
    "--cfg=smpi/or:0:0.5e-6:0",                     # 0.5 us per message received
    "--cfg=smpi/bw-factor:0:1",                     # links give their nominal bandwidth
    "--cfg=smpi/lat-factor:0:1",                    # and their nominal latency
    "--cfg=network/crosstraffic:0",                 # no reverse (ack) flows
    "--log=root.thres:warning",
]
# Per run: --cfg=smpi/coll-selector:<selector>, so MPI_Allgather and the collectives the
# selector's algorithms and the driver's bookkeeping use (barrier, reduce, bcast) all come
# from that selector (the default selector's linear reduce cost minutes at 1024 ranks).
SELECTORS = ["ompi", "mpich", "mvapich2"]
COLL_SELECTOR = "ompi"  # the run's other collectives (barrier, reduce, bcast, and those
                        # SMPI's all-gathers call inside); the three selectors are called
                        # directly by the driver (smpi:<selector>), all in one simulation
# The fair baselines (tools/sim/baselines.hpp): Open MPI 4.1's fixed rule, MPICH's default
# rule and Open MPI 5's HAN composition, each run with agx's planners; a baseline whose pick
# already ran at that size reuses that run.
BASELINES = ["ompi41", "mpich", "han"]
# agx's algorithms come from the registry's data (include/agx/algorithms.def, read by
# tools/algorithms.py as meson.build reads it): every point-to-point planner at its default
# radix, so that a new registry line is in the grid by itself. Other radices
# ('bruck:k=4') are variants, not new algorithms: run them as extras (AGX_SIM_EXTRA_ALGOS).
# The node paths: `hierarchical` where a platform has several ranks per node; not
# `shared_memory`, which serves one node only (every platform here has several).
AGX = registry.planners()
NODE_PATHS = [a for a in registry.node_paths() if a not in ("shared_memory",)]
# Chosen subsets (by their cost at 4096 ranks, below); each must name registry algorithms.
LOG_DEPTH = ["recursive_doubling", "bruck", "distance_halving", "locality_bruck"]
WITHOUT_DIRECT = [a for a in AGX if a != "direct"]
for _name in LOG_DEPTH + ["direct"]:
    if _name not in AGX:
        raise SystemExit(f"run-grid.py: {_name} is not a planner of include/agx/algorithms.def")
KiB, MiB = 1024, 1024 * 1024
ALL_SIZES = [8, 256, 4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB]
# Per rank count: sizes (bytes per rank) for agx; agx algorithms run (N-round and
# N²-message ones are left out at 1024 and 4096 ranks: 10^6..10^7 simulated messages per
# point, and far from the best there); sizes per SMPI selector (at 4096 ranks only 8 B:
# beyond ~50 KB in all, every selector switches to ring or neighbor exchange, N-1 or N/2
# rounds, 8·10^6..1.6·10^7 messages per point; and not mvapich2, whose first call sets up
# SMPI's SMP-aware communicator, a ring all-gather of 1.7·10^7 messages); platforms run
# (None: all); unsimulated: auto's picks reported, not run. `direct` is left out from
# 256 ranks: 65,280 messages in flight at once took 34 s of wall time at 8 B on the fat
# tree, over 6 minutes at 256 B (transfers of about a nanosecond, SimGrid's precision) and
# over 5 minutes at 8 B on the dragonfly (auto still runs it where it picks it at 256).
# SMPI's selectors crash (segmentation fault) at 256 ranks x 16 MiB (4 GiB received;
# 8 MiB runs): left out there.
GRID = {
    64: dict(sizes=ALL_SIZES, algos=AGX, selectors={s: ALL_SIZES for s in SELECTORS}),
    256: dict(sizes=ALL_SIZES, algos=WITHOUT_DIRECT, selectors={s: ALL_SIZES[:-1] for s in SELECTORS}),
    1024: dict(sizes=[8, 4 * KiB, 256 * KiB, 16 * MiB], algos=WITHOUT_DIRECT,
               selectors={s: [8, 4 * KiB, 256 * KiB] for s in SELECTORS}, unsimulated=["direct"]),
    4096: dict(sizes=[8, 4 * KiB, 256 * KiB], algos=LOG_DEPTH,
               selectors={"ompi": [8], "mpich": [8]},
               unsimulated=["direct", "ring", "neighbor_exchange"]),
}
# Radix variants the quick grid runs as rows of their own (auto weighs them all).
QUICK_EXTRAS = ["bruck:k=4", "locality_bruck:k=4"]
COLUMNS = ["platform", "topology", "nranks", "ppn", "algo", "ran", "bytes",
           "sim_s", "pred_s", "point_wall_s", "run_wall_s", "status"]


def extra_algos(name):
    return [a for a in os.environ.get("AGX_SIM_EXTRA_ALGOS", "").split(",") if a]


def settings_for(p):
    """SETTINGS with the platform's own SMPI settings in place of those of the same name."""
    key = lambda s: s.split(":", 1)[0]  # noqa: E731  ("--cfg=smpi/or")
    own = {key(s): s for s in p.get("settings", [])}
    out = [own.pop(key(s), s) for s in SETTINGS]
    return out + list(own.values())


def platform_args(p):
    """agx-sim's arguments for the platform's model (those of params.json it has)."""
    text = lambda x: str(x) if isinstance(x, str) else repr(x)  # noqa: E731
    out = []
    for key, option in (("cost", "--cost"), ("groups", "--groups"), ("node_copy", "--node-copy"),
                        ("group_alpha", "--group-alpha"), ("routes", "--routes")):
        if key in p:
            v = p[key]
            out += [option, ",".join(text(x) for x in v) if isinstance(v, list) else text(v)]
    return out + list(p.get("args", []))


def run_one(binary, pid, p, algos, sizes, selector_sizes, unsimulated, timeout, tmp, predict_only=False):
    hostfile = os.path.join(tmp, f"{pid}.hosts")
    with open(hostfile, "w") as f:
        for h in range(p["hosts"]):
            f.write(f"node-{h}\n" * p["ppn"])
    xml = os.path.join(ROOT, p.get("xml", os.path.join("platforms", pid + ".xml")))
    cmd = (["nice", "-n", "10", "smpirun", "-platform", xml,
            "-hostfile", hostfile, "-np", str(p["nranks"])] + settings_for(p) +
           [f"--cfg=smpi/coll-selector:{COLL_SELECTOR}", binary, "--ppn", str(p["ppn"]),
            "--label", pid] + platform_args(p) +
           ["--sizes", ",".join(map(str, sizes)), "--algos", ",".join(algos)] +
           # smpirun drops empty arguments: no --selector-sizes when no selector runs
           (["--selector-sizes", ",".join(map(str, selector_sizes))] if selector_sizes else []) +
           (["--unsimulated", ",".join(unsimulated)] if unsimulated else []) +
           (["--predict-only"] if predict_only else []))
    t0 = time.monotonic()
    # Output goes to build-sim/grid/<platform>.out as it comes (tail -f it to follow a run).
    out_path = os.path.join(tmp, f"{pid}.out")
    with open(out_path, "w") as out_file:
        proc = subprocess.Popen(cmd, stdout=out_file, stderr=subprocess.PIPE, text=True,
                                start_new_session=True,  # own group: a timeout ends smpimain too
                                cwd=ROOT)  # a platform's "args" name files from the root
        try:
            _, err = proc.communicate(timeout=timeout)
            status = "ok" if proc.returncode == 0 else f"rc={proc.returncode}"
            if proc.returncode != 0:
                sys.stderr.write(err[-2000:])
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            status = "timeout"
    with open(out_path) as f:
        out = f.read()
    wall = time.monotonic() - t0
    rows, seen = [], set()
    for line in out.splitlines():
        f = line.split(",")
        if f[0] != "AGXSIM" or f[1] == "label":
            continue
        seen.add((f[4], int(f[6])))
        rows.append({"platform": pid, "topology": p["topology"], "nranks": f[2], "ppn": f[3],
                     "algo": f[4], "ran": f[5], "bytes": f[6], "sim_s": f[7], "pred_s": f[8],
                     "point_wall_s": f[9], "run_wall_s": f"{wall:.1f}",
                     "status": f[10] if f[10] in ("unsimulated", "predicted") else "ok"})
    for b in sorted(set(sizes) | set(selector_sizes)):
        for a in algos:
            wanted = b in (selector_sizes if a.startswith("smpi:") else sizes)
            if wanted and (a, b) not in seen:
                rows.append({"platform": pid, "topology": p["topology"], "nranks": p["nranks"],
                             "ppn": p["ppn"], "algo": a, "ran": "", "bytes": b, "sim_s": "",
                             "pred_s": "", "point_wall_s": "", "run_wall_s": f"{wall:.1f}",
                             "status": status if status != "ok" else "missing"})
    print(f"  {pid:24s} {wall:7.1f} s  {status}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "docs", "scale", "grid.csv"))
    ap.add_argument("--binary", help="an agx-sim already built (default: tools/sim/build.sh's)")
    ap.add_argument("--work-dir", default=os.path.join(ROOT, "build-sim", "grid"),
                    help="hostfiles and each run's output (default build-sim/grid)")
    ap.add_argument("--params", default=os.path.join(ROOT, "platforms", "params.json"),
                    help="the platforms (default platforms/params.json; tools/sim/cluster-platform.py "
                         "writes one for a measured cluster)")
    ap.add_argument("--only", help="comma-separated platform ids")
    ap.add_argument("--quick", action="store_true",
                    help="64 ranks, 8 B, 256 B and 64 KiB, with the radix variants auto weighs most")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("-j", "--jobs", type=int, default=1, help="smpirun processes at once")
    ap.add_argument("--algos", help="comma-separated: run only these agx algorithms (and auto)")
    ap.add_argument("--no-selectors", action="store_true", help="leave out SMPI's selectors")
    ap.add_argument("--sizes", help="comma-separated bytes per rank: only these of each platform's sizes")
    ap.add_argument("--predict-only", action="store_true",
                    help="every row's pick and prediction, nothing simulated (status 'predicted'; "
                         "no selectors); for a model change against simulated times")
    ap.add_argument("--append", action="store_true",
                    help="keep the output's rows, replacing those of the points run now")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--list", action="store_true",
                    help="print the agx algorithms of each rank count and exit (no build, no run)")
    args = ap.parse_args()
    if args.list:
        for nranks, g in GRID.items():
            print(f"{nranks} ranks: {','.join(g['algos'])} (+{','.join(NODE_PATHS)} where ppn > 1, "
                  f"auto, {','.join(BASELINES)}); unsimulated: {','.join(g.get('unsimulated', [])) or '-'}")
        return 0
    if args.binary:
        binary = os.path.abspath(args.binary)
    else:
        build = subprocess.run([os.path.join(ROOT, "tools", "sim", "build.sh")],
                               capture_output=True, text=True)
        if build.returncode != 0:
            sys.stderr.write(build.stderr)
            return build.returncode
        binary = build.stdout.strip().splitlines()[-1]
    params = json.load(open(args.params))
    only = set(args.only.split(",")) if args.only else None
    tmp = args.work_dir
    os.makedirs(tmp, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    rows, t_start, tasks = [], time.monotonic(), []
    if args.append and os.path.exists(args.output):
        with open(args.output, newline="") as f:
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    only_algos = set(args.algos.split(",")) if args.algos else None
    for pid in sorted(params, key=lambda k: (params[k]["nranks"], k)):  # smallest first
        p = params[pid]
        own = "grid" in p  # the platform's own sizes, algorithms and selectors
        g = p["grid"] if own else GRID[p["nranks"]]
        if (only and pid not in only) or (not only and g.get("platforms") is not None
                                          and pid not in g["platforms"]):
            continue
        if args.quick and p["nranks"] != 64:
            continue
        # --quick: 256 B is the point where Bruck's far rounds decide (the routed model's
        # per-rank clocks, docs/scale.md), bruck:k=4 the radix auto takes there.
        sizes = [8, 256, 64 * KiB] if args.quick else g["sizes"]
        if args.sizes:
            sizes = [b for b in sizes if str(b) in args.sizes.split(",")]
        algos = g["algos"] + extra_algos(pid) + (QUICK_EXTRAS if args.quick else [])
        if not own:
            if p["ppn"] > 1:
                algos = algos + NODE_PATHS
            # With one rank per node han is ompi41's rule (one schedule, its node stages
            # empty); at 4096 ranks that is neighbour exchange from 4 KiB, 2048 rounds
            # of 4096 messages that SMPI takes over 20 minutes per point: ompi41's row
            # (a pick the grid leaves unsimulated there) stands for it.
            rules = [b for b in BASELINES if not (b == "han" and p["ppn"] == 1 and p["nranks"] >= 4096)]
            algos = algos + ["auto"] + rules
        selectors = {} if args.no_selectors or args.predict_only else dict(g["selectors"])
        if only_algos is not None:
            algos = [a for a in algos if a in only_algos]
        # The driver runs selectors only at --selector-sizes: one set for all three here.
        sel_sizes = sorted(set().union(*selectors.values())) if selectors else []
        if args.sizes:
            sel_sizes = [b for b in sel_sizes if b in sizes]
        if args.quick:
            sel_sizes = sizes
        run_algos = algos + [f"smpi:{sel}" for sel in selectors]
        if run_algos:
            # agx algorithms run at `sizes`; a size only the selectors need runs them alone.
            tasks.append((binary, pid, p, run_algos, sizes, sel_sizes, g.get("unsimulated", []),
                          args.timeout, tmp, args.predict_only))
    if args.append:  # rows of the points about to run are replaced
        planned = {(t[1], a, str(b)) for t in tasks for a in t[3]
                   for b in (t[5] if a.startswith("smpi:") else t[4])}
        rows = [r for r in rows if (r["platform"], r["algo"], r["bytes"]) not in planned]
    def write(done):
        with open(args.output, "w", newline="") as f:
            f.write(f"# agx simulation grid, SimGrid SMPI, {time.strftime('%Y-%m-%d %H:%M')}\n")
            f.write(f"# settings: {' '.join(SETTINGS)}\n")
            for t in tasks:  # a platform's own settings and agx-sim arguments
                if "settings" in t[2] or "args" in t[2]:
                    f.write(f"# {t[1]}: settings: {' '.join(settings_for(t[2]))}; "
                            f"agx-sim: {' '.join(platform_args(t[2]))}\n")
            f.write(f"# wall time: {time.monotonic() - t_start:.0f} s, "
                    f"{'complete' if done else 'partial'}, {args.jobs} smpirun at once at most"
                    f"{' (--append: of the runs listed below only)' if args.append else ''}\n")
            if args.append:
                f.write(f"# runs: {' '.join(t[1] for t in tasks)}\n")
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
