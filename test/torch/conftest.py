# The torch backend's tests: every rank runs the same tests in the same order (each is
# collective) in one default process group of the backend "agx", made once per session.
# A failure on one rank aborts the whole MPI job (as test/python/conftest.py does), so that
# the other ranks do not wait in the next test's collective until the test's timeout.
import os
import sys

import pytest
import torch
import torch.distributed as dist
from mpi4py import MPI

import agx.torch

_status = {"exit": 0}


def pytest_sessionstart(session):
    dist.init_process_group("agx")


@pytest.fixture
def rank():
    return dist.get_rank()


@pytest.fixture
def size():
    return dist.get_world_size()


def pytest_report_header(config):
    return (f"torch {torch.__version__}, agx.torch from {agx.torch.__file__}, rank "
            f"{MPI.COMM_WORLD.rank} of {MPI.COMM_WORLD.size}, "
            f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}")


def pytest_sessionfinish(session, exitstatus):
    _status["exit"] = int(exitstatus)


def pytest_unconfigure(config):
    if _status["exit"] not in (0, 5):
        sys.stdout.flush()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
    if dist.is_initialized():
        dist.destroy_process_group()
