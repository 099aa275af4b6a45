"""dtrain-report against studies with known values, in each input form it reads:
  A  the runners' layout (labels.yaml, result.yaml, launcher.log, logs/ with events.jsonl and a profile);
  B  a plain dtrain log directory with the launcher output that names it beside it, no labels;
  C  launcher output alone (Katib lines and bash time), in a hand-made size/repetition tree.
Checks every CSV value that comes from those inputs, that each PNG is a valid image and that index.html
shows them. Usage: report_test.py REPORT_COMMAND"""

import csv
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def event(kind, **fields):
    return json.dumps({"event": kind, "time": "2026-01-01T00:00:00Z", **fields})


CONFIG = "workload: cifar10\ntrain:\n  batch_size: 32\n  precision: bf16\n"


def write_run_log(run_dir, world_size, epochs, samples, accelerator="NVIDIA H100 80GB HBM3", profile=None):
    run_dir.mkdir(parents=True)
    lines = [event("run_start", workload="cifar10", world_size=world_size, hosts=[f"h{i}" for i in range(world_size)],
                   backend="nccl", device="cuda", accelerator=accelerator, peak_tflops=989.4, config=CONFIG)]
    lines += [event("epoch_end", **e) for e in epochs]
    lines += [event("sample", **s) for s in samples]
    if profile:
        lines.append(event("profile", rank=0, first_step=11, last_step=12, kineto=True, cuda=True, events=10,
                           trace=f"elsewhere/{run_dir.name}/profile-rank0.trace.json",
                           table=f"elsewhere/{run_dir.name}/profile-rank0-ops.csv"))
        (run_dir / "profile-rank0-ops.csv").write_text(profile)
    lines.append(event("run_end", epochs_run=len(epochs), total_s=50.0, final_test_accuracy=epochs[-1]["test_accuracy"],
                       final_test_loss=epochs[-1]["test_loss"], peak_rss_bytes=[1000, 3000][:world_size]))
    lines.append("{truncated")  # a run killed mid-write leaves half a line
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")


def epoch(n, acc, loss, sps, tflops, bytes_per_step):
    return {"epoch": n, "train_loss": loss + 0.1, "test_accuracy": acc, "test_loss": loss, "epoch_s": 10.0,
            "train_s": 9.0, "samples_per_s": sps, "tflops_achieved": tflops, "mfu": tflops / 989.4 / 2,
            "bytes_allreduced_per_step": bytes_per_step, "net_tx_bytes_per_step": 2 * bytes_per_step}


def sample(rank, ms, util, mem):
    return {"rank": rank, "unix_time_ms": ms, "cpu_percent": 100.0, "rss_bytes": 10 ** 9, "host_mem_used_bytes": 2 * 10 ** 9,
            "gpu_util_percent": util, "gpu_mem_used_bytes": mem, "gpu_mem_bw_util_percent": 30.0, "gpu_power_w": 300.0,
            "net_rx_bytes": ms * 1000, "net_tx_bytes": ms * 1000}


