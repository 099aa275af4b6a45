#!/usr/bin/python3
"""What train.deterministic costs: the step time of dtrain with --deterministic against the default mode
of the same dtrain, same workload, same global batch and world size, on the CPU.

The default mode is the peer a user would otherwise run: buckets allreduced while backward runs (DDP
style), one backward pass per rank and step, the threads per rank dtrain picks. The deterministic mode
splits the global batch into --shards micro-batches (shards / ranks backward passes per rank), sums their
gradients in its fixed tree and exchanges them after backward, on one thread per rank; the GCN, whose
every pass computes the whole graph, is not split: each rank trains the whole global batch in one pass,
and --shards does not apply to it (the shards reported are those each run logged). Each run trains two
epochs of --steps steps (one step per epoch and --gcn-epochs epochs for the GCN, which trains on the
whole graph in every step); the figure is the second epoch's train_s / steps from the run log (the GCN:
the median of its later epochs'), so start-up and first-step allocation stay out. Runs alternate
between the modes, --reps times; the ratio is deterministic / default of the medians (1.3 = 30% slower).

Usage: bench/deterministic_cost_bench.py [--dtrain build/dtrain] [--ranks 2,4] [--workloads mnist,resnet18,gcn]
       [--shards 8] [--reps 3] [--steps 20] [--gcn-epochs 30] [--out FILE.json]
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "support"))
from mpi_env import allow_root_mpi  # noqa: E402

# workload: flags besides the mode's, and the global batch (the workload's per-rank recipe batch x 2).
WORKLOADS = {
    "mnist": (["--workload", "mnist", "--synthetic", "--eval-samples", "100"], 128),
    "resnet18": (["--workload", "resnet18", "--synthetic", "--image-size", "32", "--eval-samples", "100"], 256),
    "gcn": (["--workload", "gcn", "--synthetic"], 144),
}


def step_seconds(log_dir, per_epoch):
    """Seconds per optimizer step: the second epoch's, or with per_epoch the median of the epochs after the
    first tenth (one step each); and the shards the run says it split the global batch into (its run_start
    record's deterministic.shards; None in the default mode)."""
    runs = glob.glob(os.path.join(log_dir, "*", "events.jsonl"))
    if len(runs) != 1:
        sys.exit(f"deterministic_cost_bench: expected one run log under {log_dir}, found {runs}")
    with open(runs[0]) as f:
        records = [json.loads(line) for line in f]
    start = next(r for r in records if r.get("event") == "run_start")
    shards = start["deterministic"]["shards"] if "deterministic" in start else None
    ends = [r for r in records if r.get("event") == "epoch_end"]
    if per_epoch:
        later = ends[max(1, len(ends) // 10):]
        return statistics.median(e["train_s"] / e["steps"] for e in later), shards
    return ends[1]["train_s"] / ends[1]["steps"], shards


def run(args, workload, ranks, deterministic, root, tag):
    flags, global_batch = WORKLOADS[workload]
    log_dir = os.path.join(root, tag)
    gcn = workload == "gcn"
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", args.dtrain, "--device", "cpu", "--backend", "mpi", *flags,
           "--global-batch-size", str(global_batch), "--checkpoint=false", "--progress", "off", "--log-interval", "0",
           "--log-dir", log_dir]
    cmd += ["--epochs", str(args.gcn_epochs)] if gcn else ["--epochs", "2", "--max-steps", str(args.steps)]
    cmd += ["--deterministic", "--shards", str(args.shards)] if deterministic else ["--elastic-batch", "global"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"deterministic_cost_bench: {' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return step_seconds(log_dir, gcn)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtrain", default=os.path.join(HERE, "..", "build", "dtrain"))
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--workloads", default="mnist,resnet18,gcn")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--gcn-epochs", type=int, default=30)
    parser.add_argument("--out")
    args = parser.parse_args()
    args.dtrain = os.path.abspath(args.dtrain)
    allow_root_mpi()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dtrain-det-bench-") as root:
        for workload in args.workloads.split(","):
            for ranks in map(int, args.ranks.split(",")):
                times = {False: [], True: []}
                used_shards = set()  # as the deterministic runs logged them (the GCN's global batch: 1)
                for rep in range(args.reps):
                    for deterministic in (False, True):
                        tag = f"{workload}-{ranks}-{int(deterministic)}-{rep}"
                        seconds, shards = run(args, workload, ranks, deterministic, root, tag)
                        times[deterministic].append(seconds)
                        if deterministic:
                            used_shards.add(shards)
                if len(used_shards) != 1:
                    sys.exit(f"deterministic_cost_bench: {workload} at {ranks} ranks logged shards {used_shards}")
                shards = used_shards.pop()
                default, exact = statistics.median(times[False]), statistics.median(times[True])
                rows.append({"workload": workload, "ranks": ranks, "global_batch": WORKLOADS[workload][1],
                             "shards": shards, "default_step_s": default, "deterministic_step_s": exact,
                             "ratio": exact / default, "default_runs_s": times[False], "deterministic_runs_s": times[True]})
                print(f"{workload:9s} {ranks} ranks, global batch {WORKLOADS[workload][1]}, {shards} shard{'' if shards == 1 else 's'}: "
                      f"default {default * 1e3:8.1f} ms/step, deterministic {exact * 1e3:8.1f} ms/step, "
                      f"ratio {exact / default:.2f}", flush=True)
    result = {"machine": platform.node(), "cpus": os.cpu_count(), "reps": args.reps, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
