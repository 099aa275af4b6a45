#!/usr/bin/python3
"""Every workload beyond mnist trains on 2 ranks from one command, on generated data in its real format
(CIFAR-10 binary, tiny-imagenet-200 JPEGs, a folder of JPEG and PNG photos, a LINQS citation graph), and
reaches well above chance accuracy: the loaders, transforms, models and the data-parallel loop work
together, and every checkpoint they write opens in PyPI's safetensors. The GAN (biggan) has no accuracy to reach: its losses stay finite, its discriminator tells real
from fake better than chance, and it writes its sample grids.

Usage: workloads_test.py DTRAIN MPIEXEC [MPIEXEC_PREFLAGS]
"""
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
KATIB = re.compile(r"\{metricName: accuracy, metricValue: ([0-9.]+)\}")
GAN_KATIB = re.compile(r"\{metricName: d_accuracy, metricValue: ([0-9.]+)\};\{metricName: d_loss, metricValue: ([0-9.]+)\};"
                       r"\{metricName: g_loss, metricValue: (-?[0-9.]+)\}")

# biggan: data folder, image size, steps per epoch, epochs, whether D must tell real from fake by then.
# CIFAR-10's files, and the photo folder as an image folder at 32 px (a few steps: its loader and grid);
# four D steps per G step as the recipe has it, the average from the first G step.
GAN_CASES = [("cifar10", 32, 8, 2, True), ("photos", 32, 4, 1, False)]

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
        subprocess.run([sys.executable, os.path.join(HERE, "..", "data", "make_vision_datasets.py"), data], check=True)
        subprocess.run([sys.executable, os.path.join(HERE, "..", "data", "make_graph_dataset.py"),
                        os.path.join(data, "graph")], check=True)
        for workload, folder, size, epochs, floor, described, flags in CASES:
            logs = os.path.join(root, "logs", workload)
            cmd = [mpiexec, "-np", "2", *preflags, dtrain, "--device", "cpu", "--backend", "mpi", "--workload", workload,
                   "--data-dir", os.path.join(data, folder),
                   "--epochs", str(epochs), "--checkpoint-dir", os.path.join(root, "ck", workload), "--log-dir", logs,
                   "--progress", "off", "--log-interval", "0"]
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
        failures += labels_cases(dtrain, mpiexec, preflags, root, data)
        failures += skip_bad_case(dtrain, mpiexec, preflags, root, data)
        for folder, size, steps, epochs, learns in GAN_CASES:
            failures += gan_case(dtrain, mpiexec, preflags, root, data, folder, size, steps, epochs, learns)
        # Every checkpoint these runs wrote opens in PyPI's safetensors, as any tool would open it.
        opened = subprocess.run([sys.executable, os.path.join(HERE, "..", "support", "open_checkpoints.py"),
                                 "--min-files", str(len(CASES) + len(GAN_CASES)),
                                 *[os.path.join(root, "ck", d) for d in sorted(os.listdir(os.path.join(root, "ck")))]],
                                capture_output=True, text=True)
        print(opened.stdout.strip())
        if opened.returncode != 0:
            failures.append("checkpoints that PyPI's safetensors does not open and check:\n" + opened.stdout + opened.stderr)
        # Every workload's run log, with its own metrics (a GAN's d_loss, sample grids), matches the schema.
        schema = subprocess.run([sys.executable, os.path.join(HERE, "..", "support", "check_run_logs.py"),
                                 "--min-logs", str(len(CASES) + len(GAN_CASES)), "--expect", "samples",
                                 os.path.join(root, "logs")], capture_output=True, text=True)
        print(schema.stdout.strip())
        if schema.returncode != 0:
            failures.append("run logs that do not match runtime/log/run_log.schema.json")
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