def build_studies(root):
    # A: two repetitions at 2 nodes on "gke"; the second profiled.
    a = root / "study-gke"
    for rep, real in ((1, "1m2.500s"), (2, "1m4.500s")):
        run = a / f"n02-r{rep}"
        run.mkdir(parents=True)
        (run / "labels.yaml").write_text(
            f'platform: "gke"\nnodes: 2\nranks: 2\ngpus_per_node: 1\naccelerator: "nvidia-h100-80gb"\n'
            f"repetition: {rep}\nzone: us-central1-a\n")
        (run / "result.yaml").write_text('result: "succeeded"\nexit_code: 0\nwall_s: 70.0\n')
        (run / "launcher.log").write_text(
            "{metricName: accuracy, metricValue: 0.5};{metricName: loss, metricValue: 1.5}\n"
            f"\nreal\t{real}\nuser\t0m1.000s\nsys\t0m0.100s\n")
        profile = None
        if rep == 2:
            profile = ("name,kind,calls,self_cpu_us,total_cpu_us,self_cuda_us\n"
                       "aten::convolution_backward,op,40,800.000,900.000,6000.000\n"
                       "\"void f<int, 2>\",kernel,4,0.000,0.000,1000.000\n")
        write_run_log(run / "logs" / "20260101T000000Z-cifar10", 2,
                      [epoch(1, 0.40, 1.60, 1000.0, 20.0, 1e6), epoch(2, 0.60, 1.20, 3000.0, 40.0, 3e6)],
                      [sample(0, 1000, 50.0, 4e9), sample(0, 2000, 97.0, 5e9), sample(1, 1000, 60.0, 6e9)],
                      profile=profile)
    # B: a dtrain log directory and the launcher's stdout beside it; world size 4 stands in for nodes.
    b = root / "plain"
    write_run_log(b / "20260102T000000Z-cifar10", 4, [epoch(1, 0.70, 0.90, 8000.0, 80.0, 2e6)],
                  [sample(r, 1000, 10.0 * (r + 1), 1e9) for r in range(4)])
    (b / "job-17.out").write_text("run log: dtrain-logs/20260102T000000Z-cifar10/events.jsonl\nreal\t0m30.250s\n")
    # C: launcher output only, as the earlier hand-made analyses had it: size 8, repetition 2.
    c = root / "katib-only" / "8" / "rep2"
    c.mkdir(parents=True)
    (c / "launcher.log").write_text(
        "2026-01-01T00:00:00Z INFO     {metricName: accuracy, metricValue: 0.8101};{metricName: loss, metricValue: 0.5212}\n"
        "2026-01-01T00:00:09Z INFO     {metricName: accuracy, metricValue: 0.8500};{metricName: loss, metricValue: 0.4100}\n"
        "real\t2m0.000s\n")
    (root / "katib-only" / "notes.txt").write_text("nothing to see\n")  # no Katib or time lines: no run
    return [a, b, root / "katib-only"]


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def close(a, b, tol=1e-9):
    return abs(float(a) - float(b)) <= tol * max(1.0, abs(float(b)))


