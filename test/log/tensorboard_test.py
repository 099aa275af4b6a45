#!/usr/bin/python3
"""dtrain's TensorBoard event files as TensorBoard itself reads and shows them, on real runs:
  1. A 2-rank mnist run of 2 epochs, then resumed for a third (a second process, a second event file):
     TensorBoard's own reader (the PyPI package's EventAccumulator) reads back every value of the run log,
     value for value (float32, as the format holds them), at the documented steps; no value it holds is
     missing from the run log, and none of the run log's is missing from it.
  2. biggan's sample grids: TensorBoard's images are the PNG files the run wrote, byte for byte; with
     --tensorboard=false a run writes no tensorboard/.
  3. dtrain-report on a study that kept only that run's tensorboard/: its epochs and resource samples in
     the report's CSVs equal the run log's.
  4. TensorBoard serving the 2-rank run's directory in headless Chromium: its Time Series dashboard lists
     the main run and one run per rank, and each group of dtrain's tags with its number of charts.
     Screenshot: DTRAIN_SCREENSHOT_DIR (default: the temporary directory).
Runs under the Python of scripts/install_tensorboard.sh's environment, installing it when it is missing.
Usage: tensorboard_test.py DTRAIN MPIEXEC [MPIEXEC_FLAGS]"""

import csv
import json
import os
import shutil
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    python = subprocess.run(["bash", str(ROOT / "scripts" / "install_tensorboard.sh")], check=True,
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    if os.environ.get("DTRAIN_TENSORBOARD_PYTHON") == python:
        raise SystemExit(f"tensorboard_test: {python} has no tensorboard package")
    os.environ["DTRAIN_TENSORBOARD_PYTHON"] = python
    os.execv(python, [python, *sys.argv])

import numpy as np  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

sys.path.insert(0, str(ROOT / "test" / "support"))
from mpi_env import allow_root_mpi  # noqa: E402
from browser import browser, screenshot  # noqa: E402

failures = []

# The run log's fields that dtrain writes to TensorBoard, per record kind (tensorboard_writer.h).
EPOCH_FIELDS = ["lr", "epoch_s", "train_s", "eval_s", "samples_per_s", "tflops_achieved", "mfu", "comm_s",
                "exposed_comm_s", "comm_wait_cpu_s", "busbw_gbps", "net_tx_bytes_per_step", "net_rx_bytes_per_step"]
SAMPLE_FIELDS = ["cpu_percent", "rss_bytes", "host_mem_used_bytes", "net_rx_bytes", "net_tx_bytes", "gpu_util_percent",
                 "gpu_mem_used_bytes", "gpu_mem_bw_util_percent", "gpu_power_w", "gpu_sm_clock_mhz"]
METRIC = re.compile(r"^(train|test)_([a-z][a-z0-9_]*)$")
NOT_METRICS = {"train_s", "train_samples", "test_samples"}  # epoch_end fields that look like metrics


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)
    return condition