def labels_cases(dtrain, mpiexec, preflags, root, data):
    """A checkpoint resumed on data whose labels mean other things stops with a data error (exit 3) naming
    the difference: the image folder with its first class folder renamed so that it sorts last (the
    label indices of both classes swap), and another graph of the same size."""
    photos = os.path.join(data, "photos")
    swapped = os.path.join(root, "photos-swapped")
    shutil.copytree(photos, swapped)
    a, b = sorted(os.listdir(swapped))[:2]
    os.rename(os.path.join(swapped, a), os.path.join(swapped, "zz-" + a))
    other_graph = os.path.join(root, "graph-2")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "data", "make_graph_dataset.py"), other_graph, "--seed", "2"],
                   check=True)
    failures = []
    for workload, data_dir, expected in (
            ("image-classifier", swapped, f"was trained on data whose labels mean other things: label 0 is class '{a}' in "
                                          f"the checkpoint but '{b}' in this data (2 classes then, 2 now)"),
            ("gcn", other_graph, "was trained on data whose labels mean other things: 'graph: 1800 papers, ")):
        cmd = [mpiexec, "-np", "2", *preflags, dtrain, "--device", "cpu", "--backend", "mpi", "--workload", workload,
               "--data-dir", data_dir, "--epochs", "100", "--resume", "--checkpoint-dir", os.path.join(root, "ck", workload),
               "--log-dir", os.path.join(root, "logs-labels", workload), "--progress", "off", "--log-interval", "0"]
        if workload == "image-classifier":
            cmd += ["--image-size", "64", "--optimizer", "adam", "--lr-schedule", "constant", "--data-workers", "2"]
        result = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
        output = result.stdout + result.stderr
        print(f"{workload} resumed on other labels: exit {result.returncode}")
        if result.returncode != 3 or expected not in output or "Train Epoch" in output:
            failures.append(f"{workload} resumed on other labels: exit {result.returncode}, expected 3 and "
                            f"{expected!r}\n{output[-2000:]}")
    return failures


