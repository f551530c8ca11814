"""agx as a torch.distributed backend (docs/torch.md).

``import agx.torch`` registers the backend ``"agx"``; then, under mpirun or srun::

    import torch.distributed as dist
    import agx.torch
    dist.init_process_group("agx")          # rank and size from MPI, no store to set up
    dist.all_gather_into_tensor(out, mine)  # agx's all-gather
    dist.all_reduce(grad)                   # the MPI library's

The all-gather calls (``all_gather`` with equal or uneven shapes,
``all_gather_into_tensor``, ``all_gather_coalesced``) run agx's nonblocking all-gather;
``all_reduce``, ``reduce``, ``reduce_scatter``, ``broadcast``, ``all_to_all``,
``gather``, ``scatter``, ``send``/``recv`` and ``barrier`` run the MPI library's
nonblocking calls. ``new_group(ranks)`` is an MPI sub-communicator.
"""

import os
import socket
from datetime import timedelta

from mpi4py import MPI  # initializes MPI (MPI_THREAD_MULTIPLE) and finalizes it at exit

import torch  # noqa: F401  (torch.distributed needs torch)
import torch.distributed as dist

from . import _torch

ProcessGroupAgx = _torch.ProcessGroupAgx
BACKEND = "agx"

# Rank 0's TCPStore server (torch needs a store for its own bookkeeping: the barrier at
# the end of init_process_group). Kept alive here so that env:// reuses it.
_server = None


def _fill_environment():
    """Sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    from MPI where they are unset, so that init_process_group's default env:// works
    under mpirun with nothing set up. Collective over MPI_COMM_WORLD."""
    global _server
    world = MPI.COMM_WORLD
    node = world.Split_type(MPI.COMM_TYPE_SHARED)
    defaults = {"RANK": world.rank, "WORLD_SIZE": world.size,
                "LOCAL_RANK": node.rank, "LOCAL_WORLD_SIZE": node.size}
    node.Free()
    for key, value in defaults.items():
        os.environ.setdefault(key, str(value))
    unset = "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ
    if not world.allreduce(unset, op=MPI.LOR):
        return
    names = world.allgather(MPI.Get_processor_name())
    address = None
    if world.rank == 0:
        # One node: loopback. Several: rank 0's host name, as the other nodes resolve it.
        host = "127.0.0.1" if len(set(names)) == 1 else socket.gethostname()
        try:
            _server = dist.TCPStore(host, 0, world.size, True, timedelta(minutes=30),
                                    wait_for_workers=False, multi_tenant=True)
            address = (host, _server.port)
        except Exception as e:  # every rank raises, none waits
            address = ("", str(e))
    address = world.bcast(address, root=0)
    if address[0] == "":
        raise RuntimeError(f"agx.torch: rank 0 could not start torch's store: {address[1]}")
    os.environ.setdefault("MASTER_ADDR", address[0])
    os.environ.setdefault("MASTER_PORT", str(address[1]))


def _create(options, pg_options):
    """torch's creator for "agx" (extended API: it receives the group's global ranks)."""
    ranks = list(options.global_ranks_in_group)
    if not ranks:
        return ProcessGroupAgx.create_world(options.group_rank, options.group_size)
    # A group of a default group of another backend: its ranks are MPI_COMM_WORLD's, which
    # holds only where torch numbers the processes as MPI does.
    default = dist.distributed_c10d._get_default_group()
    if not isinstance(default, ProcessGroupAgx) and dist.get_rank() != MPI.COMM_WORLD.rank:
        raise RuntimeError(
            f"agx.torch: torch rank {dist.get_rank()} is MPI rank {MPI.COMM_WORLD.rank}: an "
            f"agx group of a {dist.get_backend()} default group needs torch's ranks to be MPI's")
    return ProcessGroupAgx.create_group(ranks, options.group_rank)


def calls(group=None):
    """Calls the agx process group `group` (default: the default group) has served, by
    operation: {"all_gather": n, "all_gather_into_tensor": n, "all_reduce": n, ...}."""
    return _agx_group(group).calls()


def last_algorithm(group=None):
    """The algorithm, with its parameters, of the group's last all-gather."""
    return _agx_group(group).last_algorithm()


def last_way(group=None):
    """Where the group's last all-gather wrote: "direct" (into the output tensors where
    they are), "in place" or "staging" (a staging buffer, then copies)."""
    return _agx_group(group).last_way()


def _agx_group(group):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupAgx):
        raise TypeError(f"agx.torch: {type(pg).__name__} is not an agx process group")
    return pg


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create, extended_api=True)
_fill_environment()
