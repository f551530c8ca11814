# Requests and plans: many in flight completed in a random order per rank, a plan
# started 1000 times, the GIL released while agx blocks, buffers kept alive.
import threading
import time

import numpy as np
import pytest
from mpi4py import MPI

import agx
from patterns import ALGORITHMS, DTYPES, block, gathered, same


def test_requests_in_random_order(comm, rng):
    # Started in the same order everywhere (collective), completed in a per-rank order.
    calls = [(ALGORITHMS[i % len(ALGORITHMS)], DTYPES[i % len(DTYPES)], (i * 37) % 300)
             for i in range(24)]
    requests = [agx.start(comm, block(comm.rank, n, dtype), algorithm=algorithm)
                for algorithm, dtype, n in calls]
    order = rng.permutation(len(requests))
    for k, i in enumerate(order):
        if k % 2:  # poll some, wait for the others
            while not requests[i].test():
                pass
        else:
            requests[i].wait()
    for (algorithm, dtype, n), r in zip(calls, requests):
        assert not r.active
        assert same(r.recv, gathered(comm.size, n, dtype)), (algorithm, dtype, n)


def test_plan_started_1000_times(comm):
    send = np.zeros(3, np.int64)
    plan = agx.plan(comm, send, algorithm="ring" if comm.size > 1 else None)
    base = np.repeat(np.arange(comm.size, dtype=np.int64) * 1000, 3) + np.tile(np.arange(3), comm.size)
    for step in range(1000):
        send[:] = comm.rank * 1000 + np.arange(3) + step
        plan.start()
        out = plan.wait()
        if not same(out, base + step):
            pytest.fail(f"start {step}: {out} != {base + step}")
    assert plan.starts == 1000 and not plan.active


def test_plan_start_while_running(comm):
    if comm.size == 1:
        pytest.skip("one rank: a start completes at once")
    plan = agx.plan(comm, np.zeros(64, np.float32), algorithm="ring")
    plan.start()
    with pytest.raises(agx.Error) as e:
        plan.start()
    assert e.value.error_class == MPI.ERR_REQUEST
    plan.wait()


def test_request_keeps_its_arrays(comm):
    r = agx.start(comm, block(comm.rank, 1000, np.float64))  # no other reference to send
    junk = [np.full(1000, -1.0) for _ in range(8)]  # would reuse send's memory were it freed
    assert same(r.wait(), gathered(comm.size, 1000, np.float64))
    assert same(r.wait(), r.recv)  # waiting again returns at once
    del junk


def test_unwaited_request_is_waited_when_dropped(comm):
    r = agx.start(comm, block(comm.rank, 100, np.int16))
    del r  # its destructor waits for it
    assert same(agx.allgather(comm, block(comm.rank, 5, np.int8)), gathered(comm.size, 5, np.int8))


def _counts_while(body):
    """Ticks a Python thread makes while `body` runs on this one."""
    ticks, stop = [0], threading.Event()

    def tick():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.02)
    before = ticks[0]
    body()
    during = ticks[0] - before
    stop.set()
    t.join()
    return during


@pytest.mark.parametrize("how", ["allgather", "wait", "plan"])
def test_gil_released_while_blocked(comm, how):
    if comm.size == 1:
        pytest.skip("one rank never waits for another")
    send = block(comm.rank, 10, np.int32)
    plan = agx.plan(comm, send) if how == "plan" else None
    comm.Barrier()
    if comm.rank == 0:
        time.sleep(0.25)  # the others block in agx meanwhile
    if how == "allgather":
        body = lambda: agx.allgather(comm, send)  # noqa: E731
    elif how == "wait":
        body = lambda: agx.start(comm, send, algorithm="ring").wait()  # noqa: E731
    else:
        body = lambda: (plan.start(), plan.wait())  # noqa: E731
    ticks = _counts_while(body)
    if comm.rank != 0:
        assert ticks >= 5, f"another thread ran only {ticks} times while agx blocked"


def test_progress_thread(comm):
    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        with pytest.raises(agx.Error):
            agx.set_progress_thread(True)
        return
    agx.set_progress_thread(True)
    try:
        assert agx.progress_thread_running()
        r = agx.start(comm, block(comm.rank, 2000, np.float32), algorithm="ring")
        time.sleep(0.05)  # progress comes from the thread only
        assert same(r.wait(), gathered(comm.size, 2000, np.float32))
    finally:
        agx.set_progress_thread(False)
    assert not agx.progress_thread_running()
