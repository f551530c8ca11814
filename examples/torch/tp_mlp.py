#!/usr/bin/env python3
"""A tensor-parallel MLP block trained with torch.distributed: backend "agx" and "gloo".

    mpirun -np 4 python3 examples/torch/tp_mlp.py [--steps 5] [--batch 64] [--hidden 256]
                                                  [--backend both|agx|gloo]

Megatron-style: the first linear layer is column-parallel (rank r holds columns
r*F/N..(r+1)*F/N of W1), its outputs are all-gathered along the feature dimension, GeLU
runs on the full activation, the second linear layer is row-parallel (rank r multiplies
its slice of the activation by its rows of W2) and the partial outputs are all-reduced.
The collectives are torch.distributed.nn.functional's, which differentiate: the backward
pass runs all_to_all (the all-gather's gradient) and all_reduce. The script is the same
for both backends but for the group it passes.

With --backend both (the default) the default group is "agx" and a "gloo" group of the
same ranks trains an identical copy of the model on the same data; the script prints
both losses per step and their median step times, and exits 1 when the losses differ:
bit for bit at N <= 2; from 3 ranks on, by more than 1e-6 relative, because the MPI
library's all_reduce and Gloo's add the N partial sums in different orders, and float
addition is not associative (the all-gathers themselves are exact). Each run checks its
result against a serial computation of the same block (1e-5 relative).
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dfn

import both  # examples/torch/both.py: agx and gloo, losses compared


class TensorParallelMLP(torch.nn.Module):
    def __init__(self, hidden, ffn, group, seed):
        super().__init__()
        self.group = group
        self.rank, self.size = dist.get_rank(group), dist.get_world_size(group)
        g = torch.Generator().manual_seed(seed)
        w1 = torch.randn(hidden, ffn, generator=g) / hidden ** 0.5
        w2 = torch.randn(ffn, hidden, generator=g) / ffn ** 0.5
        self.cols = ffn // self.size
        mine = slice(self.rank * self.cols, (self.rank + 1) * self.cols)
        self.w1 = torch.nn.Parameter(w1[:, mine].clone())  # column-parallel
        self.w2 = torch.nn.Parameter(w2[mine, :].clone())  # row-parallel
        self.full = (w1, w2)  # for the serial check

    def forward(self, x):
        parts = dfn.all_gather(x @ self.w1, group=self.group)  # N x (B, F/N)
        h = torch.nn.functional.gelu(torch.cat(parts, dim=1))   # (B, F)
        mine = h[:, self.rank * self.cols:(self.rank + 1) * self.cols]
        return dfn.all_reduce(mine @ self.w2, group=self.group)  # (B, hidden)


def train(group, args):
    torch.manual_seed(1234)
    model = TensorParallelMLP(args.hidden, 4 * args.hidden, group, seed=7)
    x = torch.randn(args.batch, args.hidden)
    target = torch.randn(args.batch, args.hidden)
    # The untrained block against a serial computation of the same weights.
    with torch.no_grad():
        w1, w2 = model.full
        want = torch.nn.functional.gelu(x @ w1) @ w2
        got = model(x)
        err = ((got - want).abs().max() / want.abs().max()).item()
        if err > 1e-5:
            raise SystemExit(f"rank {dist.get_rank()}: the block differs from the serial "
                             f"computation by {err:.3g} (relative)")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses, times = [], []
    for _ in range(args.steps):
        dist.barrier(group)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return losses, times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--backend", choices=["both", "agx", "gloo"], default="both")
    args = p.parse_args()
    title = (f"tensor-parallel MLP, N={{size}}, batch {args.batch}, hidden {args.hidden}, "
             f"ffn {4 * args.hidden}, {args.steps} steps")
    return both.run(args.backend, title, train_checked, args)


def train_checked(group, args):
    size = dist.get_world_size(group)
    if (4 * args.hidden) % size:
        raise SystemExit(f"4 * hidden = {4 * args.hidden} must be divisible by {size} ranks")
    return train(group, args)


if __name__ == "__main__":
    sys.exit(main())
