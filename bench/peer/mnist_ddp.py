#!/usr/bin/python3
"""PyTorch DDP peer of dtrain's mnist workload, for side-by-side benchmarks.

The same model (pytorch/examples MNIST CNN), optimizer (Adadelta, StepLR gamma 0.7), per-rank batch,
normalisation, data (MNIST-format IDX files) and test batch as dtrain; torch.distributed (gloo on the CPU,
NCCL on a GPU), DistributedDataParallel, and the ordinary map-style Dataset + DistributedSampler +
DataLoader, with each batch copied to the device as pytorch/examples does.
Started by mpirun (ranks from Open MPI's environment) or torchrun (RANK/WORLD_SIZE). Rank 0 prints one
JSON object with the measured figures; with --log-dir it also writes DIR/events.jsonl with the run log
records dtrain-report's scaling tables read (run_start with "runtime": "pytorch-ddp", epoch_end, run_end;
the fields are dtrain's, measured the same way where DDP allows, as said at each).

DDP runs with its authors' defaults (25 MiB buckets, the first of 1 MiB, the allreduce in C++) and
gradient_as_bucket_view, which the DDP documentation recommends for speed: the gradients are views into
the buckets, as dtrain's are, saving a copy per step.
"""
import argparse
import gzip
import json
import os
import resource
import socket
import sys
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


class StepTiming:
    """Where a DDP step's communication time goes, from outside DDP (no comm hook: that would replace
    DDP's C++ allreduce with a Python one). A hook on each parameter's gradient marks when it was
    computed; DDP's backward() returns once every bucket's allreduce is done. So, per step:
    exposed = backward's return - the last gradient computed (the communication backward did not hide,
    as dtrain's exposed_comm_s), comm = backward's return - the first gradient computed (an upper bound of
    dtrain's comm_s, which starts at the first bucket's launch), and the process's CPU time over the exposed
    part (dtrain's comm_wait_cpu_s: all threads, Gloo's included)."""

    def __init__(self, model):
        self.first = self.last = self.last_cpu = None
        self.sums = [0.0, 0.0, 0.0]  # exposed, comm, wait cpu
        self.bytes_per_step = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
        for p in model.parameters():
            if p.requires_grad:
                p.register_hook(self.mark)

    def mark(self, grad):
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        self.last, self.last_cpu = now, time.process_time()
        return grad

    def backward(self, loss):
        self.first = self.last = None
        loss.backward()
        end, end_cpu = time.perf_counter(), time.process_time()
        if self.first is not None:
            self.sums[0] += end - self.last
            self.sums[1] += end - self.first
            self.sums[2] += end_cpu - self.last_cpu

    def take(self):
        taken, self.sums = self.sums, [0.0, 0.0, 0.0]
        return taken + [self.bytes_per_step]


def gather_waits(waits, train_s, world_size, device):
    """The epoch's communication figures of rank 0 and, per rank, its waits and straggler score as
    dtrain defines them (runtime/monitor/rank_waits.h)."""
    mine = torch.tensor([waits[0], waits[2], train_s], dtype=torch.float64, device=device)
    everyone = [torch.zeros_like(mine) for _ in range(world_size)]
    dist.all_gather(everyone, mine)
    rows = [t.cpu().tolist() for t in everyone]
    figures = {"comm_s": waits[1], "exposed_comm_s": waits[0], "comm_wait_cpu_s": waits[2],
               "bytes_allreduced_per_step": waits[3] if world_size > 1 else 0}
    if world_size > 1:
        most, longest = max(r[0] for r in rows), max(r[2] for r in rows)
        figures["exposed_comm_s_by_rank"] = [r[0] for r in rows]
        figures["comm_wait_cpu_s_by_rank"] = [r[1] for r in rows]
        figures["straggler_by_rank"] = [min(1.0, max(0.0, (most - r[0]) / longest)) if longest > 0 else 0.0
                                        for r in rows]
    return figures


