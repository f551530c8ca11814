# agx's all-gather through torch.distributed: list and tensor forms, every CPU dtype,
# uneven and empty shapes, in place, non-contiguous tensors, coalesced, async work and
# groups. Each test also checks that agx served the call (agx.torch.calls()).
import pytest
import torch
import torch.distributed as dist

import agx.torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64,
          torch.complex128]


def block(r, shape, dtype):
    """Rank r's distinctive block of `shape` (values that survive every dtype)."""
    n = 1
    for s in shape:
        n *= s
    v = (torch.arange(n, dtype=torch.int64) * 7 + r * 31) % 100
    if dtype == torch.bool:
        return ((v + r) % 2 == 1).reshape(shape)
    return v.to(dtype).reshape(shape)


def served(name):
    return agx.torch.calls().get(name, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather_list_every_dtype(rank, size, dtype):
    before = served("all_gather")
    mine = block(rank, (3, 5), dtype)
    outs = [torch.empty((3, 5), dtype=dtype) for _ in range(size)]
    dist.all_gather(outs, mine)
    for i in range(size):
        assert torch.equal(outs[i], block(i, (3, 5), dtype)), i
    assert served("all_gather") == before + 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather_into_tensor_every_dtype(rank, size, dtype):
    before = served("all_gather_into_tensor")
    out = torch.empty(size * 6, dtype=dtype)
    dist.all_gather_into_tensor(out, block(rank, (6,), dtype))
    assert torch.equal(out, torch.cat([block(i, (6,), dtype) for i in range(size)]))
    assert served("all_gather_into_tensor") == before + 1


def test_all_gather_uneven_and_empty(rank, size):
    # Rank r sends (r % 3) rows of 4 (rank 0 and every third: none): the case Gloo refuses.
    rows = [i % 3 for i in range(size)]
    mine = block(rank, (rows[rank], 4), torch.float32)
    outs = [torch.full((rows[i], 4), -1.0) for i in range(size)]
    dist.all_gather(outs, mine)
    for i in range(size):
        assert torch.equal(outs[i], block(i, (rows[i], 4), torch.float32))


def test_all_gather_uneven_large(rank, size):
    # Uneven shards of an MoE-like layer: rank r holds (r + 1) * 1000 rows of 8 floats.
    rows = [(i + 1) * 1000 for i in range(size)]
    mine = block(rank, (rows[rank], 8), torch.float32)
    outs = [torch.empty((rows[i], 8)) for i in range(size)]
    dist.all_gather(outs, mine)
    for i in range(size):
        assert torch.equal(outs[i], block(i, (rows[i], 8), torch.float32))


def test_all_gather_into_chunks_of_one_tensor(rank, size):
    # The list's tensors are chunks of one tensor: agx writes them where they are.
    whole = torch.full((size * 10,), -1.0)
    outs = list(whole.chunk(size))
    dist.all_gather(outs, block(rank, (10,), torch.float32))
    assert torch.equal(whole, torch.cat([block(i, (10,), torch.float32) for i in range(size)]))
    assert agx.torch.last_way() == "direct"
    # Separate tensors: through the staging buffer (one tensor alone is written directly).
    outs = [torch.empty(10) for _ in range(size)]
    dist.all_gather(outs, block(rank, (10,), torch.float32))
    assert agx.torch.last_way() == ("staging" if size > 1 else "direct")
    assert torch.equal(torch.cat(outs), torch.cat([block(i, (10,), torch.float32) for i in range(size)]))


def test_all_gather_into_tensor_shapes_and_in_place(rank, size):
    out = torch.empty((size, 2, 3), dtype=torch.float64)
    dist.all_gather_into_tensor(out, block(rank, (2, 3), torch.float64))
    assert torch.equal(out, torch.stack([block(i, (2, 3), torch.float64) for i in range(size)]))
    assert agx.torch.last_way() == "direct"
    # In place: the input is this rank's chunk of the output (FSDP's flat parameter).
    flat = torch.full((size * 9,), -1.0)
    mine = flat.narrow(0, rank * 9, 9)
    mine.copy_(block(rank, (9,), torch.float32))
    dist.all_gather_into_tensor(flat, mine)
    assert torch.equal(flat, torch.cat([block(i, (9,), torch.float32) for i in range(size)]))
    assert agx.torch.last_way() == "in place"


def test_non_contiguous_input_and_output(rank, size):
    base = block(rank, (4, 6), torch.float32)
    mine = base[:, ::2]  # 4 x 3, not contiguous
    assert not mine.is_contiguous()
    out = torch.empty((3, size * 4)).t()  # (size * 4) x 3, not contiguous
    assert not out.is_contiguous()
    dist.all_gather_into_tensor(out, mine)
    assert torch.equal(out, torch.cat([block(i, (4, 6), torch.float32)[:, ::2]
                                       for i in range(size)]))
    outs = [torch.empty((3, 4)).t() for _ in range(size)]
    dist.all_gather(outs, mine)
    for i in range(size):
        assert torch.equal(outs[i], block(i, (4, 6), torch.float32)[:, ::2])


def test_all_gather_coalesced(rank, size):
    before = served("all_gather_coalesced")
    shapes = [(5,), (2, 3), (1000,)]
    inputs = [block(rank, s, torch.float32) for s in shapes]
    outputs = [[torch.empty(s) for _ in range(size)] for s in shapes]
    dist.all_gather_coalesced(outputs, inputs)
    for k, s in enumerate(shapes):
        for i in range(size):
            assert torch.equal(outputs[k][i], block(i, s, torch.float32))
    assert served("all_gather_coalesced") == before + 1


def test_async_work_overlaps_and_completes_in_any_order(rank, size):
    outs = [torch.empty(size * 4096) for _ in range(3)]
    works = [dist.all_gather_into_tensor(outs[k], block(rank + k, (4096,), torch.float32),
                                         async_op=True) for k in range(3)]
    # Compute while the gathers are in flight, then poll and wait out of order.
    x = torch.randn(64, 64)
    for _ in range(10):
        x = torch.tanh(x @ x.t() / 64)
        works[0].is_completed()
    assert works[2].wait()
    while not works[0].is_completed():
        pass
    assert works[1].wait() and works[0].is_completed() and works[1].is_success()
    for k in range(3):
        assert torch.equal(outs[k], torch.cat([block(i + k, (4096,), torch.float32)
                                               for i in range(size)]))
    assert works[0].result()[0] is not None


def test_sub_groups(rank, size):
    evens = list(range(0, size, 2))
    group = dist.new_group(evens)
    alone = dist.new_group([size - 1])
    if rank in evens:
        out = torch.empty(len(evens) * 3, dtype=torch.int32)
        dist.all_gather_into_tensor(out, block(rank, (3,), torch.int32), group=group)
        assert torch.equal(out, torch.cat([block(i, (3,), torch.int32) for i in evens]))
        assert isinstance(group, agx.torch.ProcessGroupAgx)
        assert agx.torch.calls(group)["all_gather_into_tensor"] == 1
    if rank == size - 1:
        out = torch.empty(3, dtype=torch.int32)
        dist.all_gather_into_tensor(out, block(rank, (3,), torch.int32), group=alone)
        assert torch.equal(out, block(rank, (3,), torch.int32))
    dist.barrier()


def test_reported_algorithm(rank, size):
    out = torch.empty(size * 1024)
    dist.all_gather_into_tensor(out, torch.zeros(1024))
    assert agx.torch.last_algorithm() != ""
    assert agx.torch.calls()["all_gather_into_tensor"] >= 1


def test_bad_input_raises_on_every_rank(rank, size):
    mine = torch.zeros(4)
    with pytest.raises(RuntimeError, match="agx: all_gather: the output list has"):
        dist.all_gather([torch.empty(4) for _ in range(size + 1)], mine)
    with pytest.raises(RuntimeError, match=r"output_tensors\[%d\] holds 3 elements" % rank):
        dist.all_gather([torch.empty(3) for _ in range(size)], mine)
    wrong_dtype = [torch.empty(4, dtype=torch.float64) for _ in range(size)]
    with pytest.raises(RuntimeError, match="different dtypes"):  # torch's own check
        dist.all_gather(wrong_dtype, mine)
    pg = dist.distributed_c10d._get_default_group()  # the backend's, behind it
    with pytest.raises(TypeError, match=r"agx: all_gather: output_tensors\[0\] is Double, the input Float"):
        pg.allgather([wrong_dtype], [mine])
    with pytest.raises(RuntimeError, match="agx: all_gather_into_tensor: the output holds"):
        dist.all_gather_into_tensor(torch.empty(size * 4 + 1), mine)
    # Nothing was started: the next call is fine.
    out = torch.empty(size * 4)
    dist.all_gather_into_tensor(out, torch.full((4,), float(rank)))
    assert torch.equal(out, torch.arange(size, dtype=torch.float32).repeat_interleave(4))


def test_wait_releases_the_gil(rank, size):
    # Rank 0 starts its part only once every other rank's Python thread has told it (an
    # MPI message) that it ran while its main thread was inside Work.wait(): possible only
    # if wait() released the GIL. Without that, rank 0 gives up after a hang guard of
    # 60 s, starts anyway (so that nothing hangs) and the test fails. No timing is
    # asserted: the order of events decides.
    import threading
    import time
    from mpi4py import MPI
    world, tag = MPI.COMM_WORLD, 7301
    out = torch.empty(size * 4)
    mine = torch.full((4,), float(rank))
    want = torch.arange(size, dtype=torch.float32).repeat_interleave(4)
    if rank == 0:
        told, guard = 0, time.monotonic() + 60
        while told < size - 1 and time.monotonic() < guard:
            if world.Iprobe(source=MPI.ANY_SOURCE, tag=tag):
                world.recv(source=MPI.ANY_SOURCE, tag=tag)
                told += 1
        dist.all_gather_into_tensor(out, mine)
        for _ in range(size - 1 - told):  # late ones (after their wait): collected, failed
            world.recv(source=MPI.ANY_SOURCE, tag=tag)
        assert told == size - 1, f"{size - 1 - told} rank(s) ran no Python thread in wait()"
    else:
        in_wait, finished, during = threading.Event(), threading.Event(), []

        def tell():
            in_wait.wait()
            time.sleep(0.01)  # (well inside wait(): rank 0 has not started)
            during.append(not finished.is_set())
            world.send(True, dest=0, tag=tag)

        work = dist.all_gather_into_tensor(out, mine, async_op=True)
        thread = threading.Thread(target=tell)
        thread.start()
        in_wait.set()
        work.wait()
        finished.set()
        thread.join()
        assert during == [True], "the Python thread ran only after wait() returned"
    assert torch.equal(out, want)


def test_async_list_form_copies_out_on_completion(rank, size):
    # Separate output tensors: agx gathers into a staging buffer; the copies into the
    # outputs happen when the work completes (wait or is_completed), not before.
    outs = [torch.full((4096,), -1.0) for _ in range(size)]
    work = dist.all_gather(outs, block(rank, (4096,), torch.float32), async_op=True)
    assert agx.torch.last_way() == ("staging" if size > 1 else "direct")
    while not work.is_completed():
        pass
    for i in range(size):
        assert torch.equal(outs[i], block(i, (4096,), torch.float32))
    assert work.wait()
