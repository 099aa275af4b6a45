#!/usr/bin/python3
"""PyTorch DDP peer of dtrain's mnist workload, for side-by-side benchmarks.

The same model (pytorch/examples MNIST CNN), optimizer (Adadelta, StepLR gamma 0.7), per-rank batch,
normalisation, data (MNIST-format IDX files) and test batch as dtrain; torch.distributed (gloo on the CPU,
NCCL on a GPU), DistributedDataParallel, and the ordinary map-style Dataset + DistributedSampler +
DataLoader, with each batch copied to the device as pytorch/examples does.
Started by mpirun (ranks from Open MPI's environment) or torchrun (RANK/WORLD_SIZE). Rank 0 prints one
JSON object with the measured figures.
"""
import argparse
import gzip
import json
import os
import resource
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, Subset
from torch.utils.data.distributed import DistributedSampler

MEAN, STD = 0.1307, 0.3081


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def find(data_dir, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(data_dir, candidate)
        if os.path.exists(path):
            return path
    raise SystemExit(f"mnist_ddp.py: {name}[.gz] not found in {data_dir}")


class IdxDataset(Dataset):
    """Per-sample conversion and normalisation, as torchvision's ToTensor + Normalize do."""

    def __init__(self, data_dir, prefix):
        self.images = read_idx(find(data_dir, f"{prefix}-images-idx3-ubyte"))
        self.labels = read_idx(find(data_dir, f"{prefix}-labels-idx1-ubyte")).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        image = self.images[i].float().div(255.0).sub(MEAN).div(STD).unsqueeze(0)
        return image, int(self.labels[i])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=1000)
    parser.add_argument("--test-samples", type=int, default=0,
                        help="evaluate the first this many test samples, as dtrain's --eval-samples (0 = all)")
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=0, help="steps per rank and epoch, 0 = all")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()

    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", 0)))
    world_size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", 1)))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("LOCAL_RANK", 0)))
    if args.device == "cuda":
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo", rank=rank, world_size=world_size)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train_set = IdxDataset(args.data_dir, "train")
    test_set = IdxDataset(args.data_dir, "t10k")
    if args.test_samples:
        test_set = Subset(test_set, range(min(args.test_samples, len(test_set))))
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, num_workers=0)
    # Contiguous test shards, as dtrain evaluates: each rank scores its part, totals are summed.
    share = range(rank * len(test_set) // world_size, (rank + 1) * len(test_set) // world_size)
    test_loader = DataLoader(Subset(test_set, share), batch_size=args.test_batch_size, num_workers=0)
    model = DistributedDataParallel(Net().to(device), device_ids=[device.index] if args.device == "cuda" else None)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=args.gamma)

    epochs = []
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        model.train()
        samples = 0
        start = time.perf_counter()
        for step, (data, target) in enumerate(loader):
            if args.max_steps and step >= args.max_steps:
                break
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            samples += len(data)
            if step % args.log_interval == 0:
                loss.item()  # what pytorch/examples does to print its progress line
        if args.device == "cuda":
            torch.cuda.synchronize()
        train_s = time.perf_counter() - start
        scheduler.step()

        model.eval()
        totals = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, count (this rank's share)
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model.module(data)
                totals[0] += F.nll_loss(output, target, reduction="sum").item()
                totals[1] += output.argmax(1).eq(target).sum().item()
                totals[2] += len(data)
        totals = totals.to(device)
        dist.all_reduce(totals)
        totals = totals.cpu()
        global_samples = torch.tensor([samples], dtype=torch.float64, device=device)
        dist.all_reduce(global_samples)
        slowest_s = torch.tensor([train_s], dtype=torch.float64, device=device)
        dist.all_reduce(slowest_s, op=dist.ReduceOp.MAX)
        epoch_s = time.perf_counter() - start
        epochs.append({"epoch": epoch, "train_samples": int(global_samples), "train_s": slowest_s.item(),
                       "samples_per_s": global_samples.item() / slowest_s.item(), "epoch_s": epoch_s,
                       "test_loss": (totals[0] / totals[2]).item(), "test_accuracy": (totals[1] / totals[2]).item()})

    peak = torch.zeros(world_size, dtype=torch.int64, device=device)
    peak[rank] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    dist.all_reduce(peak)
    peak = peak.cpu()
    if rank == 0:
        print(json.dumps({"impl": "pytorch-ddp", "torch_version": torch.__version__, "world_size": world_size,
                          "threads_per_rank": args.threads, "device": str(device), "epochs": epochs, "peak_rss_bytes": peak.tolist()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
