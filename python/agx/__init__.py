"""agx: all-gather for MPI jobs, for mpi4py communicators and NumPy arrays (docs/python.md).

The calls live in the extension module agx._agx and are all here; ``import agx.torch``
adds the torch.distributed backend "agx" (docs/torch.md).
"""

from ._agx import *  # noqa: F401,F403
from ._agx import __version__, _cxx_loop  # noqa: F401  (_cxx_loop: examples/python/call_overhead.py)
