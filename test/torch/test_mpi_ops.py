# The operations the agx backend hands to the MPI library: what a training script calls
# besides all-gather must work unchanged, and what cannot work must say so.
import pytest
import torch
import torch.distributed as dist

import agx.torch

REDUCIBLE = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
             torch.uint8, torch.int16, torch.int32, torch.int64, torch.complex64,
             torch.complex128]


@pytest.mark.parametrize("dtype", REDUCIBLE)
def test_all_reduce_sum_every_dtype(rank, size, dtype):
    t = (torch.arange(6) % 3 + rank).to(dtype)
    dist.all_reduce(t)
    want = sum((torch.arange(6) % 3 + r) for r in range(size)).to(dtype)
    assert torch.equal(t, want)


@pytest.mark.parametrize("op,combine", [(dist.ReduceOp.MAX, max), (dist.ReduceOp.MIN, min),
                                        (dist.ReduceOp.PRODUCT, lambda a, b: a * b)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_all_reduce_ops(rank, size, op, combine, dtype):
    t = torch.tensor([rank + 1, 2 * (size - rank)]).to(dtype)
    dist.all_reduce(t, op=op)
    want = [rank_value for rank_value in (1, 2 * size)]
    for r in range(1, size):
        want = [combine(want[0], r + 1), combine(want[1], 2 * (size - r))]
    assert torch.equal(t, torch.tensor(want).to(dtype))


def test_all_reduce_bool_and_bitwise(rank, size):
    b = torch.tensor([rank == 0, True, False])
    dist.all_reduce(b)  # SUM of bools: logical or
    assert torch.equal(b, torch.tensor([True, True, False]))
    x = torch.tensor([1 << rank, 0xFF], dtype=torch.int32)
    dist.all_reduce(x, op=dist.ReduceOp.BOR)
    assert x.tolist() == [(1 << size) - 1, 0xFF]


def test_unsupported_reductions_raise(rank, size):
    with pytest.raises(RuntimeError, match="ReduceOp.AVG is not supported"):
        dist.all_reduce(torch.ones(3), op=dist.ReduceOp.AVG)
    with pytest.raises(RuntimeError, match="ReduceOp.BAND needs an integer"):
        dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BAND)


def test_broadcast_reduce_and_barrier(rank, size):
    root = size - 1
    t = torch.full((5,), float(rank))
    dist.broadcast(t, src=root)
    assert torch.equal(t, torch.full((5,), float(root)))
    r = torch.full((3,), rank + 1, dtype=torch.int64)
    dist.reduce(r, dst=0)
    if rank == 0:
        assert r.tolist() == [size * (size + 1) // 2] * 3
    dist.barrier()


def test_reduce_scatter(rank, size):
    inputs = [torch.full((4,), float(rank * 10 + i)) for i in range(size)]
    out = torch.empty(4)
    dist.reduce_scatter(out, inputs)
    assert torch.equal(out, torch.full((4,), float(sum(r * 10 + rank for r in range(size)))))
    big = torch.arange(size * 3, dtype=torch.float64) + rank
    out = torch.empty(3, dtype=torch.float64)
    dist.reduce_scatter_tensor(out, big)
    assert torch.equal(out, sum(torch.arange(size * 3, dtype=torch.float64) + r
                                for r in range(size))[rank * 3:(rank + 1) * 3])


def test_all_to_all(rank, size):
    t = torch.arange(size * 2, dtype=torch.int32) + 100 * rank
    out = torch.empty(size * 2, dtype=torch.int32)
    dist.all_to_all_single(out, t)
    assert out.tolist() == [100 * r + 2 * rank + k for r in range(size) for k in range(2)]
    # Uneven splits: rank r sends i + 1 rows to rank i.
    send = torch.cat([torch.full((i + 1, 2), float(rank)) for i in range(size)])
    recv = torch.empty(size * (rank + 1), 2)
    dist.all_to_all_single(recv, send, output_split_sizes=[rank + 1] * size,
                           input_split_sizes=[i + 1 for i in range(size)])
    assert torch.equal(recv, torch.cat([torch.full((rank + 1, 2), float(r)) for r in range(size)]))
    outs = [torch.empty(3) for _ in range(size)]
    dist.all_to_all(outs, [torch.full((3,), float(rank * size + i)) for i in range(size)])
    for r in range(size):
        assert torch.equal(outs[r], torch.full((3,), float(r * size + rank)))


def test_gather_scatter(rank, size):
    mine = torch.full((2,), float(rank))
    if rank == 0:
        outs = [torch.empty(2) for _ in range(size)]
        dist.gather(mine, outs, dst=0)
        for r in range(size):
            assert torch.equal(outs[r], torch.full((2,), float(r)))
    else:
        dist.gather(mine, dst=0)
    out = torch.empty(3)
    if rank == 0:
        dist.scatter(out, [torch.full((3,), float(r * 2)) for r in range(size)], src=0)
    else:
        dist.scatter(out, src=0)
    assert torch.equal(out, torch.full((3,), float(rank * 2)))


def test_send_recv(rank, size):
    right, left = (rank + 1) % size, (rank - 1) % size
    got = torch.empty(4)
    work = dist.isend(torch.full((4,), float(rank)), dst=right)
    dist.recv(got, src=left)
    work.wait()
    assert torch.equal(got, torch.full((4,), float(left)))
    # From any source: rank 0 receives one message from each other rank.
    if rank == 0:
        seen = set()
        for _ in range(size - 1):
            t = torch.empty(1)
            src = dist.recv(t)
            assert t.item() == src
            seen.add(src)
        assert seen == set(range(1, size))
    else:
        dist.send(torch.full((1,), float(rank)), dst=0)


def test_mpi_calls_counted(rank, size):
    before = agx.torch.calls().get("all_reduce", 0)
    dist.all_reduce(torch.ones(1))
    assert agx.torch.calls()["all_reduce"] == before + 1
