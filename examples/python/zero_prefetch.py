#!/usr/bin/env python3
"""ZeRO-style parameter prefetch with NumPy: parameters sharded across ranks, gathered
per layer.

    mpirun -np 4 python3 examples/python/zero_prefetch.py [layers] [params-per-layer] [steps]

Each rank owns 1/N of every layer's parameters. Before layer l runs, its full parameters
are all-gathered. Blocking: gather layer l, then compute it. Prefetch: the gather of
layer l+1 is started (a persistent agx.Plan per layer, made once and started every step)
before layer l is computed, and advanced with test() between slices of the layer's
compute. Every step loads new shard values (as after an optimizer update). The final
activations of both runs are checked against a serial reference; the program prints the
communication alone, both run times and the fraction of communication hidden (totals
over the steps, slowest rank). Exits 1 when a result is wrong.
The C++ version is examples/zero_prefetch.cpp.
"""
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

import agx

REPEAT = 4      # passes over the activation per layer (the compute cost)
SLICE = 4096    # elements computed between two polls


def param(step, layer, index):
    """Parameter `index` (an array of indices) of `layer` at `step`, known everywhere."""
    return (0.5 + ((index * 31 + layer * 7 + step * 3) % 17) / 64.0).astype(np.float32)


def layer_forward(a, w, poll=None):
    """a = frac(a * w + roll(w, -1) / 8), REPEAT times, in slices with `poll` between."""
    w_next = np.roll(w, -1) / np.float32(8)
    for _ in range(REPEAT):
        for lo in range(0, a.size, SLICE):
            s = slice(lo, lo + SLICE)
            a[s] = a[s] * w[s] + w_next[s]
            a[s] -= np.floor(a[s])
            if poll:
                poll()


def main():
    args = [int(a) for a in sys.argv[1:]]
    layers, per_layer, steps = (args + [8, 1 << 16, 3][len(args):])[:3]
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    per_layer -= per_layer % size
    shard = per_layer // size
    mine = np.arange(rank * shard, (rank + 1) * shard)
    shards = [np.zeros(shard, np.float32) for _ in range(layers)]
    full = [np.zeros(per_layer, np.float32) for _ in range(layers)]
    plans = [agx.plan(comm, shards[l], full[l]) for l in range(layers)]  # reused every step

    t_comm = t_blocking = t_prefetch = 0.0
    bad = 0
    for step in range(steps):
        ref = np.full(per_layer, 0.25, np.float32)
        for l in range(layers):
            layer_forward(ref, param(step, l, np.arange(per_layer)))
        for l in range(layers):
            shards[l][:] = param(step, l, mine)

        comm.Barrier()
        t0 = time.perf_counter()
        for l in range(layers):
            agx.allgather(comm, shards[l], full[l])
        t_comm += time.perf_counter() - t0

        comm.Barrier()
        t0 = time.perf_counter()
        a = np.full(per_layer, 0.25, np.float32)
        for l in range(layers):
            agx.allgather(comm, shards[l], full[l])
            layer_forward(a, full[l])
        t_blocking += time.perf_counter() - t0
        bad += not np.array_equal(a, ref)
        for f in full:
            f[:] = 0

        comm.Barrier()
        t0 = time.perf_counter()
        a = np.full(per_layer, 0.25, np.float32)
        plans[0].start()
        for l in range(layers):
            nxt = plans[l + 1] if l + 1 < layers else None
            if nxt:
                nxt.start()  # prefetch the next layer
            plans[l].wait()
            layer_forward(a, full[l], nxt.test if nxt else None)
        t_prefetch += time.perf_counter() - t0
        bad += not np.array_equal(a, ref)

    slowest = np.zeros(3)
    comm.Allreduce(np.array([t_comm, t_blocking, t_prefetch]), slowest, op=MPI.MAX)
    t_comm, t_blocking, t_prefetch = slowest
    hidden = min(max((t_blocking - t_prefetch) / t_comm, 0.0), 1.0) if t_comm > 0 else 0
    if rank == 0:
        print(f"zero_prefetch N={size} layers={layers} params/layer={per_layer} steps={steps} "
              f"algorithm={plans[0].algorithm}\n"
              f"  communication {t_comm * 1e3:.3f} ms, blocking {t_blocking * 1e3:.3f} ms, "
              f"prefetch {t_prefetch * 1e3:.3f} ms, hidden {hidden * 100:.0f}%")
    total = comm.allreduce(bad, op=MPI.SUM)
    if rank == 0:
        print("  results", "correct" if total == 0 else "WRONG")
    del plans
    return 0 if total == 0 else 1


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # one rank failing would leave the others blocked: end the job
        traceback.print_exc()
        MPI.COMM_WORLD.Abort(1)
    sys.exit(status)
