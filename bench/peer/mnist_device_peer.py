#!/usr/bin/env python3
"""The fastest single-GPU PyTorch loops a user could write for dtrain's mnist workload, as peers for
bench/gpu_epoch_bench.py: the same model, Adadelta (lr 1.0, StepLR gamma 0.7 per epoch), batch, data and
normalisation as bench/peer/mnist_ddp.py, but no DataLoader and no DDP (one GPU needs neither):

  --mode eager   the dataset uploaded to the GPU once as uint8; each epoch a permutation drawn on the GPU,
                 each batch gathered and normalised there; no host synchronisation inside the epoch.
  --mode graph   the same, with the whole training step (gather, normalisation, forward, loss, backward,
                 optimizer step, loss sum) captured in one CUDA graph and replayed, as PyTorch's CUDA
                 graphs documentation shows for whole-network capture: warm-up steps on a side stream,
                 a capturable optimizer, static index buffer. The graph is captured again each epoch
                 (the StepLR rate is a Python float the graph bakes in); its warm-up steps are real
                 training steps. The ragged last batch of an epoch runs eagerly.

Prints one JSON object in mnist_ddp.py's format (per-epoch train_s, epoch_s, test accuracy).
Usage: mnist_device_peer.py --mode eager|graph [--data-dir DIR] [--epochs 2] [--batch-size 64]
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mnist_ddp import MEAN, STD, Net, find, read_idx  # noqa: E402

WARMUP_STEPS = 3  # PyTorch's documentation warms up 3 iterations on a side stream before capture


def load(data_dir, prefix, device):
    images = read_idx(find(data_dir, f"{prefix}-images-idx3-ubyte")).to(device)
    labels = read_idx(find(data_dir, f"{prefix}-labels-idx1-ubyte")).long().to(device)
    return images, labels


def batch_of(images, labels, index):
    x = images.index_select(0, index).unsqueeze(1).float().div_(255.0).sub_(MEAN).div_(STD)
    return x, labels.index_select(0, index)


def train_step(model, optimizer, images, labels, index, loss_sum):
    x, y = batch_of(images, labels, index)
    loss = F.nll_loss(model(x), y)
    loss.backward()
    optimizer.step()
    loss_sum.add_(loss.detach() * index.numel())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("eager", "graph"), required=True)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cuda", help="cuda (eager also runs on cpu, for a smoke test)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.mode == "graph" and device.type != "cuda":
        sys.exit("mnist_device_peer.py: --mode graph needs a CUDA device")
    torch.manual_seed(args.seed)

    train_images, train_labels = load(args.data_dir, "train", device)
    test_images, test_labels = load(args.data_dir, "t10k", device)
    model = Net().to(device)
    capturable = args.mode == "graph"
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr, **({"capturable": True} if capturable else {}))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=args.gamma)
    n, b = len(train_labels), args.batch_size
    full_steps = n // b

    epochs = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        loss_sum = torch.zeros((), device=device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        order = torch.randperm(n, device=device)
        first_graph_step = full_steps
        if args.mode == "graph":
            static_index = order[:b].clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for step in range(WARMUP_STEPS):
                    optimizer.zero_grad(set_to_none=True)
                    train_step(model, optimizer, train_images, train_labels, order[step * b:(step + 1) * b], loss_sum)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            optimizer.zero_grad(set_to_none=True)
            with torch.cuda.graph(graph):
                train_step(model, optimizer, train_images, train_labels, static_index, loss_sum)
            first_graph_step = WARMUP_STEPS
            for step in range(first_graph_step, full_steps):
                static_index.copy_(order[step * b:(step + 1) * b])
                graph.replay()
        else:
            for step in range(full_steps):
                optimizer.zero_grad(set_to_none=True)
                train_step(model, optimizer, train_images, train_labels, order[step * b:(step + 1) * b], loss_sum)
        if n % b:
            optimizer.zero_grad(set_to_none=not capturable)  # keep the graph's gradient buffers
            train_step(model, optimizer, train_images, train_labels, order[full_steps * b:], loss_sum)
        if device.type == "cuda":
            torch.cuda.synchronize()
        train_s = time.perf_counter() - start
        scheduler.step()

        model.eval()
        correct = torch.zeros((), device=device, dtype=torch.long)
        test_loss = torch.zeros((), device=device)
        with torch.no_grad():
            for i in range(0, len(test_labels), args.test_batch_size):
                index = torch.arange(i, min(i + args.test_batch_size, len(test_labels)), device=device)
                x, y = batch_of(test_images, test_labels, index)
                output = model(x)
                test_loss += F.nll_loss(output, y, reduction="sum")
                correct += output.argmax(1).eq(y).sum()
        if device.type == "cuda":
            torch.cuda.synchronize()
        epoch_s = time.perf_counter() - start
        epochs.append({"epoch": epoch, "train_samples": n, "train_s": train_s, "samples_per_s": n / train_s,
                       "epoch_s": epoch_s, "train_loss": loss_sum.item() / n,
                       "test_loss": test_loss.item() / len(test_labels),
                       "test_accuracy": correct.item() / len(test_labels)})
    print(json.dumps({"impl": f"pytorch-{args.mode}", "torch_version": torch.__version__, "world_size": 1,
                      "device": str(device), "epochs": epochs}))


if __name__ == "__main__":
    main()
