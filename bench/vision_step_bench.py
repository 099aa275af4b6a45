#!/usr/bin/python3
"""CPU training-step time of dtrain's vision models against PyTorch eager on the same model (torchvision's,
or the CIFAR ResNet-18 built from it), batch, optimizer (SGD, momentum 0.9, weight decay) and intra-op
threads, one process each, data already in memory. Per-step time is the difference between a long and a
short run divided by the extra steps, so start-up and the first (slow) steps cancel out; dtrain's
figure comes from its run log's train_s, PyTorch's from the same loop timed in Python. Runs alternate,
--reps times; medians are compared (ratio > 1: dtrain is faster).

Usage: bench/vision_step_bench.py [--dtrain build/dtrain] [--threads 2] [--reps 3] [--workloads resnet18,cifar10]
                                  [--out FILE]
"""
import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

CASES = [  # workload, image size, classes, batch
    ("resnet18", 64, 200, 32),
    ("cifar10", 32, 10, 32),
]


def dtrain_train_s(dtrain, workload, size, batch, steps, threads, tmp):
    logs = tempfile.mkdtemp(dir=tmp)
    cmd = [dtrain, "--workload", workload, "--synthetic", "--image-size", str(size), "--batch-size", str(batch),
           "--max-steps", str(steps), "--epochs", "1", "--threads", str(threads), "--checkpoint=false",
           "--log-dir", logs, "--log-interval", "0", "--progress-bar=false", "--eval-batch-size", "250",
           "--weight-decay", "1e-4", "--lr-schedule", "constant"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"vision_step_bench: {' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
    events = glob.glob(os.path.join(logs, "*", "events.jsonl"))[0]
    with open(events) as f:
        epoch = next(e for e in map(json.loads, f) if e.get("event") == "epoch_end")
    return epoch["train_s"]


def peer_model(workload, classes):
    if workload == "cifar10":
        model = torchvision.models.resnet18(num_classes=classes)
        model.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        model.maxpool = torch.nn.Identity()
        return model
    return getattr(torchvision.models, workload)(num_classes=classes)


def peer_train_s(workload, size, classes, batch, steps):
    torch.manual_seed(1)
    model = peer_model(workload, classes)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(4, batch, 3, size, size)
    targets = torch.randint(classes, (4, batch))
    start = time.perf_counter()
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs[step % 4]), targets[step % 4])
        loss.backward()
        optimizer.step()
        loss.item()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtrain", default="build/dtrain")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--short", type=int, default=3)
    parser.add_argument("--long", type=int, default=13)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(c[0] for c in CASES), help="comma-separated subset")
    parser.add_argument("--batch", type=int, help="override every case's batch (smoke runs)")
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    extra = args.long - args.short
    results = {"machine": platform.node(), "cpus": os.cpu_count(), "threads": args.threads, "torch": torch.__version__,
               "torchvision": torchvision.__version__, "cases": []}
    with tempfile.TemporaryDirectory(prefix="dtrain-step-") as tmp:
        for workload, size, classes, batch in CASES:
            if workload not in args.workloads.split(","):
                continue
            batch = args.batch or batch
            dtrain_steps, peer_steps = [], []
            for _ in range(args.reps):
                dtrain_steps.append((dtrain_train_s(args.dtrain, workload, size, batch, args.long, args.threads, tmp) -
                                     dtrain_train_s(args.dtrain, workload, size, batch, args.short, args.threads, tmp)) / extra)
                peer_steps.append((peer_train_s(workload, size, classes, batch, args.long) -
                                   peer_train_s(workload, size, classes, batch, args.short)) / extra)
            d, p = statistics.median(dtrain_steps), statistics.median(peer_steps)
            print(f"{workload} at {size} px, batch {batch}, {args.threads} threads: step dtrain {d * 1000:.0f} ms, "
                  f"PyTorch eager {p * 1000:.0f} ms, ratio (PyTorch / dtrain) {p / d:.2f}")
            results["cases"].append({"workload": workload, "image_size": size, "batch": batch,
                                     "dtrain_step_s": dtrain_steps, "pytorch_step_s": peer_steps, "ratio": p / d})
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
