#!/usr/bin/python3
"""Runs dtrain's mnist workload and its PyTorch DDP peer (bench/peer/mnist_ddp.py) at 1 and 2 ranks with
the same threads per rank, batch and data, alternating the two so that machine noise hits both alike.
Prints samples/s (median of the repetitions), scaling from 1 to 2 ranks, the dtrain/PyTorch ratio and
peak memory per rank, and writes the figures as JSON.

It also runs two independent single-process dtrain jobs at once, one per core, which do not communicate.
Their summed samples/s is what 2 ranks could reach on this machine if communication were free: the
ratio of the 2-rank figure to it separates the cost of communication from the machine's own contention
(shared memory bandwidth and caches, other load).

Usage: bench/mnist_peer_bench.py [--dtrain build/dtrain] [--steps 150] [--reps 3] [--out FILE]
"""
import argparse
import glob
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mpirun(np, command, env):
    cmd = ["mpirun", "-np", str(np), "--bind-to", "core", "-x", "OMP_NUM_THREADS", "-x", "MASTER_PORT"] + command
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        sys.exit(f"mnist_peer_bench: {' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def run_dtrain(args, np, env, work):
    log_dir = tempfile.mkdtemp(dir=work)
    mpirun(np, [args.dtrain, "--workload", "mnist", "--epochs", "1", "--max-steps", str(args.steps),
                "--batch-size", str(args.batch_size), "--threads", str(args.threads), "--checkpoint=false",
                "--log-dir", log_dir, "--progress", "off", "--eval-samples", str(args.eval_samples)] +
           (["--data-dir", args.data_dir] if args.data_dir else []),
           env)
    events = [json.loads(line) for line in open(glob.glob(log_dir + "/*/events.jsonl")[0])]
    epoch = next(e for e in events if e["event"] == "epoch_end")
    end = events[-1]
    return {"samples_per_s": epoch["samples_per_s"], "peak_rss_bytes": max(end["peak_rss_bytes"]),
            "exposed_comm_s": epoch["exposed_comm_s"], "comm_s": epoch["comm_s"], "train_s": epoch["train_s"]}


def run_dtrain_pair(args, env, work):
    """Two single-process dtrain runs at once, each pinned to its own core: no communication at all."""
    procs, log_dirs = [], []
    for core in (0, 1):
        log_dir = tempfile.mkdtemp(dir=work)
        log_dirs.append(log_dir)
        cmd = ["taskset", "-c", str(core % os.cpu_count()), args.dtrain, "--workload", "mnist", "--epochs", "1",
               "--max-steps", str(args.steps), "--batch-size", str(args.batch_size), "--threads", str(args.threads),
               "--checkpoint=false", "--log-dir", log_dir, "--progress", "off", "--eval-samples", str(args.eval_samples)]
        cmd += ["--data-dir", args.data_dir] if args.data_dir else []
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for proc in procs:
        out, _ = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            sys.exit(f"mnist_peer_bench: independent dtrain run failed ({proc.returncode}):\n{out}")
    rates = []
    for log_dir in log_dirs:
        events = [json.loads(line) for line in open(glob.glob(log_dir + "/*/events.jsonl")[0])]
        rates.append(next(e for e in events if e["event"] == "epoch_end")["samples_per_s"])
    return {"samples_per_s": sum(rates), "per_process": rates}


def run_peer(args, np, env):
    out = mpirun(np, ["/usr/bin/python3", os.path.join(HERE, "peer", "mnist_ddp.py"), "--max-steps", str(args.steps),
                      "--batch-size", str(args.batch_size), "--threads", str(args.threads),
                      "--test-samples", str(args.eval_samples)] +
                 (["--data-dir", args.data_dir] if args.data_dir else []), env)
    result = json.loads(out.strip().splitlines()[-1])
    epoch = result["epochs"][0]
    return {"samples_per_s": epoch["samples_per_s"], "peak_rss_bytes": max(result["peak_rss_bytes"]),
            "train_s": epoch["train_s"], "torch_version": result["torch_version"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtrain", default=os.path.join(HERE, "..", "build", "dtrain"))
    parser.add_argument("--data-dir", default="", help="MNIST-format IDX files (default: Debian's Fashion-MNIST)")
    parser.add_argument("--steps", type=int, default=150, help="training steps per rank and run")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-samples", type=int, default=0,
                        help="test samples both evaluate after the epoch (0 = all; the figures time training only)")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "mnist_peer.json"))
    args = parser.parse_args()
    if not os.access(args.dtrain, os.X_OK):
        sys.exit(f"mnist_peer_bench: no dtrain binary at {args.dtrain}; build first (scripts/build.sh)")

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    if os.getuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    work = tempfile.mkdtemp(prefix="dtrain-bench-")
    runs = {(impl, np): [] for impl in ("dtrain", "pytorch") for np in (1, 2)}
    pairs = []
    try:
        for rep in range(args.reps):
            for np in (1, 2):
                env["MASTER_PORT"] = str(free_port())
                runs[("dtrain", np)].append(run_dtrain(args, np, env, work))
                runs[("pytorch", np)].append(run_peer(args, np, env))
                print(f"rep {rep + 1}/{args.reps}, {np} rank(s): dtrain {runs[('dtrain', np)][-1]['samples_per_s']:.0f}, "
                      f"pytorch {runs[('pytorch', np)][-1]['samples_per_s']:.0f} samples/s", file=sys.stderr)
            pairs.append(run_dtrain_pair(args, env, work))
            print(f"rep {rep + 1}/{args.reps}, 2 independent dtrain processes: {pairs[-1]['samples_per_s']:.0f} samples/s",
                  file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    summary = {}
    for (impl, np), results in runs.items():
        summary[f"{impl}_{np}"] = {
            "samples_per_s_median": statistics.median(r["samples_per_s"] for r in results),
            "samples_per_s_all": [round(r["samples_per_s"], 1) for r in results],
            "peak_rss_mib_max": max(r["peak_rss_bytes"] for r in results) / 2**20,
        }
    for impl in ("dtrain", "pytorch"):
        one, two = summary[f"{impl}_1"]["samples_per_s_median"], summary[f"{impl}_2"]["samples_per_s_median"]
        summary[f"{impl}_scaling_1_to_2"] = two / (2 * one)
    for np in (1, 2):
        summary[f"ratio_dtrain_over_pytorch_{np}"] = (summary[f"dtrain_{np}"]["samples_per_s_median"] /
                                                      summary[f"pytorch_{np}"]["samples_per_s_median"])
    summary["independent_pair_samples_per_s_median"] = statistics.median(p["samples_per_s"] for p in pairs)
    summary["dtrain_2_of_independent_pair"] = (summary["dtrain_2"]["samples_per_s_median"] /
                                               summary["independent_pair_samples_per_s_median"])
    dtrain_2 = runs[("dtrain", 2)]
    summary["dtrain_2_exposed_comm_fraction"] = statistics.median(r["exposed_comm_s"] / r["train_s"] for r in dtrain_2)

    print(f"\nmnist, batch {args.batch_size} per rank, {args.threads} thread(s) per rank, {args.steps} steps per rank, "
          f"median of {args.reps}  ({platform.node()}, {os.cpu_count()} cores)")
    print(f"{'impl':<12}{'ranks':>6}{'samples/s':>12}{'peak MiB/rank':>15}{'runs (samples/s)':>30}")
    for impl in ("dtrain", "pytorch"):
        for np in (1, 2):
            s = summary[f"{impl}_{np}"]
            print(f"{impl:<12}{np:>6}{s['samples_per_s_median']:>12.0f}{s['peak_rss_mib_max']:>15.0f}"
                  f"{str(s['samples_per_s_all']):>30}")
    print(f"scaling 1->2 ranks: dtrain {100 * summary['dtrain_scaling_1_to_2']:.1f}%, "
          f"pytorch {100 * summary['pytorch_scaling_1_to_2']:.1f}%")
    print(f"dtrain/pytorch samples/s: {summary['ratio_dtrain_over_pytorch_1']:.2f}x at 1 rank, "
          f"{summary['ratio_dtrain_over_pytorch_2']:.2f}x at 2 ranks")
    print(f"dtrain at 2 ranks: exposed communication {100 * summary['dtrain_2_exposed_comm_fraction']:.1f}% of train time")
    print(f"2 independent 1-rank dtrain processes (no communication): "
          f"{summary['independent_pair_samples_per_s_median']:.0f} samples/s; dtrain at 2 ranks reaches "
          f"{100 * summary['dtrain_2_of_independent_pair']:.1f}% of it")

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"machine": {"node": platform.node(), "cores": os.cpu_count()}, "steps": args.steps,
                   "reps": args.reps, "batch_size": args.batch_size, "threads": args.threads,
                   "summary": summary, "runs": {f"{k[0]}_{k[1]}": v for k, v in runs.items()},
                   "independent_pairs": pairs}, f, indent=1)
    print(f"written {args.out}")


main()
