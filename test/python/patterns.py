# Values every rank can compute for every other rank's block, so that each rank checks
# the whole result on its own.
import numpy as np

import agx

ALGORITHMS = list(agx.algorithms())  # every name of agx's table, "auto" first

DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64, np.complex64, np.complex128, np.bool_]

# 31 bytes, packed (no padding), an odd size that no integer type has.
STRUCT = np.dtype([("id", np.int32), ("pos", np.float64, (3,)), ("tag", "S3")])


def block(rank, n, dtype):
    """Rank `rank`'s n elements of `dtype` (distinct per rank and index)."""
    dtype = np.dtype(dtype)
    base = (np.arange(n, dtype=np.int64) * 31 + rank * 7 + 1) % 97
    if dtype == STRUCT:
        out = np.zeros(n, dtype=STRUCT)
        out["id"] = base + rank * 1000
        out["pos"] = np.stack([base * 0.5, base * -1.25, np.full(n, rank + 0.125)], axis=1)
        out["tag"] = [b"r%d" % ((rank + i) % 10) for i in range(n)]
        return out
    if dtype.kind == "c":
        return (base + 1j * (rank + 1)).astype(dtype)
    if dtype.kind == "b":
        return ((base + rank) % 2).astype(dtype)
    return base.astype(dtype)


def gathered(size, n, dtype):
    """What every rank holds after all-gathering block(r, n, dtype) of every rank r."""
    return np.concatenate([block(r, n, dtype) for r in range(size)])


def sentinel(n, dtype):
    """A receive array whose content no block has (so untouched elements show)."""
    out = np.empty(n, dtype=dtype)
    out.view(np.uint8)[:] = 0xA5
    return out


def same(a, b):
    """Equal element by element, compared as bytes (NaN-free and exact for every dtype)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
