#!/usr/bin/env python3
"""Tensor-parallel column-split linear layer with NumPy, blocking and overlapped.

    mpirun -np 4 python3 examples/python/tp_linear_overlap.py [batch] [in] [out-per-rank] [chunks] [repeats]

Y = X @ W with W split by columns: rank i holds W_i (in x out_i) and computes the slice
Y_i = X @ W_i; an all-gather gives every rank the full activation. Blocking: compute all
chunks, gathering each. Overlapped: the batch is cut into chunks; the gather of chunk k
runs (an agx.Plan per chunk, started per chunk) while chunk k+1 is computed, with
test() between the row blocks of each matmul so that the gathers progress. Both results
are checked against the serial product (exact: small integers in float64); the program
prints both times, the communication alone and the fraction of it hidden (medians over
`repeats` runs of the slowest rank). Exits 1 when a result is wrong.
The C++ version is examples/tp_linear_overlap.cpp.
"""
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

import agx


def operands(batch, n_in, n_out):
    """X (batch x in) and the whole W (in x n_out): small integers, exact sums."""
    r = np.arange(batch)[:, None]
    k = np.arange(n_in)[None, :]
    x = ((r * 7 + k * 3) % 11 - 5).astype(np.float64)
    k = np.arange(n_in)[:, None]
    c = np.arange(n_out)[None, :]
    w = ((k * 5 + c * 13) % 9 - 4).astype(np.float64)
    return x, w


def main():
    args = [int(a) for a in sys.argv[1:]]
    batch, n_in, out_per_rank, chunks, repeats = (args + [256, 256, 256, 8, 5][len(args):])[:5]
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    chunks = max(1, min(chunks, batch))
    batch -= batch % chunks
    rows = batch // chunks
    x, w = operands(batch, n_in, out_per_rank * size)
    w_mine = np.ascontiguousarray(w[:, rank * out_per_rank:(rank + 1) * out_per_rank])
    slices = [np.zeros((rows, out_per_rank)) for _ in range(chunks)]
    blocking = [np.zeros((size * rows, out_per_rank)) for _ in range(chunks)]
    overlapped = [np.zeros((size * rows, out_per_rank)) for _ in range(chunks)]
    plans = [agx.plan(comm, slices[k], overlapped[k]) for k in range(chunks)]  # made once
    pieces = max(1, min(rows, 4))  # row blocks per chunk, test() between them

    def compute(k, poll=None):
        lo = k * rows
        for p in range(pieces):
            a, b = p * rows // pieces, (p + 1) * rows // pieces
            np.matmul(x[lo + a:lo + b], w_mine, out=slices[k][a:b])
            if poll:
                poll()

    def timed(body):
        comm.Barrier()
        t0 = time.perf_counter()
        body()
        return comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)

    def run_compute():
        for k in range(chunks):
            compute(k)

    def run_comm():
        for k in range(chunks):
            agx.allgather(comm, slices[k], blocking[k])

    def run_blocking():
        for k in range(chunks):
            compute(k)
            agx.allgather(comm, slices[k], blocking[k])

    def run_overlapped():
        for k in range(chunks):
            running = plans[max(0, k - 2):k]
            if k >= 2:
                plans[k - 2].wait()  # at most two gathers in flight
            compute(k, lambda: [p.test() for p in running])
            plans[k].start()  # gather chunk k while chunk k+1 is computed
        for p in plans:
            p.wait()

    times = {name: [] for name in ("compute", "comm", "blocking", "overlapped")}
    for _ in range(max(1, repeats)):
        times["compute"].append(timed(run_compute))
        times["comm"].append(timed(run_comm))
        times["blocking"].append(timed(run_blocking))
        times["overlapped"].append(timed(run_overlapped))
    t = {name: float(np.median(v)) for name, v in times.items()}

    # The full activation of chunk k from its gathered buffer [rank][rows][out_per_rank].
    reference = x @ w
    bad = 0
    for what, gathered in (("blocking", blocking), ("overlapped", overlapped)):
        for k in range(chunks):
            full = gathered[k].reshape(size, rows, out_per_rank).transpose(1, 0, 2).reshape(rows, -1)
            if not np.array_equal(full, reference[k * rows:(k + 1) * rows]):
                bad += 1
                print(f"rank {rank}: {what} wrong in chunk {k}", file=sys.stderr)
    hidden = min(max((t["blocking"] - t["overlapped"]) / t["comm"], 0.0), 1.0) if t["comm"] > 0 else 0
    strict = (min(max((t["compute"] + t["comm"] - t["overlapped"]) / t["comm"], 0.0), 1.0)
              if t["comm"] > 0 else 0)
    if rank == 0:
        print(f"tp_linear N={size} batch={batch} in={n_in} out={out_per_rank * size} "
              f"chunks={chunks} algorithm={plans[0].algorithm} (median of {repeats})\n"
              f"  compute {t['compute'] * 1e3:.3f} ms, communication {t['comm'] * 1e3:.3f} ms\n"
              f"  blocking {t['blocking'] * 1e3:.3f} ms, overlapped {t['overlapped'] * 1e3:.3f} ms, "
              f"communication hidden {hidden * 100:.0f}% "
              f"({strict * 100:.0f}% against compute + communication)")
    total = comm.allreduce(bad, op=MPI.SUM)
    if rank == 0:
        print("  results", "correct" if total == 0 else "WRONG")
    del plans  # before MPI is finalized
    return 0 if total == 0 else 1


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # one rank failing would leave the others blocked: end the job
        traceback.print_exc()
        MPI.COMM_WORLD.Abort(1)
    sys.exit(status)
