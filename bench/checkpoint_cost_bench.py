#!/usr/bin/python3
"""What a checkpoint costs training: the time it blocks the training loop, written on the training
thread (--checkpoint-async false --checkpoint-memory-dir '', as dtrain did before) against a snapshot to
host memory written behind training (the default, with its copy in /dev/shm), in the same run of this
script, and what checkpoints every N steps cost a whole run's training time.

Case `blocked` (per workload): one dtrain run each way with --checkpoint-every-steps K; the run log's
checkpoint records give each checkpoint's blocked time (save_s) and its write (persist_s). Reported:
median blocked ms each way and their ratio (sync / async), the checkpoint's size on disk, and the first
snapshot of a run (whose host memory is new then, unless prepared before training) against the later ones.
Case `overhead`: resnet18 at 64 px, runs without checkpoints inside the epoch, with a checkpoint every
--every steps written behind training, and the same written on the training thread; reported: train_s
of each and the overheads in percent. Runs alternate, --reps times; medians.

With --device cuda (a GPU host, the CUDA build's dtrain, world size 1 over NCCL) the snapshot copies the
GPU's tensors into pinned host memory; the blocked case then takes a checkpoint every 20 of 100 steps
(GPU steps are short, and each write needs time to finish before the next), and the overhead case is
resnet50 at 224 px, batch 64, bf16, channels_last.

Usage: bench/checkpoint_cost_bench.py [--dtrain build/dtrain] [--reps 3] [--cases blocked,overhead]
       [--workloads resnet50,mnist] [--steps 12] [--every 20] [--threads 2] [--device cpu|cuda] [--out FILE]
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

# workload: (options, checkpoint every K steps, steps); resnet50's checkpoint holds parameters and SGD
# momentum (192 MB), mnist's parameters and Adadelta's two averages (14 MB). K leaves each write time to
# finish before the next checkpoint on a 2-core VM, so that the blocked time is the snapshot's own.
BLOCKED = {
    "resnet50": (["--synthetic", "--image-size", "32", "--batch-size", "8", "--optimizer", "sgd"], 6, 30),
    "mnist": (["--synthetic", "--batch-size", "64"], 5, 60),
}
BLOCKED_GPU = {workload: (options, 20, 100) for workload, (options, _, _) in BLOCKED.items()}
DEVICE_OPTIONS = {"cpu": [], "cuda": ["--device", "cuda", "--backend", "nccl"]}


def run(dtrain, options, tmp, threads, device="cpu"):
    logs = tempfile.mkdtemp(dir=tmp)
    cmd = [dtrain, *options, *DEVICE_OPTIONS[device], "--epochs", "1", "--threads", str(threads), "--log-dir", logs, "--log-interval", "0",
           "--progress", "off", "--eval-samples", "64", "--checkpoint-keep", "2"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"checkpoint_cost_bench: {' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
    events = glob.glob(os.path.join(logs, "*", "events.jsonl"))[0]
    with open(events) as f:
        records = [json.loads(line) for line in f]
    checkpoints = [r for r in records if r["event"] == "checkpoint"]
    epoch = next(r for r in records if r["event"] == "epoch_end")
    # Format 5 (*.safetensors) and, run with a dtrain 0.1 binary for comparison, format 4 (*.pt).
    sizes = [os.path.getsize(p) for p in glob.glob(os.path.join(logs, "*", "checkpoints", "checkpoint-epoch-*"))
             if p.endswith((".safetensors", ".pt"))]
    return checkpoints, epoch, max(sizes) if sizes else 0


def blocked_case(args, tmp, workload):
    options, every, steps = (BLOCKED_GPU if args.device == "cuda" else BLOCKED)[workload]
    options = ["--workload", workload, *options, "--max-steps", str(steps), "--checkpoint-every-steps", str(every)]
    sync, asynch, persist, waits, size = [], [], [], [], 0
    first, later = [], []  # async: each run's first checkpoint (its host memory new then), and the rest
    for _ in range(args.reps):
        # Written on the training thread without the copy in memory: a checkpoint as dtrain wrote it before
        # snapshots; behind training with everything the default does (the copy in /dev/shm included).
        for mode, into, extra in (("false", sync, ["--checkpoint-memory-dir="]), ("true", asynch, [])):
            checkpoints, _, size = run(args.dtrain, options + [f"--checkpoint-async={mode}"] + extra, tmp,
                                       args.threads, args.device)
            if not checkpoints:
                sys.exit(f"checkpoint_cost_bench: {workload} wrote no checkpoint inside its epoch")
            if any(c["async"] != (mode == "true") for c in checkpoints):
                sys.exit(f"checkpoint_cost_bench: {workload} --checkpoint-async={mode} logged other checkpoints")
            into += [c["save_s"] for c in checkpoints]
            if mode == "true":
                persist += [c["persist_s"] for c in checkpoints]
                waits += [c["wait_s"] for c in checkpoints]
                first.append(checkpoints[0]["save_s"])
                later += [c["save_s"] for c in checkpoints[1:]]
    s, a, p = statistics.median(sync), statistics.median(asynch), statistics.median(persist)
    f, rest = statistics.median(first), statistics.median(later) if later else float("nan")
    print(f"{workload}: checkpoint of {size / 2**20:.0f} MiB blocks training {s * 1000:.1f} ms written on the "
          f"training thread, {a * 1000:.1f} ms as a snapshot written behind it (its write: {p * 1000:.0f} ms); "
          f"ratio (sync / async) {s / a:.1f} ({len(sync)} and {len(asynch)} checkpoints; async waited for the "
          f"previous write {sum(w > 0.001 for w in waits)} times); a run's first snapshot {f * 1000:.1f} ms, "
          f"the later ones {rest * 1000:.1f} ms")
    return {"workload": workload, "checkpoint_bytes": size, "sync_blocked_s": s, "async_blocked_s": a,
            "async_persist_s": p, "async_max_wait_s": max(waits), "ratio": s / a,
            "async_first_blocked_s": f, "async_later_blocked_s": rest, "checkpoints": [len(sync), len(asynch)]}


def overhead_case(args, tmp):
    model = {"cpu": ("resnet18", 64, 32, []),
             "cuda": ("resnet50", 224, 64, ["--precision", "bf16", "--channels-last=true"])}[args.device]
    base = ["--workload", model[0], "--synthetic", "--image-size", str(model[1]), "--batch-size", str(model[2]),
            "--max-steps", str(args.overhead_steps), "--optimizer", "sgd", "--lr-schedule", "constant", *model[3]]
    every = ["--checkpoint-every-steps", str(args.every)]
    modes = {"none": [], "async": every + ["--checkpoint-async=true"], "sync": every + ["--checkpoint-async=false", "--checkpoint-memory-dir="]}
    times = {mode: [] for mode in modes}
    counts = []
    for _ in range(args.reps):
        for mode, options in modes.items():
            checkpoints, epoch, _ = run(args.dtrain, base + options, tmp, args.threads, args.device)
            times[mode].append(epoch["train_s"])
            if mode == "async":
                counts.append(len(checkpoints))
    t = {mode: statistics.median(v) for mode, v in times.items()}
    overhead = {mode: (t[mode] - t["none"]) / t["none"] for mode in ("async", "sync")}
    print(f"{model[0]}@{model[1]}: {args.overhead_steps} steps train in {t['none']:.2f} s without checkpoints inside the "
          f"epoch; with one every {args.every} steps ({counts[0]} checkpoints) {t['async']:.2f} s written behind "
          f"training (overhead {overhead['async'] * 100:+.1f}%), {t['sync']:.2f} s written on the training thread "
          f"(overhead {overhead['sync'] * 100:+.1f}%)")
    return {"workload": model[0], "image_size": model[1], "batch": model[2], "steps": args.overhead_steps, "every": args.every,
            "train_s": t, "overhead": overhead}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtrain", default="build/dtrain")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cases", default="blocked,overhead")
    parser.add_argument("--workloads", default="resnet50,mnist")
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--overhead-steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", choices=sorted(DEVICE_OPTIONS), default="cpu")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    results = {"machine": f"{platform.node()} ({os.cpu_count()} cores)", "device": args.device, "blocked": [],
               "overhead": None}
    with tempfile.TemporaryDirectory(prefix="dtrain-ckpt-") as tmp:
        cases = args.cases.split(",")
        if "blocked" in cases:
            for workload in args.workloads.split(","):
                if workload not in BLOCKED:
                    sys.exit(f"checkpoint_cost_bench: unknown workload '{workload}' (expected {', '.join(BLOCKED)})")
                results["blocked"].append(blocked_case(args, tmp, workload))
        if "overhead" in cases:
            results["overhead"] = overhead_case(args, tmp)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
