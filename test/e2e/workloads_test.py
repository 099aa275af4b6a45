#!/usr/bin/python3
"""Every workload beyond mnist trains on 2 ranks from one command, on generated data in its real format
(CIFAR-10 binary, tiny-imagenet-200 JPEGs, a folder of JPEG and PNG photos, a LINQS citation graph), and
reaches well above chance accuracy: the loaders, transforms, models and the data-parallel loop work
together.

Usage: workloads_test.py DTRAIN MPIEXEC [MPIEXEC_PREFLAGS]
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KATIB = re.compile(r"\{metricName: accuracy, metricValue: ([0-9.]+)\}")

# workload, data folder, image size, epochs, lowest accepted final test accuracy (chance in brackets), how
# the run log describes the data it read, and further flags.
CASES = [
    ("cifar10", "cifar10", 32, 2, 0.35, "CIFAR-10 binary files in ", []),                                # (0.10)
    ("resnet18", "tiny-imagenet-200", 32, 3, 0.60, "tiny-imagenet-200 in ", ["--sync-batchnorm"]),       # (0.25)
    ("resnet50", "tiny-imagenet-200", 32, 4, 0.45, "tiny-imagenet-200 in ", []),                         # (0.25)
    ("alexnet", "tiny-imagenet-200", 64, 3, 0.50, "tiny-imagenet-200 in ", []),                          # (0.25)
    ("image-classifier", "photos", 64, 3, 0.80, "image folder ", []),                                    # (0.50)
    # The GCN under its own recipe (Adam 0.01, weight decay on the first layer, full-graph steps).
    ("gcn", "graph", 0, 60, 0.80, "citation graph ", None),                                              # (0.25)
]


def main():
    dtrain, mpiexec = sys.argv[1], sys.argv[2]
    preflags = sys.argv[3].split() if len(sys.argv) > 3 and sys.argv[3] else []
    failures = []
    with tempfile.TemporaryDirectory(prefix="dtrain-vision-") as root:
        data = os.path.join(root, "data")
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "data", "make_vision_datasets.py"), data], check=True)
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "data", "make_graph_dataset.py"),
                        os.path.join(data, "graph")], check=True)
        for workload, folder, size, epochs, floor, described, flags in CASES:
            logs = os.path.join(root, "logs", workload)
            cmd = [mpiexec, "-np", "2", *preflags, dtrain, "--workload", workload, "--data-dir", os.path.join(data, folder),
                   "--epochs", str(epochs), "--checkpoint-dir", os.path.join(root, "ck", workload), "--log-dir", logs,
                   "--progress-bar=false", "--log-interval", "0"]
            if flags is not None:
                # Adam at 1e-3 on a constant rate: the recipes' SGD schedules are for full datasets and epochs.
                cmd += ["--image-size", str(size), "--batch-size", "16", "--optimizer", "adam", "--lr", "1e-3",
                        "--lr-schedule", "constant", "--weight-decay", "0", "--warmup-epochs", "0", "--data-workers", "2",
                        *flags]
            flags = flags or []
            start = time.monotonic()
            result = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
            seconds = time.monotonic() - start
            output = result.stdout + result.stderr
            accuracies = [float(a) for a in KATIB.findall(output)]
            print(f"{workload} {' '.join(flags)}: exit {result.returncode}, {seconds:.0f} s, test accuracy per epoch {accuracies}")
            if result.returncode != 0 or len(accuracies) != epochs:
                failures.append(f"{workload}: exit {result.returncode}, {len(accuracies)} Katib lines\n{output[-3000:]}")
                continue
            if accuracies[-1] < floor:
                failures.append(f"{workload}: final test accuracy {accuracies[-1]:.4f} < {floor}")
            # The run log names the data it read and the class count the model was built for.
            run_dirs = sorted(os.listdir(logs))
            with open(os.path.join(logs, run_dirs[-1], "events.jsonl")) as f:
                start_event = next(e for e in map(json.loads, f) if e.get("event") == "run_start")
            classes = {"cifar10": 10, "photos": 2}.get(folder, 4)
            expected = {"cifar10": "", "graph": f"{classes} classes; 80 training"}.get(folder, f"{classes} classes at {size} px")
            if not start_event.get("data", "").startswith(described + os.path.join(data, folder)) or \
                    expected not in start_event["data"]:
                failures.append(f"{workload}: run_start data is {start_event.get('data')!r}")
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
