#!/usr/bin/python3
"""Checks a dtrain run's console output and JSON-lines run log against the formats that downstream
analysis tools parse: the console lines with the patterns of runtime/log/console_lines.json, the run log
with runtime/log/run_log.schema.json (both through dtrain-report's formats module), plus what these runs
must hold (the mnist network's FLOPs and gradient bytes, samples of every rank).
Usage: check_run_output.py OUTPUT_FILE LOG_DIR EPOCHS FORMAT [--require-samples]"""
import glob
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "report"))
from dtrain_report import formats  # noqa: E402

KATIB = formats.console_line("katib_metrics")
KATIB_METRIC = formats.console_line("katib_metric")
KATIB_PROGRESS = formats.console_line("katib_progress")
PYTORCH_PROGRESS = formats.console_line("pytorch_progress")
PYTORCH_TEST = formats.console_line("pytorch_test")
EPOCH_KEYS = {"epoch", "train_loss", "test_loss", "test_accuracy", "epoch_s", "samples_per_s", "comm_s",
              "exposed_comm_s", "bytes_allreduced", "flops_per_sample", "tflops_achieved"}
# The mnist network's training FLOPs per sample as the counter sees them: convolutions 0.39 M + 21.2 M and
# fully connected layers 2.36 M + 2.6 k forward; backward the same again for every weight gradient and
# for every input gradient but the first layer's (its input needs none).
MNIST_FLOPS_PER_SAMPLE = 71_565_312
# Its 1,199,882 float parameters: the gradient bytes every step averages across ranks.
MNIST_GRADIENT_BYTES = 4 * 1_199_882


def fail(message):
    print("check_run_output: " + message)
    sys.exit(1)


SAMPLE_KEYS = {"time", "unix_time_ms", "rank", "cpu_percent", "rss_bytes", "host_mem_used_bytes", "net_rx_bytes",
               "net_tx_bytes"}


def check_samples(samples, world_size):
    """Resource samples of every rank, in time order per rank, with plausible values (no GPU here)."""
    for rank in range(world_size):
        mine = [s for s in samples if s.get("rank") == rank]
        if not mine:
            fail(f"no sample events of rank {rank} (of {len(samples)})")
        for s in mine:
            if SAMPLE_KEYS - set(s) or any(k.startswith("gpu_") for k in s):
                fail(f"sample keys {sorted(s)}")
            if s["rss_bytes"] < 50 << 20 or s["host_mem_used_bytes"] < s["rss_bytes"] or s["cpu_percent"] < 0 or \
                    s["net_rx_bytes"] < 0 or s["net_tx_bytes"] < 0:
                fail(f"implausible sample {s}")
        times = [s["unix_time_ms"] for s in mine]
        if times != sorted(times) or len(set(times)) != len(times):
            fail(f"rank {rank}'s samples are not in time order: {times}")
        if max(s["cpu_percent"] for s in mine) < 20:
            fail(f"rank {rank} trained without using a CPU: {[s['cpu_percent'] for s in mine]}")


