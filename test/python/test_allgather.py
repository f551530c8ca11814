# agx.allgather, agx.start and agx.plan (uniform blocks): every algorithm, every dtype,
# a structured dtype, in place, other buffer-protocol objects.
import array

import numpy as np
import pytest

import agx
from patterns import ALGORITHMS, DTYPES, STRUCT, block, gathered, same, sentinel


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("n", [0, 1, 7, 5000])
def test_every_algorithm(comm, algorithm, n):
    send = block(comm.rank, n, np.float64)
    want = gathered(comm.size, n, np.float64)
    recv = sentinel(comm.size * n + 3, np.float64)  # 3 extra elements stay untouched
    out = agx.allgather(comm, send, recv, algorithm=algorithm)
    assert out is recv
    assert same(recv[:comm.size * n], want)
    assert same(recv[comm.size * n:], sentinel(3, np.float64))

    request = agx.start(comm, send, algorithm=algorithm)
    if algorithm != "auto":
        assert request.algorithm == algorithm
    assert same(request.wait(), want)
    assert not request.active

    plan = agx.plan(comm, send, algorithm=algorithm)
    for _ in range(2):
        plan.start()
        assert same(plan.wait(), want)
    assert plan.starts == 2


@pytest.mark.parametrize("dtype", DTYPES + [STRUCT], ids=lambda d: np.dtype(d).name)
def test_dtypes(comm, dtype):
    send = block(comm.rank, 5, dtype)
    out = agx.allgather(comm, send)  # recv allocated: N * len(send) of send's dtype
    assert out.dtype == np.dtype(dtype) and out.shape == (comm.size * 5,)
    assert same(out, gathered(comm.size, 5, dtype))


@pytest.mark.parametrize("algorithm", ["ring", "bruck", "bruck:k=4", "recursive_doubling", "shared_memory"])
def test_structured_dtype(comm, algorithm):
    send = block(comm.rank, 33, STRUCT)
    recv = sentinel(comm.size * 33, STRUCT)
    agx.allgather(comm, send, recv, algorithm=algorithm)
    want = gathered(comm.size, 33, STRUCT)
    assert same(recv, want)
    assert list(recv["tag"][:2]) == list(want["tag"][:2])


def test_rows_keep_their_shape(comm):
    send = block(comm.rank, 6, np.int32).reshape(2, 3)
    out = agx.allgather(comm, send)
    assert out.shape == (2 * comm.size, 3)
    assert same(out.reshape(-1), gathered(comm.size, 6, np.int32))
    scalar = agx.allgather(comm, np.array(comm.rank, dtype=np.int16))  # 0-d: one element
    assert list(scalar) == list(range(comm.size))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_in_place(comm, algorithm):
    n = 9
    recv = sentinel(comm.size * n, np.int64)
    recv[comm.rank * n:(comm.rank + 1) * n] = block(comm.rank, n, np.int64)
    assert agx.allgather(comm, None, recv, algorithm=algorithm) is recv
    assert same(recv, gathered(comm.size, n, np.int64))

    recv = sentinel(comm.size * n, np.int64)
    recv[comm.rank * n:(comm.rank + 1) * n] = block(comm.rank, n, np.int64)
    agx.start(comm, None, recv, algorithm=algorithm).wait()
    assert same(recv, gathered(comm.size, n, np.int64))

    recv[:] = sentinel(comm.size * n, np.int64)
    plan = agx.plan(comm, None, recv, algorithm=algorithm)
    assert plan.send is None and plan.recv is recv
    recv[comm.rank * n:(comm.rank + 1) * n] = block(comm.rank, n, np.int64)
    plan.start()
    plan.wait()
    assert same(recv, gathered(comm.size, n, np.int64))


def test_mpi4py_in_place(comm):
    """mpi4py's MPI.IN_PLACE as the send argument is in place, as None is."""
    from mpi4py import MPI
    n = 5
    recv = sentinel(comm.size * n, np.int32)
    recv[comm.rank * n:(comm.rank + 1) * n] = block(comm.rank, n, np.int32)
    assert agx.allgather(comm, MPI.IN_PLACE, recv) is recv
    assert same(recv, gathered(comm.size, n, np.int32))
    counts, displs, length = [n] * comm.size, [r * n for r in range(comm.size)], comm.size * n
    recv = sentinel(length, np.int32)
    recv[comm.rank * n:(comm.rank + 1) * n] = block(comm.rank, n, np.int32)
    agx.allgatherv(comm, MPI.IN_PLACE, recv, counts, displs)
    assert same(recv, gathered(comm.size, n, np.int32))
    recv = sentinel(comm.size * n, np.int32)
    recv[comm.rank * n:(comm.rank + 1) * n] = block(comm.rank, n, np.int32)
    agx.start(comm, MPI.IN_PLACE, recv).wait()
    assert same(recv, gathered(comm.size, n, np.int32))


def test_other_buffer_objects(comm):
    send = bytearray(block(comm.rank, 10, np.uint8).tobytes())
    recv = bytearray(comm.size * 10)
    out = agx.allgather(comm, send, recv)  # returns a NumPy view of recv
    assert bytes(recv) == gathered(comm.size, 10, np.uint8).tobytes()
    assert out.tobytes() == bytes(recv) and out.shape == (comm.size * 10,)

    send = array.array("d", block(comm.rank, 4, np.float64))
    recv = array.array("d", bytes(8 * 4 * comm.size))
    agx.allgather(comm, memoryview(send), recv)
    assert list(recv) == list(gathered(comm.size, 4, np.float64))

    out = agx.allgather(comm, bytes(block(comm.rank, 3, np.uint8)))  # read-only send is fine
    assert out.tobytes() == gathered(comm.size, 3, np.uint8).tobytes()


def test_one_mebibyte(comm):
    send = block(comm.rank, 1 << 17, np.float64)  # 1 MiB per rank
    assert same(agx.allgather(comm, send, algorithm="ring"), gathered(comm.size, 1 << 17, np.float64))


def test_subcommunicator(comm):
    half = comm.Split(comm.rank % 2, comm.rank)
    try:
        out = agx.allgather(half, np.array([comm.rank], dtype=np.int32))
        assert list(out) == list(range(comm.rank % 2, comm.size, 2))
    finally:
        half.Free()


def test_algorithm_names(comm):
    names = agx.algorithms()
    assert list(names)[0] == "auto" and "ring" in names and "bruck" in names
    assert all(isinstance(s, str) and s for s in names.values())
    assert agx.choose_algorithm(comm, np.zeros(4), algorithm="ring") == "ring"
    assert agx.choose_algorithm(comm, np.zeros(4)) in names
