#!/usr/bin/env python3
"""mnist epoch time on one GPU: dtrain (NCCL backend, world size 1, dataset uploaded once and batches
gathered on the GPU) against three PyTorch peers on the same GPU, the same model, optimizer, batch and data:
  example  bench/peer/mnist_ddp.py --device cuda: pytorch/examples' loop, the ordinary DataLoader and a
           host-to-device copy per batch (DDP at world size 1)
  eager    bench/peer/mnist_device_peer.py --mode eager: data on the GPU, no host synchronisation
  graph    bench/peer/mnist_device_peer.py --mode graph: the whole step captured in one CUDA graph
All alternate, so drifting clocks or neighbours hit each alike. While each runs, nvidia-smi samples GPU
utilisation and memory every 100 ms.

Prints per implementation the median over repetitions of each epoch's train and total time, each peer's
ratio peer / dtrain (> 1: dtrain is faster), mean GPU utilisation, peak GPU memory and final accuracy, and
writes everything as JSON.

Usage: bench/gpu_epoch_bench.py --dtrain build-cuda/dtrain [--python PYTHON] [--epochs 2] [--reps 3]
                                [--peers example,eager,graph] [--dtrain-args="--compress bf16"]
Run it with the Python whose torch has CUDA (pip's wheel); --python defaults to this interpreter.
"""
import argparse
import glob
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class GpuSampler:
    """nvidia-smi in loop mode, in the background, for the duration of a `with` block."""

    def __init__(self, gpu_index):
        self.gpu_index = gpu_index
        self.samples = []  # (utilisation %, memory used MiB)

    def __enter__(self):
        if shutil.which("nvidia-smi") is None:
            self.proc = None
            return self
        self.proc = subprocess.Popen(
            ["nvidia-smi", "-i", str(self.gpu_index), "--query-gpu=utilization.gpu,memory.used",
             "--format=csv,noheader,nounits", "-lms", "100"], stdout=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit():
                self.samples.append((int(parts[0]), int(parts[1])))

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()
            self.reader.join(timeout=5)

    def summary(self):
        if not self.samples:
            return {"gpu_util_mean_pct": None, "gpu_util_max_pct": None, "gpu_mem_max_mib": None, "gpu_samples": 0}
        util = [u for u, _ in self.samples]
        return {"gpu_util_mean_pct": statistics.mean(util), "gpu_util_max_pct": max(util),
                "gpu_mem_max_mib": max(m for _, m in self.samples), "gpu_samples": len(self.samples)}


def run(cmd, env):
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        sys.exit(f"gpu_epoch_bench: {' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def run_dtrain(args, env, work):
    log_dir = tempfile.mkdtemp(dir=work)
    cmd = [args.dtrain, "--workload", "mnist", "--device", "cuda", "--backend", args.backend,
           "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--checkpoint=false",
           "--log-dir", log_dir, "--progress", "off", "--precision", args.precision]
    cmd += ["--data-dir", args.data_dir] if args.data_dir else []
    cmd += shlex.split(args.dtrain_args)
    with GpuSampler(args.gpu) as gpu:
        run(cmd, env)
    events = [json.loads(line) for line in open(glob.glob(log_dir + "/*/events.jsonl")[0])]
    epochs = [{"train_s": e["train_s"], "epoch_s": e["epoch_s"], "test_accuracy": e["test_accuracy"]}
              for e in events if e["event"] == "epoch_end"]
    return {"epochs": epochs, **gpu.summary()}


PEERS = {
    "example": ["mnist_ddp.py", "--device", "cuda"],
    "eager": ["mnist_device_peer.py", "--mode", "eager"],
    "graph": ["mnist_device_peer.py", "--mode", "graph"],
}


def run_peer(name, args, env):
    script, *flags = PEERS[name]
    cmd = [args.python, os.path.join(HERE, "peer", script), *flags, "--epochs", str(args.epochs),
           "--batch-size", str(args.batch_size)]
    cmd += ["--data-dir", args.data_dir] if args.data_dir else []
    with GpuSampler(args.gpu) as gpu:
        out = run(cmd, env)
    result = json.loads(out.strip().splitlines()[-1])
    epochs = [{"train_s": e["train_s"], "epoch_s": e["epoch_s"], "test_accuracy": e["test_accuracy"]}
              for e in result["epochs"]]
    return {"epochs": epochs, "torch_version": result["torch_version"], **gpu.summary()}


def median_epochs(runs, key):
    """Per epoch index, the median over repetitions."""
    return [statistics.median(r["epochs"][i][key] for r in runs) for i in range(len(runs[0]["epochs"]))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtrain", default=os.path.join(HERE, "..", "build-cuda", "dtrain"))
    parser.add_argument("--python", default=sys.executable, help="interpreter of the PyTorch peer (CUDA torch)")
    parser.add_argument("--data-dir", default="", help="MNIST-format IDX files (default: Debian's Fashion-MNIST)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--backend", default="nccl", choices=("nccl", "mpi"))
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--gpu", type=int, default=0, help="GPU index to sample with nvidia-smi")
    parser.add_argument("--peers", default="example,eager,graph", help="comma-separated, of: " + ", ".join(PEERS))
    parser.add_argument("--dtrain-args", default="", help="more flags for dtrain, one string: --dtrain-args=\"--compress bf16\"")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "gpu_epoch.json"))
    args = parser.parse_args()

    peers = args.peers.split(",")
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        sys.exit(f"gpu_epoch_bench: unknown peer(s) {', '.join(unknown)}; expected some of {', '.join(PEERS)}")
    env = dict(os.environ)
    env.setdefault("MASTER_PORT", "29517")
    work = tempfile.mkdtemp(prefix="gpu_epoch_bench.")
    runs = {name: [] for name in ["dtrain", *peers]}
    try:
        for rep in range(args.reps):
            runs["dtrain"].append(run_dtrain(args, env, work))
            for name in peers:
                runs[name].append(run_peer(name, args, env))
            print(f"rep {rep + 1}/{args.reps}: epoch s " + ", ".join(
                f"{name} {[round(e['epoch_s'], 2) for e in r[-1]['epochs']]}" for name, r in runs.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report = {"bench": "gpu_epoch", "epochs": args.epochs, "reps": args.reps, "batch_size": args.batch_size,
              "backend": args.backend, "precision": args.precision, "dtrain_args": args.dtrain_args, "peers": peers,
              "peer_torch": runs[peers[0]][0]["torch_version"] if peers else None}
    print(f"\nmnist, batch {args.batch_size}, median of {args.reps} repetitions (dtrain {args.backend}/{args.precision}"
          f"{' ' + args.dtrain_args if args.dtrain_args else ''},"
          f" PyTorch {report['peer_torch']} fp32); epoch seconds (train seconds), ratio = peer / dtrain")
    print(f"{'epoch':>5} | {'dtrain':>15} | " + " | ".join(f"{name:>23}" for name in peers))
    medians = {name: (median_epochs(r, "epoch_s"), median_epochs(r, "train_s")) for name, r in runs.items()}
    rows = []
    for i in range(args.epochs):
        d_epoch, d_train = medians["dtrain"][0][i], medians["dtrain"][1][i]
        row = {"epoch": i + 1, "dtrain_epoch_s": d_epoch, "dtrain_train_s": d_train}
        cells = []
        for name in peers:
            p_epoch, p_train = medians[name][0][i], medians[name][1][i]
            row.update({f"{name}_epoch_s": p_epoch, f"{name}_train_s": p_train, f"{name}_over_dtrain": p_epoch / d_epoch})
            cells.append(f"{p_epoch:>6.3f} ({p_train:>6.3f}) {p_epoch / d_epoch:>6.2f}x")
        rows.append(row)
        print(f"{i + 1:>5} | {d_epoch:>6.3f} ({d_train:>6.3f}) | " + " | ".join(cells))
    for name, name_runs in runs.items():
        util = [r["gpu_util_mean_pct"] for r in name_runs if r["gpu_util_mean_pct"] is not None]
        mem = [r["gpu_mem_max_mib"] for r in name_runs if r["gpu_mem_max_mib"] is not None]
        report[f"{name}_gpu_util_mean_pct"] = statistics.median(util) if util else None
        report[f"{name}_gpu_mem_max_mib"] = max(mem) if mem else None
        util_text = f"{report[f'{name}_gpu_util_mean_pct']:.0f} %" if util else "not sampled"
        print(f"{name:>7}: GPU utilisation {util_text} (mean while running), peak GPU memory"
              f" {report[f'{name}_gpu_mem_max_mib']} MiB, final test accuracy {name_runs[-1]['epochs'][-1]['test_accuracy']:.4f}")
    report.update({"per_epoch": rows, "runs": runs})
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