def main():
    output_path, log_dir, epochs, fmt = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    require_samples = "--require-samples" in sys.argv[5:]
    text = open(output_path).read()
    for word, why in formats.never_contains().items():
        if word in text:
            fail(f"output contains '{word}' ({why}): " + next(line for line in text.splitlines() if word in line))
    lines = text.splitlines()
    def parsed(pattern):
        return [fields for fields in map(pattern.parse, lines) if fields]

    if fmt == "katib":
        metrics = parsed(KATIB)
        progress = parsed(KATIB_PROGRESS)
        if len(metrics) != epochs:
            fail(f"expected {epochs} Katib metric lines, found {len(metrics)}")
        values = [{p["name"]: p["value"] for p in KATIB_METRIC.parse_all(m["metrics"])} for m in metrics]
        if any(list(v) != ["accuracy", "loss"] for v in values):
            fail(f"Katib lines name {[list(v) for v in values]}, expected accuracy and loss")
        accuracies = [float(v["accuracy"]) for v in values]
    else:
        metrics = parsed(PYTORCH_TEST)
        progress = parsed(PYTORCH_PROGRESS)
        if len(metrics) != epochs:
            fail(f"expected {epochs} 'Test set:' lines, found {len(metrics)}")
        accuracies = [int(m["correct"]) / int(m["samples"]) for m in metrics]
    if not progress:
        fail("no progress lines")
    for p in progress:
        if int(p["samples_done"]) > int(p["samples_total"]):
            fail(f"progress counts more samples than the dataset has: {p}")
    for line in lines:
        if line.startswith("Train Epoch") and not (KATIB_PROGRESS.parse(line) or PYTORCH_PROGRESS.parse(line)):
            fail("malformed progress line: " + repr(line))

    runs = sorted(glob.glob(log_dir + "/*/events.jsonl"))
    if len(runs) != 1:
        fail(f"expected one run log under {log_dir}, found {runs}")
    problems, _ = formats.schema_errors(runs[0])
    if problems:
        fail("run log records that do not match the schema:\n  " + "\n  ".join(problems[:10]))
    events = [json.loads(line) for line in open(runs[0])]
    samples = [e for e in events if e["event"] == "sample"]
    logged = [e for e in events if e["event"] == "train_progress"]
    events = [e for e in events if e["event"] not in ("sample", "train_progress")]
    # One train_progress record per Train Epoch line, with the line's figures.
    if [(str(r["epoch"]), str(r["samples_done"])) for r in logged] != [(p["epoch"], p["samples_done"]) for p in progress]:
        fail(f"{len(logged)} train_progress records for {len(progress)} Train Epoch lines, or other positions")
    kinds = [e["event"] for e in events]
    if kinds != ["run_start"] + ["epoch_end"] * epochs + ["run_end"]:
        fail(f"unexpected event sequence {kinds}")
    start = events[0]
    for key in ("world_size", "hosts", "torch_version", "bootstrap", "launcher", "config", "backend"):
        if key not in start:
            fail("run_start lacks " + key)
    for event, accuracy in zip(events[1:-1], accuracies):
        missing = EPOCH_KEYS - set(event)
        if missing:
            fail(f"epoch_end lacks {sorted(missing)}")
        if event["flops_per_sample"] != MNIST_FLOPS_PER_SAMPLE or \
                abs(event["tflops_achieved"] - event["flops_per_sample"] * event["samples_per_s"] / 1e12) > 1e-9:
            fail(f"epoch_end FLOPs: {event['flops_per_sample']} per sample, {event['tflops_achieved']} TFLOP/s")
        world = start["world_size"]
        gradient_bytes = MNIST_GRADIENT_BYTES // (2 if "compress: bf16" in start["config"] else 1)
        if event.get("bytes_allreduced_per_step") != (gradient_bytes if world > 1 else 0) or \
                abs(event["busbw_gbps"] - event["algbw_gbps"] * 2 * (world - 1) / world) > 1e-9 or \
                event["net_tx_bytes_per_step"] < 0 or event["net_rx_bytes_per_step"] < 0:
            fail("epoch_end communication figures: " + ", ".join(
                f"{k}={event.get(k)}" for k in ("bytes_allreduced_per_step", "algbw_gbps", "busbw_gbps",
                                                "net_tx_bytes_per_step", "net_rx_bytes_per_step")))
        by_rank = [event.get(k) for k in ("exposed_comm_s_by_rank", "comm_wait_cpu_s_by_rank", "straggler_by_rank")]
        if world > 1 and not (all(isinstance(v, list) and len(v) == world for v in by_rank) and
                              event["exposed_comm_s_by_rank"][0] == event["exposed_comm_s"] and
                              event["comm_wait_cpu_s_by_rank"][0] == event["comm_wait_cpu_s"] and
                              min(by_rank[2]) == 0.0 and max(by_rank[2]) <= 1.0 and
                              start.get("rank_hosts") and len(start["rank_hosts"]) == world):
            fail("epoch_end per-rank waits: " + ", ".join(f"{k}={event.get(k)}" for k in (
                "exposed_comm_s", "comm_wait_cpu_s", "exposed_comm_s_by_rank", "comm_wait_cpu_s_by_rank",
                "straggler_by_rank")) + f", rank_hosts={start.get('rank_hosts')}")
        if world == 1 and any(v is not None for v in by_rank):
            fail("a run of one rank has no per-rank waits to compare")
        if abs(event["test_accuracy"] - accuracy) > 0.006:
            fail(f"console accuracy {accuracy} disagrees with the run log's {event['test_accuracy']}")
    if len(events[-1]["peak_rss_bytes"]) != start["world_size"]:
        fail("run_end should carry one peak memory figure per rank")
    if require_samples:
        check_samples(samples, start["world_size"])
    print(f"check_run_output: ok ({epochs} epochs, {len(progress)} progress lines, {runs[0]})")


main()