def skip_bad_case(dtrain, mpiexec, preflags, root, data):
    """--skip-bad-images: an image folder with an empty, a truncated-header and a cut-short file (an
    interrupted copy: no end-of-image marker) trains without them, and the run log counts them; a JPEG whose
    scan names a Huffman table its header does not define passes the start-up check (header and end are
    whole), fails when it is decoded, and is stood in for, warned about by the rank that read it and
    counted in epoch_end's bad_samples (the rank that reads it may change with the epoch's shuffle)."""
    folder = os.path.join(root, "photos-with-bad")
    shutil.copytree(os.path.join(data, "photos"), folder)
    first = sorted(os.listdir(folder))[0]
    open(os.path.join(folder, first, "empty.jpg"), "wb").close()
    with open(os.path.join(folder, first, "header.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n\x00\x00")
    noise = random.Random(7).randbytes(96 * 96 * 3)
    interrupted = os.path.join(folder, first, "interrupted.jpg")
    Image.frombytes("RGB", (96, 96), noise).save(interrupted, quality=95)
    with open(interrupted, "rb") as f:
        whole = f.read()
    with open(interrupted, "wb") as f:
        f.write(whole[:len(whole) // 2])
    cut = os.path.join(folder, first, "cut.jpg")  # damaged inside: found only when it is decoded
    sos = whole.find(b"\xff\xda")
    with open(cut, "wb") as f:
        f.write(whole[:sos + 6] + b"\x33" + whole[sos + 7:])
    logs = os.path.join(root, "logs-skip")
    cmd = [mpiexec, "-np", "2", *preflags, dtrain, "--device", "cpu", "--backend", "mpi", "--workload", "image-classifier",
           "--data-dir", folder, "--epochs", "2", "--image-size", "32", "--batch-size", "16", "--skip-bad-images",
           "--checkpoint=false", "--log-dir", logs, "--progress", "off", "--log-interval", "0", "--data-workers", "2"]
    result = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
    output = result.stdout + result.stderr
    print(f"image-classifier with --skip-bad-images: exit {result.returncode}")
    if result.returncode != 0:
        return [f"--skip-bad-images: exit {result.returncode}\n{output[-2000:]}"]
    run_dir = os.path.join(logs, sorted(os.listdir(logs))[-1])
    with open(os.path.join(run_dir, "events.jsonl")) as f:
        events = [json.loads(line) for line in f]
    start = next(e for e in events if e["event"] == "run_start")
    failures = []
    if "; 3 bad image files left out (--skip-bad-images), the first: " not in start["data"] or \
            start.get("bad_files_left_out") != 3:
        failures.append(f"--skip-bad-images: run_start data is {start['data']!r}, "
                        f"bad_files_left_out {start.get('bad_files_left_out')}")
    # Read once an epoch (twice where the sampler's padding repeats it), in training or evaluation.
    counts = [e["bad_samples"] for e in events if e["event"] == "epoch_end"]
    warned = [line for line in result.stderr.splitlines()
              if line.startswith("dtrain: warning: rank ") and f"JPEG image '{cut}': Huffman table 0x03 was not defined" in line]
    summaries = [e for e in events if e["event"] == "warning" and "of all ranks could not be decoded" in e["message"]]
    print(f"  the damaged JPEG: bad_samples per epoch {counts}, {len(warned)} rank warning(s), {len(summaries)} summaries")
    if len(counts) != 2 or not all(1 <= c <= 2 for c in counts) or not 1 <= len(warned) <= 2 or len(summaries) != 2:
        failures.append(f"--skip-bad-images, a JPEG damaged inside: bad_samples {counts}, rank warnings {warned}, "
                        f"{len(summaries)} run-log summaries\n{output[-2000:]}")
    return failures


def gan_case(dtrain, mpiexec, preflags, root, data, folder, size, steps, epochs, learns):
    logs = os.path.join(root, "logs", f"biggan-{folder}")
    cmd = [mpiexec, "-np", "2", *preflags, dtrain, "--device", "cpu", "--backend", "mpi", "--workload", "biggan",
           "--data-dir", os.path.join(data, folder),
           "--image-size", str(size), "--epochs", str(epochs), "--max-steps", str(steps), "--batch-size", "8",
           "--eval-samples", "64", "--ema-start", "0", "--sample-every", "1", "--data-workers", "2",
           "--checkpoint-dir", os.path.join(root, "ck", f"biggan-{folder}"), "--log-dir", logs,
           "--progress", "off", "--log-interval", "0"]
    start = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
    output = result.stdout + result.stderr
    lines = [tuple(map(float, m)) for m in GAN_KATIB.findall(output)]
    print(f"biggan on {folder}: exit {result.returncode}, {time.monotonic() - start:.0f} s, "
          f"test (d_accuracy, d_loss, g_loss) per epoch {lines}")
    if result.returncode != 0 or len(lines) != epochs:
        return [f"biggan on {folder}: exit {result.returncode}, {len(lines)} Katib lines\n{output[-3000:]}"]
    failures = []
    run_dir = os.path.join(logs, sorted(os.listdir(logs))[-1])
    with open(os.path.join(run_dir, "events.jsonl")) as f:
        events = [json.loads(line) for line in f]
    ends = [e for e in events if e.get("event") == "epoch_end"]
    print(f"  training d_accuracy per epoch {[e.get('train_d_accuracy') for e in ends]}")
    names = [f"{split}_{name}" for split in ("train", "test") for name in ("d_loss", "g_loss", "d_accuracy")]
    for end in ends:
        metrics = {name: end.get(name) for name in names}
        if any(v is None or not math.isfinite(v) for v in metrics.values()):
            failures.append(f"biggan on {folder}: epoch {end['epoch']} metrics {metrics}")
    # Some discriminator steps in, D tells the real images from the fakes more often than not.
    if learns and ends and not (ends[-1].get("train_d_accuracy") or 0) > 0.55:
        failures.append(f"biggan on {folder}: training d_accuracy {ends[-1].get('train_d_accuracy')} did not leave 0.5")
    grids = sorted(os.listdir(os.path.join(run_dir, "samples")))
    if grids != [f"epoch-{e:06d}.png" for e in range(1, epochs + 1)]:
        failures.append(f"biggan on {folder}: sample grids {grids}")
    recorded = [e for e in events if e.get("event") == "samples"]
    if [e["epoch"] for e in recorded] != list(range(1, epochs + 1)):
        failures.append(f"biggan on {folder}: samples records {recorded}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
