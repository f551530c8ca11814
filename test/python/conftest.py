# Every rank runs the same tests in the same order (each test is collective). A failure
# on one rank would leave the others blocked in the next test's collective, so a failed
# session prints its report and then aborts the whole MPI job (mpirun's exit status is
# then non-zero), instead of hanging until the test's timeout.
import os
import sys

import numpy as np
import pytest
from mpi4py import MPI

import agx

_status = {"exit": 0}


@pytest.fixture
def comm():
    return MPI.COMM_WORLD


@pytest.fixture
def rng(request):
    """A generator seeded per rank and per test (reproducible, different on each rank)."""
    seed = [MPI.COMM_WORLD.rank, sum(map(ord, request.node.name))]
    return np.random.default_rng(seed)


def pytest_report_header(config):
    return (f"agx {agx.__version__} from {agx.__file__}, rank {MPI.COMM_WORLD.rank} of "
            f"{MPI.COMM_WORLD.size}, LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}")


def pytest_sessionfinish(session, exitstatus):
    _status["exit"] = int(exitstatus)


def pytest_unconfigure(config):
    if _status["exit"] not in (0, 5):  # 5: no tests collected (a selection ran nothing)
        sys.stdout.flush()
        sys.stderr.write(f"rank {MPI.COMM_WORLD.rank}: tests failed, aborting the job\n")
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
