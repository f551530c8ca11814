#!/usr/bin/env python3
"""What a Python call of agx.allgather costs over the C++ call, at 8 B and 1 MiB.

    mpirun -np 1 python3 examples/python/call_overhead.py [iterations] [rounds]
    mpirun -np 2 python3 examples/python/call_overhead.py [iterations] [rounds]

Per size, `rounds` interleaved rounds of: `iterations` calls of agx.allgather(comm, send,
recv, algorithm) in a Python loop, and `iterations` calls of the C++ entry point
agx::allgather_bytes in a C++ loop (agx._cxx_loop: same arguments, checked once).
Reported: the median time per call of each (slowest rank) and the difference, which is
what the Python layer adds (argument checks, buffer views, GIL release, exception
translation). One rank: the call copies send into recv; two ranks force `ring`. The
gathered data is checked at the end of each round. Exits 1 on a wrong result.
"""
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

import agx


def main():
    args = [int(a) for a in sys.argv[1:]]
    iterations, rounds = (args + [2000, 7][len(args):])[:2]
    comm = MPI.COMM_WORLD
    algorithm = "ring" if comm.size > 1 else None
    bad = 0
    if comm.rank == 0:
        print(f"call_overhead N={comm.size} algorithm={algorithm or 'auto'} "
              f"iterations={iterations} rounds={rounds}")
        print(f"{'bytes/rank':>12} {'python us':>10} {'c++ us':>10} {'overhead us':>12}")
    for nbytes in (8, 1 << 20):
        send = ((np.arange(nbytes) + 3 * comm.rank) % 251).astype(np.uint8)
        want = np.concatenate([((np.arange(nbytes) + 3 * r) % 251).astype(np.uint8)
                               for r in range(comm.size)])
        recv = np.zeros(nbytes * comm.size, np.uint8)
        n = max(1, iterations if nbytes < 4096 else iterations // 20)
        agx.allgather(comm, send, recv, algorithm)  # warm-up: a first call sets up the comm
        agx._cxx_loop(comm, send, recv, 1, algorithm)
        py_t, cxx_t = [], []
        for _ in range(rounds):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(n):
                agx.allgather(comm, send, recv, algorithm)
            py_t.append(comm.allreduce((time.perf_counter() - t0) / n, op=MPI.MAX))
            bad += not np.array_equal(recv, want)
            recv[:] = 0
            comm.Barrier()
            cxx_t.append(comm.allreduce(agx._cxx_loop(comm, send, recv, n, algorithm) / n,
                                        op=MPI.MAX))
            bad += not np.array_equal(recv, want)
        p, c = np.median(py_t) * 1e6, np.median(cxx_t) * 1e6
        if comm.rank == 0:
            print(f"{nbytes:>12} {p:>10.2f} {c:>10.2f} {p - c:>12.2f}")
    total = comm.allreduce(bad, op=MPI.SUM)
    if comm.rank == 0:
        print("results", "verified" if total == 0 else "WRONG")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # one rank failing would leave the others blocked: end the job
        traceback.print_exc()
        MPI.COMM_WORLD.Abort(1)
    sys.exit(status)