def launch(mpiexec, flags, ranks, args, timeout=600):
    proc = subprocess.run([mpiexec, "-np", str(ranks), *flags, *args], capture_output=True, text=True,
                          errors="replace", timeout=timeout)
    check(proc.returncode == 0, f"{' '.join(args)}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc


def records(run_dir):
    with open(run_dir / "events.jsonl") as f:
        return [json.loads(line) for line in f]


def load(directory):
    """TensorBoard's reader over one directory (one TensorBoard run), everything kept."""
    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def scalars(accumulator):
    """{tag: {step: value}}, checking that no tag has two values at one step."""
    out = {}
    for tag in accumulator.Tags()["scalars"]:
        events = accumulator.Scalars(tag)
        out[tag] = {e.step: e.value for e in events}
        check(len(out[tag]) == len(events), f"{tag}: several values at one step")
    return out


def expect(expected, tag, step, value):
    """A run-log value that TensorBoard must hold at `step`, as the float32 the format stores."""
    if value is None:
        return
    if (tag, step) in expected:
        check(False, f"two run-log values for {tag} at step {step}")
    expected[tag, step] = float(np.float32(value))


def compare(what, expected, read):
    got = {(tag, step): value for tag, values in read.items() for step, value in values.items()}
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    check(not missing, f"{what}: run-log values that TensorBoard does not have: {missing[:5]}")
    check(not extra, f"{what}: TensorBoard values that the run log does not have: {extra[:5]}")
    wrong = [(k, expected[k], got[k]) for k in sorted(set(expected) & set(got)) if got[k] != expected[k]]
    check(not wrong, f"{what}: values that differ (tag and step, run log, TensorBoard): {wrong[:5]}")
    print(f"tensorboard_test: {what}: {len(expected)} run-log values, {len(got)} read by TensorBoard, "
          f"{len(wrong)} differ, {len(missing)} missing, {len(extra)} extra")


def check_run(run_dir, ranks):
    log = records(run_dir)
    n = next(r["train_samples"] for r in log if r["event"] == "run_start")
    expected = {}
    for r in (r for r in log if r["event"] == "train_progress"):
        step = (r["epoch"] - 1) * n + r["samples_done"]
        for key, value in r.items():
            m = METRIC.match(key)
            if m and key not in NOT_METRICS and not key.endswith("_correct"):
                expect(expected, f"train/{m.group(2)}", step, value)
        if r["samples_per_s"] > 0:
            expect(expected, "train/samples_per_s", step, r["samples_per_s"])
    epochs = [r for r in log if r["event"] == "epoch_end"]
    for r in epochs:
        step = r["epoch"] * n
        for key, value in r.items():
            if METRIC.match(key) and key not in NOT_METRICS and not key.endswith("_correct"):
                expect(expected, f"epoch/{key}", step, value)
        for key in EPOCH_FIELDS:
            if key in r:
                expect(expected, f"epoch/{key}", step, r[key])
    main = load(run_dir / "tensorboard")
    compare("the run's curves", expected, scalars(main))
    check(len([r for r in log if r["event"] == "train_progress"]) >= 6 and len(epochs) == 3,
          f"the run log has {len(epochs)} epochs")

    # A resource sample's step: ms from the run's first start, the second in its oldest event file's name.
    files = sorted((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    check(len(files) == 2, f"one event file per process (the run and its resume): {[f.name for f in files]}")
    origin_ms = 1000 * min(int(f.name.split(".")[3]) for f in files)
    for rank in range(ranks):
        expected = {}
        for r in (r for r in log if r["event"] == "sample" and r["rank"] == rank):
            for key in SAMPLE_FIELDS:
                if key in r:
                    expect(expected, f"resources/{key}", r["unix_time_ms"] - origin_ms, r[key])
        check(len(expected) >= 5, f"rank {rank}: {len(expected)} resource values in the run log")
        compare(f"rank {rank}'s resource samples", expected, scalars(load(run_dir / "tensorboard" / f"rank{rank}")))


def check_gan(dtrain, mpiexec, flags, root):
    logs = root / "gan"
    launch(mpiexec, flags, 1, [dtrain, "--workload", "biggan", "--synthetic", "--epochs", "2", "--max-steps", "2",
                               "--batch-size", "8", "--eval-samples", "32", "--sample-every", "1", "--device", "cpu",
                               "--backend", "mpi", "--progress", "off", "--log-dir", str(logs)])
    run_dir = next(logs.iterdir())
    log = records(run_dir)
    n = next(r["train_samples"] for r in log if r["event"] == "run_start")
    expected = {r["epoch"] * n: Path(r["paths"][0]).read_bytes() for r in log if r["event"] == "samples"}
    images = load(run_dir / "tensorboard").Images("samples/grid")
    got = {i.step: i.encoded_image_string for i in images}
    check(len(expected) == 2 and got == expected,
          f"biggan's sample grids in TensorBoard: steps {sorted(got)}, the run log's {sorted(expected)}, "
          f"equal bytes: {[got.get(s) == b for s, b in expected.items()]}")
    check(all(i.width > 0 and i.height > 0 for i in images), "image sizes")
    print(f"tensorboard_test: biggan: {len(got)} sample grids in TensorBoard, equal to the PNG files: {got == expected}")


def check_report(run_dir, root):
    """A study of the run's tensorboard/ alone, as a bucket of TensorBoard logs holds it."""
    study = root / "tb-study"
    shutil.copytree(run_dir / "tensorboard", study / "n2-rep1" / "tensorboard")
    out = root / "tb-report"
    env = dict(os.environ, DTRAIN_REPORT_PYTHON=sys.executable)
    proc = subprocess.run([str(ROOT / "report" / "dtrain-report"), str(study), "--out", str(out)], env=env,
                          capture_output=True, text=True)
    if not check(proc.returncode == 0, f"dtrain-report on TensorBoard files: exit {proc.returncode}: {proc.stderr}"):
        return
    read = lambda name: list(csv.DictReader(open(out / name, newline="")))  # noqa: E731
    runs = read("runs.csv")
    check([(r["run"], r["source"], r["nodes"], r["repetition"]) for r in runs] == [("tb-study/n2-rep1", "tensorboard", "2", "1")],
          f"runs.csv of a TensorBoard study: {[(r['run'], r['source'], r['nodes'], r['repetition']) for r in runs]}")
    log = records(run_dir)
    compared = 0
    epochs = {int(r["epoch"]): r for r in read("epochs.csv")}
    ends = [r for r in log if r["event"] == "epoch_end"]
    check(sorted(epochs) == [r["epoch"] for r in ends], f"epochs.csv epochs {sorted(epochs)}")
    for end in ends:
        row = epochs.get(end["epoch"], {})
        for key in ["train_loss", "test_accuracy", "test_loss", "epoch_s", "train_s", "samples_per_s", "tflops_achieved",
                    "comm_s", "exposed_comm_s"]:
            compared += 1
            check(key in row and float(row[key]) == float(np.float32(end[key])),
                  f"epochs.csv epoch {end['epoch']} {key}: {row.get(key)}, the run log's {end[key]}")
    samples = {(int(r["rank"]), int(r["unix_time_ms"])): r for r in read("samples.csv")}
    logged = [r for r in log if r["event"] == "sample"]
    check(len(samples) == len(logged), f"samples.csv has {len(samples)} samples, the run log {len(logged)}")
    for r in logged:
        row = samples.get((r["rank"], r["unix_time_ms"]), {})
        for key in ["cpu_percent", "rss_bytes"]:
            compared += 1
            check(key in row and float(row[key]) == float(np.float32(r[key])),
                  f"samples.csv rank {r['rank']} at {r['unix_time_ms']}: {key} {row.get(key)}, the run log's {r[key]}")
    print(f"tensorboard_test: dtrain-report on the TensorBoard files alone: {len(epochs)} epochs, {len(samples)} "
          f"samples, {compared} values compared with the run log")


def check_off(dtrain, mpiexec, flags, root):
    """--tensorboard=false: no tensorboard/ and no mention of it."""
    logs = root / "off"
    proc = launch(mpiexec, flags, 1, [dtrain, "--workload", "mnist", "--synthetic", "--epochs", "1", "--max-steps", "2",
                                      "--eval-samples", "100", "--device", "cpu", "--backend", "mpi", "--progress",
                                      "off", "--tensorboard=false", "--log-dir", str(logs)])
    if proc.returncode != 0:
        return
    run_dir = next(logs.iterdir())
    check(not (run_dir / "tensorboard").exists() and "tensorboard/" not in proc.stdout,
          f"--tensorboard=false: {sorted(p.name for p in run_dir.iterdir())}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_dashboard(run_dir, ranks, shots):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(run_dir / "tensorboard"),
                               "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "data/runs", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    check(False, f"TensorBoard did not serve {url}")
                    return
                time.sleep(0.5)
        # The charts each group should have: dtrain's tags, from the files (the reader test above
        # checked them against the run log).
        groups = {}
        for directory in [run_dir / "tensorboard", *[run_dir / "tensorboard" / f"rank{r}" for r in range(ranks)]]:
            for tag in load(directory).Tags()["scalars"]:
                groups.setdefault(tag.split("/")[0], set()).add(tag)
        with browser() as driver:
            driver.get(url + "#timeseries")
            text = ""
            listed = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                text = driver.execute_script("return document.body.innerText")
                # A group's header reads "epoch14 cards" in the page's text.
                listed = {g: int(c) for g, c in re.findall(r"^([a-z_]+)\s*(\d+) cards?$", text, re.M)}
                # The group headers come first, the cards' titles a moment later (on a loaded machine,
                # seconds later): wait for both.
                if listed.keys() >= groups.keys() and "epoch\n/busbw_gbps" in text:
                    break
                time.sleep(1)
            expected = {g: len(tags) for g, tags in groups.items()}
            check({g: listed.get(g) for g in expected} == expected,
                  f"TensorBoard's dashboard lists groups {listed}, expected {expected}")
            runs = [".", *[f"rank{r}" for r in range(ranks)]]  # TensorBoard names the logdir itself "."
            shown_runs = [r for r in runs if re.search(rf"^{re.escape(r)}$", text, re.M)]
            check(shown_runs == runs, f"TensorBoard's dashboard lists runs {shown_runs}, expected {runs}")
            # The first group's charts are drawn (card titles read "epoch\n/busbw_gbps"); a chart of the
            # ranks' resources is found through the dashboard's tag filter, as a user looks one up.
            check("epoch\n/busbw_gbps" in text, "TensorBoard's dashboard draws no chart of epoch/busbw_gbps")
            drawn = screenshot(driver, str(shots / "tensorboard-timeseries.png"), full_page=False)
            driver.find_element(By.CSS_SELECTOR, "input[placeholder^='Filter tags']").send_keys("cpu_percent")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                text = driver.execute_script("return document.body.innerText")
                if "resources\n/cpu_percent" in text:
                    break
                time.sleep(1)
            check("resources\n/cpu_percent" in text and all(f"\nrank{r}\n" in text for r in range(ranks)),
                  "TensorBoard's tag filter finds no chart of resources/cpu_percent with every rank")
            screenshot(driver, str(shots / "tensorboard-cpu-percent.png"), full_page=False)
            check(drawn > 0.1, f"TensorBoard's dashboard: only {drawn:.1%} of the page differs from its background")
            print(f"tensorboard_test: TensorBoard's dashboard lists {listed} and runs {shown_runs}; "
                  f"screenshot {shots / 'tensorboard-timeseries.png'}")
    finally:
        server.terminate()
        server.wait(timeout=30)


def main():
    dtrain, mpiexec = sys.argv[1], sys.argv[2]
    flags = sys.argv[3].split() if len(sys.argv) > 3 and sys.argv[3] else []
    allow_root_mpi()
    with tempfile.TemporaryDirectory(prefix="dtrain-tensorboard-") as tmp:
        root = Path(tmp)
        shots = Path(os.environ.get("DTRAIN_SCREENSHOT_DIR", root))
        shots.mkdir(parents=True, exist_ok=True)
        logs = root / "logs"
        common = [dtrain, "--workload", "mnist", "--max-steps", "40", "--log-interval", "10", "--eval-samples", "2000",
                  "--sample-interval-s", "0.25", "--device", "cpu", "--backend", "mpi", "--progress", "off",
                  "--log-dir", str(logs), "--run-name", "mnist"]
        launch(mpiexec, flags, 2, [*common, "--epochs", "2"])
        launch(mpiexec, flags, 2, [*common, "--epochs", "3", "--resume"])
        if failures:
            return
        check_run(logs / "mnist", 2)
        check_report(logs / "mnist", root)
        check_gan(dtrain, mpiexec, flags, root)
        check_off(dtrain, mpiexec, flags, root)
        check_dashboard(logs / "mnist", 2, shots)


main()
print(f"tensorboard_test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
