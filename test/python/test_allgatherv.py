# agx.allgatherv, agx.startv and agx.planv: counts with zeros, displacements in any
# order with gaps (left untouched), in place, an allocated recv.
import numpy as np
import pytest

import agx
from patterns import ALGORITHMS, STRUCT, block, same, sentinel


def layout(size):
    """Counts with zeros (rank 0 always, every third rank too) and displacements in
    reverse rank order with a gap of 2 elements before every block."""
    counts = [0 if r % 3 == 0 else 2 * r + 1 for r in range(size)]
    displs, at = [0] * size, 2
    for r in reversed(range(size)):
        displs[r] = at
        at += counts[r] + 2
    return counts, displs, at


def expected_v(size, counts, displs, length, dtype):
    want = sentinel(length, dtype)
    for r in range(size):
        want[displs[r]:displs[r] + counts[r]] = block(r, counts[r], dtype)
    return want


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_v_with_zeros(comm, algorithm):
    counts, displs, length = layout(comm.size)
    send = block(comm.rank, counts[comm.rank], np.int32)
    recv = sentinel(length, np.int32)
    assert agx.allgatherv(comm, send, recv, counts, displs, algorithm=algorithm) is recv
    want = expected_v(comm.size, counts, displs, length, np.int32)
    assert same(recv, want)

    recv2 = sentinel(length, np.int32)
    r = agx.startv(comm, send, recv2, np.array(counts), np.array(displs), algorithm=algorithm)
    r.wait()
    assert same(recv2, want)


def test_v_all_zero(comm):
    recv = sentinel(4, np.float32)
    agx.allgatherv(comm, np.zeros(0, np.float32), recv, [0] * comm.size, [1] * comm.size)
    assert same(recv, sentinel(4, np.float32))


def test_v_packed_and_allocated(comm):
    counts = [r + 1 for r in range(comm.size)]
    out = agx.allgatherv(comm, block(comm.rank, comm.rank + 1, STRUCT), None, counts)
    want = np.concatenate([block(r, r + 1, STRUCT) for r in range(comm.size)])
    assert same(out, want)


@pytest.mark.parametrize("algorithm", ["auto", "ring", "bruck", "direct"])
def test_v_in_place(comm, algorithm):
    counts, displs, length = layout(comm.size)
    recv = sentinel(length, np.complex128)
    recv[displs[comm.rank]:displs[comm.rank] + counts[comm.rank]] = \
        block(comm.rank, counts[comm.rank], np.complex128)
    agx.allgatherv(comm, None, recv, counts, displs, algorithm=algorithm)
    assert same(recv, expected_v(comm.size, counts, displs, length, np.complex128))


def test_v_plan(comm):
    counts, displs, length = layout(comm.size)
    send = np.zeros(counts[comm.rank], np.int64)
    recv = sentinel(length, np.int64)
    plan = agx.planv(comm, send, recv, counts, displs)
    for step in range(5):
        send[:] = block(comm.rank, counts[comm.rank], np.int64) + step
        plan.start()
        plan.wait()
        want = expected_v(comm.size, counts, displs, length, np.int64)
        for r in range(comm.size):
            want[displs[r]:displs[r] + counts[r]] += step
        assert same(recv, want)
