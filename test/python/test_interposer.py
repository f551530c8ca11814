# With libagx_pmpi.so preloaded (the meson test python-np3-preloaded sets LD_PRELOAD and
# AGX_TEST_PMPI to its path), agx's own calls go to libagx directly and never through
# the interposer: its counters stay where they were, while mpi4py's comm.Allgather is
# intercepted. Skipped without the preload.
import ctypes
import os

import numpy as np
import pytest

import agx
from patterns import block, gathered, same

PMPI = os.environ.get("AGX_TEST_PMPI", "")
pytestmark = pytest.mark.skipif(not PMPI, reason="libagx_pmpi.so is not preloaded")


def counters():
    lib = ctypes.CDLL(PMPI)  # the preloaded copy: dlopen returns the loaded library
    lib.agx_pmpi_calls.restype = ctypes.c_ulonglong
    lib.agx_pmpi_calls.argtypes = [ctypes.c_char_p]
    lib.agx_pmpi_passthrough_calls.restype = ctypes.c_ulonglong
    return lib.agx_pmpi_calls(None), lib.agx_pmpi_passthrough_calls()


def test_preloaded():
    with open("/proc/self/maps") as maps:
        assert os.path.basename(PMPI) in maps.read()


def test_agx_calls_are_not_intercepted(comm):
    before = counters()
    send = block(comm.rank, 50, np.float64)
    want = gathered(comm.size, 50, np.float64)
    assert same(agx.allgather(comm, send), want)
    assert same(agx.allgather(comm, send, algorithm="ring"), want)
    assert same(agx.start(comm, send).wait(), want)
    plan = agx.plan(comm, send)
    plan.start()
    assert same(plan.wait(), want)
    counts = [50] * comm.size
    assert same(agx.allgatherv(comm, send, None, counts), want)
    assert counters() == before

    recv = np.zeros_like(want)
    comm.Allgather(send, recv)  # the MPI library's entry point: the interposer takes it
    assert same(recv, want)
    after = counters()
    assert after[0] + after[1] == before[0] + before[1] + 1
