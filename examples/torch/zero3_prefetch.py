#!/usr/bin/env python3
"""A ZeRO-3-style layer loop with torch.distributed: backend "agx" and "gloo".

    mpirun -np 4 python3 examples/torch/zero3_prefetch.py [--steps 4] [--layers 8]
                                                          [--hidden 512] [--batch 32]
                                                          [--backend both|agx|gloo]

Every layer's parameters (a hidden x hidden weight and a bias, flattened and padded to a
multiple of N) are sharded: rank r keeps only 1/N of them. The forward pass gathers each
layer's full parameters just before it runs, with the **next** layer's gather already in
flight (async_op=True: it runs while this layer computes). The gradients of the gathered
parameters are all-reduced (data parallel: each rank has its own batch) and each rank
updates its shard. The gathers are `dist.all_gather` into the chunks of one flat buffer
(the same call for both backends; agx writes the chunks where they are).

With --backend both (the default) the default group is "agx" and a "gloo" group of the
same ranks trains an identical copy; the script prints both losses per step, the median
step times, and exits 1 when the losses differ: bit for bit at N <= 2; from 3 ranks on by
more than 1e-6 relative (the all_reduce of the gradients adds in another order; the
gathers are exact). Each run first checks one gathered layer against the full weights.
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist

import both  # examples/torch/both.py: agx and gloo, losses compared


def layer_params(layer, hidden):
    g = torch.Generator().manual_seed(100 + layer)
    w = torch.randn(hidden, hidden, generator=g) / hidden ** 0.5
    b = torch.randn(hidden, generator=g) * 0.1
    return torch.cat([w.reshape(-1), b])


class Sharded:
    def __init__(self, layers, hidden, group):
        self.group, self.hidden = group, hidden
        self.rank, self.size = dist.get_rank(group), dist.get_world_size(group)
        self.numel = hidden * hidden + hidden
        self.shard = -(-self.numel // self.size)  # padded
        self.shards = []
        for l in range(layers):
            full = torch.zeros(self.shard * self.size)
            full[:self.numel] = layer_params(l, hidden)
            self.shards.append(full[self.rank * self.shard:(self.rank + 1) * self.shard].clone())

    def start_gather(self, layer):
        flat = torch.empty(self.shard * self.size)
        work = dist.all_gather(list(flat.chunk(self.size)), self.shards[layer],
                               group=self.group, async_op=True)
        return flat, work

    def unflatten(self, flat):
        h = self.hidden
        return flat[:h * h].view(h, h), flat[h * h:self.numel]


def train(group, args):
    model = Sharded(args.layers, args.hidden, group)
    flat, work = model.start_gather(0)
    work.wait()
    if not torch.equal(flat[:model.numel], layer_params(0, args.hidden)):
        raise SystemExit(f"rank {dist.get_rank()}: a gathered layer differs from its weights")
    g = torch.Generator().manual_seed(2000 + model.rank)
    x = torch.randn(args.batch, args.hidden, generator=g)
    target = torch.randn(args.batch, args.hidden, generator=g)
    losses, times = [], []
    for _ in range(args.steps):
        dist.barrier(group)
        t0 = time.perf_counter()
        fulls, h = [], x
        pending = model.start_gather(0)
        for l in range(args.layers):
            flat, work = pending
            work.wait()
            if l + 1 < args.layers:
                pending = model.start_gather(l + 1)  # in flight while layer l computes
            flat.requires_grad_(True)
            fulls.append(flat)
            w, b = model.unflatten(flat)
            h = torch.nn.functional.gelu(h @ w + b)
        loss = torch.nn.functional.mse_loss(h, target)
        loss.backward()
        with torch.no_grad():
            for l, flat in enumerate(fulls):
                grad = flat.grad
                dist.all_reduce(grad, group=group)
                mine = grad[model.rank * model.shard:(model.rank + 1) * model.shard]
                model.shards[l] -= args.lr * mine / model.size
        times.append(time.perf_counter() - t0)
        lsum = loss.detach().clone()
        dist.all_reduce(lsum, group=group)
        losses.append(lsum.item() / model.size)
    return losses, times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--backend", choices=["both", "agx", "gloo"], default="both")
    args = p.parse_args()
    title = (f"ZeRO-3 layer loop, N={{size}}, {args.layers} layers of {args.hidden}x"
             f"{args.hidden}, batch {args.batch} per rank, {args.steps} steps")
    return both.run(args.backend, title, train, args)


if __name__ == "__main__":
    sys.exit(main())