def main():
    report = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        studies = build_studies(root)
        out = root / "report"
        proc = subprocess.run(report + [str(s) for s in studies] + ["--out", str(out)], capture_output=True, text=True)
        check(proc.returncode == 0, f"dtrain-report exited {proc.returncode}: {proc.stderr}")
        check("line(s) are not JSON and were skipped" in proc.stderr, "the truncated line is reported: " + proc.stderr)
        runs = {r["run"]: r for r in rows(out / "runs.csv")}
        check(sorted(runs) == ["katib-only/8/rep2/launcher.log", "plain/20260102T000000Z-cifar10",
                               "study-gke/n02-r1", "study-gke/n02-r2"], f"runs found: {sorted(runs)}")
        if failures:
            return
        a1, a2 = runs["study-gke/n02-r1"], runs["study-gke/n02-r2"]
        check(a1["platform"] == "gke" and a1["nodes"] == "2" and a1["accelerator"] == "nvidia-h100-80gb", f"A labels {a1}")
        check(a1["zone"] == "us-central1-a", "a study's own labels become columns")
        check(close(a1["wall_s"], 62.5) and close(a2["wall_s"], 64.5), "wall time is bash time's real")
        check(close(a1["samples_per_s"], 2000.0), "samples/s is the mean over epochs")
        check(close(a1["tflops_achieved"], 30.0) and close(a1["tflops_per_device"], 15.0), "TFLOP/s mean and per device")
        check(close(a1["bytes_allreduced_per_step"], 2e6) and close(a1["net_tx_bytes_per_step"], 4e6), "bytes per step")
        check(close(a1["peak_gpu_util_percent"], 97.0) and close(a1["peak_gpu_mem_used_bytes"], 6e9), "GPU peaks")
        check(close(a1["peak_rss_bytes"], 3000), "peak RSS from run_end")
        check(close(a1["final_test_accuracy"], 0.6) and close(a1["final_test_loss"], 1.2), "final metrics from the run log")
        check(a1["workload"] == "cifar10" and a1["batch_size"] in ("32", "32.0") and close(a1["global_batch"], 64),
              "workload and batch from the logged config")
        check(a1["precision"] == "bf16" and a1["result"] == "succeeded" and close(a1["train_s"], 18.0), "precision, result, train_s")

        b = runs["plain/20260102T000000Z-cifar10"]
        check(b["platform"] == "plain" and b["nodes"] == "4", f"unlabelled run: platform {b['platform']}, nodes {b['nodes']}")
        check(close(b["wall_s"], 30.25), "the launcher output beside a log directory gives its wall time")
        check(b["accelerator"] == "NVIDIA H100 80GB HBM3", "accelerator from the run log")
        check(close(b["peak_gpu_util_percent"], 40.0), "peak over all ranks' samples")

        c = runs["katib-only/8/rep2/launcher.log"]
        check(c["nodes"] == "8" and c["repetition"] == "2", f"size and repetition from the path: {c['nodes']}, {c['repetition']}")
        check(close(c["wall_s"], 120.0) and close(c["final_test_accuracy"], 0.85) and close(c["final_test_loss"], 0.41),
              "a launcher output alone gives time and final metrics")
        check(c["source"] == "launcher output" and c["epochs"] == "2", "Katib lines count as epochs")

        epochs = rows(out / "epochs.csv")
        check(len(epochs) == 2 + 2 + 1 + 2, f"epochs.csv has {len(epochs)} rows")
        katib = [e for e in epochs if e["run"].startswith("katib-only")]
        check([e["test_accuracy"] for e in katib] == ["0.8101", "0.85"], f"Katib epochs {katib}")
        samples = rows(out / "samples.csv")
        check(len(samples) == 3 + 3 + 4, f"samples.csv has {len(samples)} rows")
        check(all(float(s["t_s"]) >= 0 for s in samples), "sample times start at 0 per run")
        ops = rows(out / "ops.csv")
        check(len(ops) == 2 and ops[0]["name"] == "aten::convolution_backward" and ops[0]["steps"] == "2" and
              ops[1]["name"] == "void f<int, 2>", f"ops.csv {ops}")

        pngs = sorted(out.rglob("*.png"))
        names = sorted(p.relative_to(out).as_posix() for p in pngs)
        expected = ["bytes_vs_batch.png", "epochs.png", "resources/plain_20260102T000000Z-cifar10.png",
                    "resources/study-gke_n02-r1.png", "resources/study-gke_n02-r2.png", "tflops.png",
                    "time_vs_nodes.png", "top_ops.png"]
        check(names == expected, f"plots {names}")
        index = (out / "index.html").read_text()
        for p in pngs:
            try:
                with Image.open(p) as image:
                    image.verify()
                with Image.open(p) as image:
                    check(image.format == "PNG" and image.size[0] > 300 and image.size[1] > 200, f"{p.name}: {image.size}")
            except Exception as e:  # noqa: BLE001 - any decoding failure is the finding
                check(False, f"{p} is not a valid PNG: {e}")
            check(p.relative_to(out).as_posix() in index, f"index.html does not show {p.name}")

        # No runs at all: a clear error, exit 3.
        empty = root / "empty"
        empty.mkdir()
        proc = subprocess.run(report + [str(empty), "--out", str(root / "r2")], capture_output=True, text=True)
        check(proc.returncode == 3 and "no runs found" in proc.stderr, f"empty study: {proc.returncode} {proc.stderr}")
        proc = subprocess.run(report + [str(root / "missing"), "--out", str(root / "r3")], capture_output=True, text=True)
        check(proc.returncode == 2 and "does not exist" in proc.stderr, f"missing study: {proc.returncode} {proc.stderr}")


main()
print(f"report_test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
