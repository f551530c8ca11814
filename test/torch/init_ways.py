#!/usr/bin/env python3
"""The ways to make the default "agx" group besides the plain init_process_group("agx").

    mpirun -np 3 python3 test/torch/init_ways.py store|init_method

store: an explicit TCPStore (rank 0 serves it, its port sent over MPI) with torch ranks
numbered backwards from MPI's (torch rank = N - 1 - MPI rank): the agx group must follow
torch's numbering (the all-gather's blocks arrive in torch rank order).
init_method: tcp://127.0.0.1:<port> with rank and world_size given, MPI's numbering.
Exits 1 on a wrong result.
"""
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from mpi4py import MPI

import agx.torch

world = MPI.COMM_WORLD
n = world.size
way = sys.argv[1]
if way == "store":
    rank = n - 1 - world.rank
    server = dist.TCPStore("127.0.0.1", 0, n, True, timedelta(seconds=60),
                           wait_for_workers=False) if world.rank == 0 else None
    port = world.bcast(server.port if server else None, root=0)
    store = server or dist.TCPStore("127.0.0.1", port, n, False, timedelta(seconds=60))
    dist.init_process_group("agx", store=store, rank=rank, world_size=n)
elif way == "init_method":
    rank = world.rank
    if rank == 0:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    port = world.bcast(port if rank == 0 else None, root=0)
    dist.init_process_group("agx", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=n)
else:
    sys.exit(f"unknown way {way}")

assert dist.get_rank() == rank and dist.get_world_size() == n
out = torch.empty(n * 2, dtype=torch.int64)
dist.all_gather_into_tensor(out, torch.tensor([rank, 100 + rank]))
want = torch.tensor([v for r in range(n) for v in (r, 100 + r)])
ok = torch.equal(out, want) and agx.torch.calls()["all_gather_into_tensor"] == 1
sub = dist.new_group([0, n - 1])  # torch ranks
if rank in (0, n - 1):
    o = torch.empty(2 if n > 1 else 1)
    dist.all_gather_into_tensor(o, torch.tensor([float(rank)]), group=sub)
    ok = ok and o.tolist() == ([0.0, float(n - 1)] if n > 1 else [0.0])
# Every rank has passed new_group's store barrier before rank 0's store may go (with
# init_method, the default group owns it and destroy_process_group stops it).
dist.barrier()
dist.destroy_process_group()
ok = world.allreduce(ok, op=MPI.LAND)
if world.rank == 0:
    print(f"{way}: {'ok' if ok else 'WRONG'} at N={n}")
sys.exit(0 if ok else 1)
