# Bad input raises before any communication (each test passes the same bad input on
# every rank, then checks that a correct call still works), with the MPI error class.
import numpy as np
import pytest
from mpi4py import MPI

import agx
from patterns import block, gathered, same


@pytest.fixture(autouse=True)
def still_works(comm):
    yield
    # Nothing half-sent is left behind: a correct call right after gets correct data.
    assert same(agx.allgather(comm, block(comm.rank, 4, np.int32)), gathered(comm.size, 4, np.int32))


def raises(error_class, match, call, *args, **kwargs):
    with pytest.raises(agx.Error, match=match) as e:
        call(*args, **kwargs)
    assert e.value.error_class == error_class
    assert isinstance(e.value, RuntimeError)


def test_recv_too_small(comm):
    raises(MPI.ERR_COUNT, "recv holds", agx.allgather, comm, np.zeros(3), np.zeros(3 * comm.size - 1))
    raises(MPI.ERR_COUNT, "recv holds", agx.start, comm, np.zeros(3), np.zeros(3 * comm.size - 1))
    raises(MPI.ERR_COUNT, "recv holds", agx.plan, comm, np.zeros(3), np.zeros(3 * comm.size - 1))


def test_dtype_mismatch(comm):
    raises(MPI.ERR_TYPE, "dtype", agx.allgather, comm, np.zeros(2, np.int32),
           np.zeros(2 * comm.size, np.float32))
    raises(MPI.ERR_TYPE, "dtype", agx.allgather, comm, np.zeros(2, ">i4"),
           np.zeros(2 * comm.size, "<i4"))
    raises(MPI.ERR_TYPE, "dtype", agx.allgatherv, comm, np.zeros(1, np.int8),
           np.zeros(comm.size, np.uint8), [1] * comm.size)


def test_freed_and_null_communicators(comm):
    dup = comm.Dup()
    dup.Free()
    raises(MPI.ERR_COMM, "COMM_NULL", agx.allgather, dup, np.zeros(1))
    raises(MPI.ERR_COMM, "COMM_NULL", agx.start, MPI.COMM_NULL, np.zeros(1))
    raises(MPI.ERR_COMM, "COMM_NULL", agx.plan, MPI.Comm(), np.zeros(1))


def test_inter_communicator(comm):
    if comm.size < 2:
        pytest.skip("needs two groups")
    color = comm.rank % 2
    local = comm.Split(color, comm.rank)
    inter = local.Create_intercomm(0, comm, 1 - color)
    try:
        raises(MPI.ERR_COMM, "inter-communicators", agx.allgather, inter, np.zeros(1))
    finally:
        inter.Free()
        local.Free()


def test_not_a_communicator(comm):
    with pytest.raises(TypeError, match="mpi4py.MPI.Comm"):
        agx.allgather(42, np.zeros(1))
    with pytest.raises(TypeError, match="mpi4py.MPI.Comm"):
        agx.allgather(MPI.INT, np.zeros(1))


def test_non_contiguous(comm):
    with pytest.raises(ValueError, match="not C-contiguous"):
        agx.allgather(comm, np.zeros(10)[::2])
    with pytest.raises(ValueError, match="not C-contiguous"):
        agx.allgather(comm, np.zeros(2), np.zeros((2 * comm.size, 2))[:, 0])
    with pytest.raises(ValueError, match="not C-contiguous"):
        agx.start(comm, np.zeros((3, 4), order="F"))
    with pytest.raises(ValueError, match="not C-contiguous"):
        agx.allgatherv(comm, np.zeros(1), np.zeros(4 * comm.size)[::2], [1] * comm.size)


def test_not_buffers(comm):
    with pytest.raises(TypeError, match="buffer protocol"):
        agx.allgather(comm, [1, 2, 3])
    with pytest.raises(TypeError, match="Python object references"):
        agx.allgather(comm, np.array([None, 1], dtype=object))
    with pytest.raises(ValueError, match="read-only"):
        agx.allgather(comm, np.zeros(1, np.uint8), bytes(comm.size))
    with pytest.raises(ValueError, match="needs recv"):
        agx.allgather(comm, None)


def test_in_place_not_a_multiple(comm):
    if comm.size == 1:
        pytest.skip("every size is a multiple of 1")
    raises(MPI.ERR_COUNT, "not a multiple", agx.allgather, comm, None, np.zeros(comm.size + 1))


def test_overlap(comm):
    buf = np.zeros(4 * comm.size)
    raises(MPI.ERR_BUFFER, "overlap", agx.allgather, comm, buf[:4], buf)


def test_unknown_algorithm(comm):
    raises(MPI.ERR_ARG, "names no algorithm.*ring", agx.allgather, comm, np.zeros(1), None, "warp")
    with pytest.raises(TypeError):
        agx.allgather(comm, np.zeros(1), algorithm=3)


def test_v_bad_counts(comm):
    n = comm.size
    send = np.zeros(1)
    raises(MPI.ERR_ARG, "counts has", agx.allgatherv, comm, send, np.zeros(n), [1] * (n + 1))
    raises(MPI.ERR_ARG, "displs has", agx.allgatherv, comm, send, np.zeros(n), [1] * n, [0] * (n + 1))
    raises(MPI.ERR_COUNT, "negative count", agx.allgatherv, comm, send, np.zeros(n), [-1] * n)
    raises(MPI.ERR_COUNT, "negative displacement", agx.allgatherv, comm, send, np.zeros(n),
           [1] * n, [-1] * n)
    raises(MPI.ERR_ARG, "ends past", agx.allgatherv, comm, send, np.zeros(n), [1] * n,
           list(range(1, n + 1)))
    raises(MPI.ERR_COUNT, "send has 2 elements", agx.allgatherv, comm, np.zeros(2),
           np.zeros(n), [1] * n)
    with pytest.raises(TypeError):
        agx.allgatherv(comm, send, np.zeros(n), [1.0] * n)
    with pytest.raises(TypeError):
        agx.allgatherv(comm, send, np.zeros(n), 3)


def test_error_type():
    assert issubclass(agx.Error, RuntimeError)
    e = agx.Error("x")
    assert e.error_class == MPI.ERR_OTHER
