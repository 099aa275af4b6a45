#!/usr/bin/python3
"""The gloo backend against the mpi backend on the CPU: the same dtrain mnist run (synthetic data, one
epoch of --steps steps) under the same mpirun, --ranks ranks x 1 thread, once with --backend mpi and once
with --backend gloo, alternated --reps times so that machine noise hits both alike. Prints each backend's
median training throughput (samples/s from the run log's epoch record), their ratio gloo/mpi, and each
one's median allreduce bus bandwidth and exposed communication time per epoch.

Usage: bench/backend_bench.py [--dtrain build/dtrain] [--ranks 2] [--steps 200] [--reps 5] [--data-dir DIR]
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


def run(args, backend, work):
    log_dir = tempfile.mkdtemp(dir=work)
    cmd = ["mpirun", "-np", str(args.ranks), "--oversubscribe", args.dtrain, "--workload", "mnist", "--epochs", "1",
           "--max-steps", str(args.steps), "--device", "cpu", "--backend", backend, "--threads", "1",
           "--checkpoint=false", "--log-dir", log_dir, "--progress", "off", "--log-interval", "0",
           "--eval-samples", "1000", "--sample-interval-s", "0"] + \
        (["--data-dir", args.data_dir] if args.data_dir else ["--synthetic"])
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        sys.exit(f"backend_bench: {' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    events = [json.loads(line) for line in open(glob.glob(log_dir + "/*/events.jsonl")[0])]
    return next(e for e in events if e["event"] == "epoch_end")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtrain", default="build/dtrain")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--data-dir")
    args = parser.parse_args()
    if os.geteuid() == 0:
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    epochs = {"mpi": [], "gloo": []}
    with tempfile.TemporaryDirectory(prefix="dtrain-backend-bench-") as work:
        for rep in range(args.reps):
            order = ["mpi", "gloo"] if rep % 2 == 0 else ["gloo", "mpi"]
            for backend in order:
                epochs[backend].append(run(args, backend, work))
            print(f"rep {rep + 1}/{args.reps}: mpi {epochs['mpi'][-1]['samples_per_s']:.0f} samples/s, "
                  f"gloo {epochs['gloo'][-1]['samples_per_s']:.0f} samples/s")

    def median(backend, key):
        return statistics.median(e[key] for e in epochs[backend])

    mpi, gloo = median("mpi", "samples_per_s"), median("gloo", "samples_per_s")
    print(f"mnist, {args.ranks} ranks x 1 thread, {args.steps} steps, {platform.processor() or platform.machine()}: "
          f"mpi {mpi:.0f} samples/s, gloo {gloo:.0f} samples/s (medians of {args.reps}); ratio gloo/mpi {gloo / mpi:.3f}")
    for backend in ("mpi", "gloo"):
        print(f"  {backend}: bus bandwidth {median(backend, 'busbw_gbps'):.3f} GB/s, exposed communication "
              f"{median(backend, 'exposed_comm_s'):.3f} s of {median(backend, 'train_s'):.3f} s training")


if __name__ == "__main__":
    main()
