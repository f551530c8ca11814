"""Runs an example's training with the backend "agx" and with "gloo" and compares the
losses (examples/torch/tp_mlp.py, zero3_prefetch.py; docs/torch.md, "Examples")."""
import statistics

import torch.distributed as dist

import agx.torch  # noqa: F401  (registers "agx")


def run(backend, title, train, args):
    """`backend`: both, agx or gloo. Makes the default group ("agx", or "gloo" alone),
    trains with each backend's group (`train(group, args)` returns (losses, step times)),
    prints `title`, the losses and median step times on rank 0, and returns the exit
    status: 1 when both ran and their losses differ bit for bit at N <= 2, or by more
    than 1e-6 relative from 3 ranks on (the all-reduce adds in another order there)."""
    dist.init_process_group("gloo" if backend == "gloo" else "agx")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {backend: dist.group.WORLD} if backend != "both" else {
        "agx": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    results = {name: train(g, args) for name, g in groups.items()}
    status = 0
    if rank == 0:
        print(title.format(size=size))
        for name, (losses, times) in results.items():
            print(f"  {name:5s} losses {' '.join(f'{v:.9g}' for v in losses)}  "
                  f"median step {1e3 * statistics.median(times):.3f} ms")
    if len(results) == 2:
        a, g = results["agx"][0], results["gloo"][0]
        same = a == g
        rel = max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, g))
        if rank == 0:
            print(f"  losses identical bit for bit: {'yes' if same else 'no'} "
                  f"(largest relative difference {rel:.3g})")
        if not same and (size <= 2 or rel > 1e-6):
            status = 1
            if rank == 0:
                print("  FAIL: the losses differ beyond what the summation order explains")
    dist.destroy_process_group()
    return status
