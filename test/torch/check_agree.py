# Run with AGX_CHECK=1 at 2 ranks or more only (test/torch/meson.build): shapes and dtypes that disagree
# across ranks are a clear exception on every rank, never a hang or wrong data.
import pytest
import torch
import torch.distributed as dist


def test_uneven_shapes_that_disagree(rank, size):
    assert size >= 2, "run at 2 ranks or more"
    # Rank 0 believes every rank sends 1 row of 3; rank r > 0 sends r + 1 rows.
    mine = torch.ones(rank + 1 if rank else 1, 3)
    outs = [torch.empty(1 if rank == 0 or i == 0 else i + 1, 3) for i in range(size)]
    with pytest.raises(RuntimeError, match="agx: all_gather: rank 0's output for rank 1 holds 3 "
                                           "elements, but rank 1 sends 6"):
        dist.all_gather(outs, mine)


def test_dtypes_that_disagree(rank, size):
    assert size >= 2, "run at 2 ranks or more"
    dtype = torch.float32 if rank == 0 else torch.int32
    out = torch.empty(size * 2, dtype=dtype)
    with pytest.raises(TypeError, match="agx: all_gather_into_tensor: rank 1 passes Int, rank 0 Float"):
        dist.all_gather_into_tensor(out, torch.zeros(2, dtype=dtype))
    with pytest.raises(TypeError, match="agx: all_reduce: rank 1 passes Int, rank 0 Float"):
        dist.all_reduce(torch.zeros(2, dtype=dtype))


def test_counts_that_disagree(rank, size):
    assert size >= 2, "run at 2 ranks or more"
    with pytest.raises(RuntimeError, match="agx: broadcast: rank 1 passes 4 elements, rank 0 passes 3"):
        dist.broadcast(torch.zeros(3 if rank == 0 else 4), src=0)


def test_agreeing_calls_still_run(rank, size):
    out = torch.empty(size * 2)
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank)))
    assert torch.equal(out, torch.arange(size, dtype=torch.float32).repeat_interleave(2))


def test_roots_that_disagree(rank, size):
    assert size >= 2, "run at 2 ranks or more"
    with pytest.raises(RuntimeError, match="agx: broadcast: rank 1 names root 1, rank 0 root 0"):
        dist.broadcast(torch.zeros(3), src=0 if rank == 0 else 1)


def test_coalesced_lists_that_disagree(rank, size):
    assert size >= 2, "run at 2 ranks or more"
    k = 1 if rank == 0 else 2
    with pytest.raises(RuntimeError, match="agx: all_gather_coalesced: rank 1 passes 2 elements, rank 0 passes 1"):
        dist.all_gather_coalesced([[torch.empty(2) for _ in range(size)] for _ in range(k)],
                                  [torch.zeros(2) for _ in range(k)])
