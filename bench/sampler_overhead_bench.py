#!/usr/bin/python3
"""What the resource sampler costs: the same dtrain run with the sampler at its default interval
(--sample-interval-s 1) and without it (0), alternated --reps times so that machine noise hits both
alike, under mpirun with --ranks ranks. Compares the median training time of an epoch (train_s from the
run log) and prints the overhead in percent (the goal is under 1%), and how many samples the sampled
runs logged per rank.

Usage: bench/sampler_overhead_bench.py [--dtrain build/dtrain] [--ranks 2] [--steps 300] [--reps 5]
       [--interval 1] [--data-dir DIR]
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


def run(args, interval, work):
    log_dir = tempfile.mkdtemp(dir=work)
    cmd = ["mpirun", "-np", str(args.ranks), "--oversubscribe", args.dtrain, "--workload", "mnist", "--epochs", "1",
           "--max-steps", str(args.steps), "--device", "cpu", "--backend", "mpi", "--checkpoint=false",
           "--log-dir", log_dir, "--progress", "off", "--log-interval", "0", "--eval-samples", "1000",
           "--sample-interval-s", str(interval)] + (["--data-dir", args.data_dir] if args.data_dir else ["--synthetic"])
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        sys.exit(f"sampler_overhead_bench: {' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    events = [json.loads(line) for line in open(glob.glob(log_dir + "/*/events.jsonl")[0])]
    epoch = next(e for e in events if e["event"] == "epoch_end")
    samples = [e for e in events if e["event"] == "sample"]
    return epoch["train_s"], len(samples) / args.ranks


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtrain", default="build/dtrain")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    if os.geteuid() == 0:
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    with tempfile.TemporaryDirectory(prefix="dtrain-sampler-bench-") as work:
        on, off, counts = [], [], []
        for rep in range(args.reps):
            # Alternate which goes first, so that a trend in the machine's load cancels.
            order = [True, False] if rep % 2 == 0 else [False, True]
            for sampled in order:
                train_s, per_rank = run(args, args.interval if sampled else 0, work)
                (on if sampled else off).append(train_s)
                if sampled:
                    counts.append(per_rank)
            print(f"rep {rep + 1}/{args.reps}: with sampler {on[-1]:.3f} s, without {off[-1]:.3f} s per epoch")
        with_s, without_s = statistics.median(on), statistics.median(off)
        overhead = 100.0 * (with_s - without_s) / without_s
        print(f"mnist, {args.ranks} ranks, {args.steps} steps, {platform.processor() or platform.machine()}: "
              f"training time per epoch with the sampler every {args.interval:g} s {with_s:.3f} s, without "
              f"{without_s:.3f} s (medians of {args.reps}); overhead {overhead:+.2f}%; "
              f"{statistics.median(counts):.0f} samples per rank and run")


if __name__ == "__main__":
    main()