def write_run_log(args, model, world_size, hosts, epochs, peak_rss_bytes, start_time):
    """Rank 0's run log: the records and fields of dtrain's that the report's scaling tables read."""
    os.makedirs(args.log_dir, exist_ok=True)
    utc = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    records = [{"event": "run_start", "time": utc(start_time), "runtime": "pytorch-ddp", "workload": "mnist",
                "world_size": world_size, "hosts": list(dict.fromkeys(hosts)), "rank_hosts": hosts,
                "backend": "nccl" if args.device == "cuda" else "gloo", "device": args.device,
                "threads_per_rank": args.threads, "torch_version": torch.__version__,
                "parameters": sum(p.numel() for p in model.parameters()),
                # As dtrain's: the configuration as YAML text (JSON is YAML); DDP's bucket sizes are its defaults.
                "config": json.dumps({"workload": "mnist", "train": {"batch_size": args.batch_size, "lr": args.lr},
                                      "comm": {"bucket_mb": 25.0, "first_bucket_mb": 1.0}})}]
    for e in epochs:
        steps = e["steps"]
        record = {"event": "epoch_end", "time": utc(time.time()), "epoch": e["epoch"], "steps": steps,
                  "train_samples": e["train_samples"], "train_s": e["train_s"], "eval_s": e["eval_s"],
                  "epoch_s": e["epoch_s"], "samples_per_s": e["samples_per_s"], "test_loss": e["test_loss"],
                  "test_accuracy": e["test_accuracy"], "bytes_allreduced": e["bytes_allreduced_per_step"] * steps}
        record.update({k: v for k, v in e.items() if k not in record and k not in ("test_loss", "test_accuracy")})
        records.append(record)
    records.append({"event": "run_end", "time": utc(time.time()), "epochs_run": len(epochs),
                    "total_s": time.time() - start_time, "peak_rss_bytes": peak_rss_bytes})
    with open(os.path.join(args.log_dir, "events.jsonl"), "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


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
    parser.add_argument("--log-dir", default="", help="write the run log records to DIR/events.jsonl (rank 0)")
    args = parser.parse_args()

    run_start_time = time.time()
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
    model = DistributedDataParallel(Net().to(device), device_ids=[device.index] if args.device == "cuda" else None,
                                    gradient_as_bucket_view=True)
    timing = StepTiming(model)
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
            timing.backward(loss)
            optimizer.step()
            samples += len(data)
            if step % args.log_interval == 0:
                loss.item()  # what pytorch/examples does to print its progress line
        if args.device == "cuda":
            torch.cuda.synchronize()
        train_s = time.perf_counter() - start
        scheduler.step()
        waits = timing.take()

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
                       "test_loss": (totals[0] / totals[2]).item(), "test_accuracy": (totals[1] / totals[2]).item(),
                       "steps": min(len(loader), args.max_steps or len(loader)),
                       "eval_s": epoch_s - train_s, **gather_waits(waits, train_s, world_size, device)})

    peak = torch.zeros(world_size, dtype=torch.int64, device=device)
    peak[rank] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    dist.all_reduce(peak)
    peak = peak.cpu()
    hosts = [None] * world_size
    dist.all_gather_object(hosts, socket.gethostname())
    if rank == 0 and args.log_dir:
        write_run_log(args, model, world_size, hosts, epochs, peak.tolist(), run_start_time)
    if rank == 0:
        print(json.dumps({"impl": "pytorch-ddp", "torch_version": torch.__version__, "world_size": world_size,
                          "threads_per_rank": args.threads, "device": str(device), "epochs": epochs, "peak_rss_bytes": peak.tolist()}))
    finish()


def finish():
    """Ends a rank once its results are printed and written.

    PyTorch 1.13's Gloo process group can deadlock at interpreter exit: its destructor, run from the
    DDP Reducer's when the model is freed, joins a worker thread that waits for the GIL to free a
    tensor (pytorch/pytorch#56297). One rank then never exits and mpirun waits for it for ever, so the
    process ends here, after the process group is torn down and the output flushed.
    """
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
