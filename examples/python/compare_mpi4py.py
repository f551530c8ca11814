#!/usr/bin/env python3
"""mpi4py's comm.Allgather against agx.allgather, from Python, in agx-bench's style.

    mpirun -np 4 python3 examples/python/compare_mpi4py.py [--min-bytes 8] [--max-bytes 1M]
                                                           [--passes 5] [--iters 0]

For each size (bytes per rank, x4 steps) three candidates run on uint8 arrays:
`mpi4py` (comm.Allgather, the MPI library's all-gather), `agx` (agx.allgather, auto)
and `agx-plan` (one agx.Plan per size, start() + wait() per call). Each is first
verified (every rank checks every block of a zeroed receive array against a pattern;
a wrong result is reported and never timed), then timed in interleaved passes: every
iteration is Barrier; t0; call; t1, the slowest rank's time counts, and the table shows
the median with the ratio to mpi4py (below 1: agx is faster). Exits 1 on a wrong result.
Timings on a busy or oversubscribed machine say little; the ratios a bit more.
"""
import argparse
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

import agx


def size_arg(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def pattern(rank, n):
    return ((131 * rank + 7 * np.arange(n)) % 251 + 1).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-bytes", type=size_arg, default=8)
    ap.add_argument("--max-bytes", type=size_arg, default=1 << 20)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--iters", type=int, default=0, help="iterations per batch (0: by size)")
    opts = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size

    sizes, b = [], max(1, opts.min_bytes)
    while b <= opts.max_bytes:
        sizes.append(b)
        b *= 4
    if rank == 0:
        print(f"compare_mpi4py N={size} {MPI.Get_library_version().splitlines()[0].strip()}")
        print(f"  median us of the slowest rank, ratio to mpi4py; {opts.passes} interleaved passes")
        print(f"{'bytes/rank':>12} {'mpi4py':>12} {'agx':>20} {'agx-plan':>20}  agx ran / plan ran")
    bad = 0
    for n in sizes:
        send = pattern(rank, n)
        want = np.concatenate([pattern(r, n) for r in range(size)])
        recv = np.zeros(n * size, np.uint8)
        plan = agx.plan(comm, send, recv)
        calls = {
            "mpi4py": lambda: comm.Allgather([send, MPI.BYTE], [recv, MPI.BYTE]),
            "agx": lambda: agx.allgather(comm, send, recv),
            "agx-plan": lambda: (plan.start(), plan.wait()),
        }
        chosen = agx.choose_algorithm(comm, send, recv)  # what agx.allgather runs
        verified = {}
        for name, call in calls.items():
            recv[:] = 0
            call()
            ok = comm.allreduce(int(np.array_equal(recv, want)), op=MPI.MIN) == 1
            verified[name] = ok
            bad += not ok
        iters = opts.iters or max(3, min(100, (64 << 20) // (n * size * 8)))
        samples = {name: [] for name in calls}
        for _ in range(opts.passes):
            for name, call in calls.items():
                if not verified[name]:
                    continue
                local = np.zeros(iters)
                for i in range(iters):
                    comm.Barrier()
                    t0 = time.perf_counter()
                    call()
                    local[i] = time.perf_counter() - t0
                slowest = np.zeros(iters)
                comm.Allreduce(local, slowest, op=MPI.MAX)
                samples[name].extend(slowest)
        if rank == 0:
            med = {k: float(np.median(v)) * 1e6 if v else None for k, v in samples.items()}
            base = med["mpi4py"]
            cells = []
            for name in calls:
                if med[name] is None:
                    cells.append("WRONG")
                elif name == "mpi4py" or not base:
                    cells.append(f"{med[name]:.2f}")
                else:
                    cells.append(f"{med[name]:.2f} ({med[name] / base:.2f}x)")
            print(f"{n:>12} {cells[0]:>12} {cells[1]:>20} {cells[2]:>20}  "
                  f"{chosen} / {plan.algorithm}")
        del plan
    total = comm.allreduce(bad, op=MPI.SUM)
    if rank == 0:
        print("results", "verified" if total == 0 else "WRONG")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # one rank failing would leave the others blocked: end the job
        traceback.print_exc()
        MPI.COMM_WORLD.Abort(1)
    sys.exit(status)
