#!/usr/bin/python3
"""Where the PyTorch peer's step time goes, on one process: the DataLoader per batch, and forward,
backward and Adadelta per step for the plain model and for the DDP-wrapped one (gloo, world size 1).
Used to explain the dtrain/PyTorch ratio in docs/benchmarks.md.

Usage: bench/peer/profile_peer_step.py [--data-dir DIR] [--threads 1] [--steps 80]
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, RandomSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_ddp as peer  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29577")
    dist.init_process_group("gloo", rank=0, world_size=1)
    data = peer.IdxDataset(args.data_dir, "train")

    loader = DataLoader(data, batch_size=args.batch_size, sampler=RandomSampler(data), num_workers=0)
    start = time.perf_counter()
    for i, _ in enumerate(loader):
        if i + 1 >= args.steps:
            break
    print(f"DataLoader: {1000 * (time.perf_counter() - start) / args.steps:.1f} ms per batch of {args.batch_size}")

    x = torch.stack([data[i][0] for i in range(args.batch_size)])
    y = data.labels[:args.batch_size]
    # The two variants alternate step by step, so drift in machine speed affects both alike.
    warmup = 10
    variants = []
    for name, wrap in (("plain model", False), ("DDP-wrapped", True)):
        model = peer.Net()
        net = torch.nn.parallel.DistributedDataParallel(model) if wrap else model
        variants.append({"name": name, "net": net, "optimizer": torch.optim.Adadelta(net.parameters(), lr=1.0),
                         "forward": 0.0, "backward": 0.0, "step": 0.0})
    for i in range(args.steps + warmup):
        for v in variants:
            t0 = time.perf_counter()
            v["optimizer"].zero_grad()
            loss = F.nll_loss(v["net"](x), y)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            v["optimizer"].step()
            t3 = time.perf_counter()
            if i >= warmup:
                v["forward"] += t1 - t0
                v["backward"] += t2 - t1
                v["step"] += t3 - t2
    n = args.steps
    for v in variants:
        total = v["forward"] + v["backward"] + v["step"]
        print(f"{v['name']}: forward {1000 * v['forward'] / n:.1f} ms, backward {1000 * v['backward'] / n:.1f} ms, "
              f"Adadelta {1000 * v['step'] / n:.1f} ms, total {1000 * total / n:.1f} ms per step")
    peer.finish()


main()
