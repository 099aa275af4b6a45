"""The report's tables: one row per run, per epoch, per resource sample and per profiled operation."""

import math
import re

import pandas as pd
import yaml

from .model import FLOOR_COLUMNS, runtime_comparison, scaling_model, weak_scaling
from .runs import labels_from_path

# Labels every row carries, in this order; a study may add its own (they follow these).
LABELS = ["platform", "nodes", "ranks", "gpus_per_node", "accelerator", "repetition"]

# The epoch figures every epochs.csv row has, in this order; the workload's own metrics (train_<metric>,
# test_<metric>: train_loss, test_accuracy for classifiers, train_d_loss for a GAN) follow them.
EPOCH_FIELDS = ["epoch", "lr", "train_loss", "test_accuracy", "test_loss", "epoch_s", "train_s", "eval_s",
                "samples_per_s", "steps", "skipped_steps", "bad_samples", "flops_per_sample", "tflops_achieved",
                "mfu", "comm_s", "exposed_comm_s", "comm_wait_cpu_s", "bytes_allreduced_per_step", "algbw_gbps", "busbw_gbps",
                "net_tx_bytes_per_step", "net_rx_bytes_per_step"]
METRIC_FIELD = re.compile(r"^(train|test)_[a-z][a-z0-9_]*$")
# Fields METRIC_FIELD matches that are an epoch's times and counts, not a workload's metric.
NOT_METRICS = {"train_s", "train_samples", "test_samples", "train_correct", "test_correct"}


def is_metric(field):
    """Whether an epoch field is one of the workload's metrics (train_loss, test_d_accuracy, ...)."""
    return bool(METRIC_FIELD.match(field)) and field not in NOT_METRICS
SAMPLE_FIELDS = ["cpu_percent", "rss_bytes", "host_mem_used_bytes", "gpu_util_percent", "gpu_mem_used_bytes",
                 "gpu_mem_bw_util_percent", "gpu_power_w", "gpu_sm_clock_mhz", "net_rx_bytes", "net_tx_bytes"]
# Every run-log field the report reads, per record kind (besides `event`): its tests check that dtrain's
# schema (runtime/log/run_log.schema.json) declares each, so a renamed field fails there, not silently here.
READS = {
    "run_start": ["runtime", "workload", "world_size", "hosts", "rank_hosts", "device", "backend", "accelerator",
                  "config"],
    # and every field METRIC_FIELD matches, which these two stand for
    "epoch_end": EPOCH_FIELDS + ["train_d_loss", "test_d_loss", "exposed_comm_s_by_rank", "comm_wait_cpu_s_by_rank",
                                 "straggler_by_rank"],
    "run_end": ["total_s", "final_test_accuracy", "final_test_loss", "peak_rss_bytes"],
    "sample": ["rank", "unix_time_ms"] + SAMPLE_FIELDS,
    "profile": ["rank", "first_step", "last_step", "cuda", "table"],
}


def number(value):
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def run_config(run):
    """The effective configuration dtrain logged at the run's start, as a nested mapping."""
    if not run.run_start or not run.run_start.get("config"):
        return {}
    try:
        config = yaml.safe_load(run.run_start["config"])
    except yaml.YAMLError:
        run.warnings.append(f"{run.run_id}: the run_start record's config is not YAML")
        return {}
    if not isinstance(config, dict):
        return {}
    layouts = run.run_start.get("gradient_buckets")
    if isinstance(layouts, list) and layouts and isinstance(layouts[0], dict) and isinstance(config.get("comm"), dict):
        # The buckets the reducer cut (the first trained module's), whether from comm.bucket_mb or from the
        # network probe: the scaling model sends these rather than cutting its own.
        sizes = [number(b) for b in layouts[0].get("bucket_bytes") or []]
        if sizes and all(b >= 0 for b in sizes):
            config["comm"]["bucket_layout"] = sizes
    return config


def resolve_labels(runs):
    """Fills each run's labels: its labels.yaml, else what the run log says (the world size standing in
    for nodes), else the directory names; repetitions are numbered in path order where none is given."""
    counters = {}
    for run in runs:
        labels = dict(run.labels)
        start = run.run_start or run.console
        from_path = labels_from_path(run.rel)
        labels.setdefault("platform", run.study)
        if "ranks" not in labels and start.get("world_size"):
            labels["ranks"] = start["world_size"]
        if "nodes" not in labels:
            # A run log's world size stands in for nodes (each rank a node, as in a local study); for a
            # launcher output alone, a size in the directory names is what the study's author meant.
            sizes = [start.get("world_size"), from_path.get("nodes")]
            labels["nodes"] = next((n for n in (sizes if run.run_start else sizes[::-1]) if n), math.nan)
        if "accelerator" not in labels:
            labels["accelerator"] = start.get("accelerator") or start.get("device") or "unknown"
        if "repetition" not in labels and "repetition" in from_path:
            labels["repetition"] = from_path["repetition"]
        if "repetition" not in labels:
            key = (labels["platform"], labels["nodes"], labels["accelerator"])
            counters[key] = counters.get(key, 0) + 1
            labels["repetition"] = counters[key]
        run.labels = labels


def label_columns(runs):
    extra = sorted({k for r in runs for k in r.labels} - set(LABELS))
    return LABELS + extra


def missing(value):
    return value is None or value == "" or value == "unknown" or (isinstance(value, float) and math.isnan(value))


def run_row(run, columns):
    """Labels, then what the run's files say. A label named like one of those ("workload", "hosts") fills
    it where the files do not tell, and otherwise keeps a column of its own (label_<name>) if it differs."""
    computed = computed_columns(run)
    labels = {}
    for c in columns:
        value = run.labels.get(c, math.nan)
        if c not in computed:
            labels[c] = value
        elif missing(computed[c]):
            computed[c] = value
        elif not missing(value) and str(value) != str(computed[c]):
            labels["label_" + c] = value
    return {"study": computed.pop("study"), "run": computed.pop("run"), **labels, **computed}


def computed_columns(run):
    row = {"study": run.study, "run": run.run_id}
    start, end = run.run_start or {}, run.run_end or {}
    console = run.console  # dtrain's first console line, for runs known from their launcher output only
    config = run_config(run)
    train = config.get("train", {}) if isinstance(config.get("train"), dict) else {}
    # dtrain, or the peer a study ran beside it (bench/peer/mnist_ddp.py writes "pytorch-ddp").
    row["runtime"] = start.get("runtime") or "dtrain"
    row["workload"] = start.get("workload") or config.get("workload") or console.get("workload") or "unknown"
    row["world_size"] = start.get("world_size", console.get("world_size", math.nan))
    row["hosts"] = len(start["hosts"]) if isinstance(start.get("hosts"), list) else console.get("hosts", math.nan)
    row["device"] = start.get("device", console.get("device", ""))
    row["backend"] = start.get("backend", console.get("backend", ""))
    row["precision"] = train.get("precision", "")
    row["batch_size"] = number(train.get("batch_size"))
    row["global_batch"] = row["batch_size"] * number(row["world_size"])
    stopped = f"stopped by {run.stops[-1].get('signal')}" if run.stops else "unknown"
    row["result"] = run.result.get("result") or ("failed" if run.errors else ("succeeded" if end else stopped))
    row["exit_code"] = number(run.result.get("exit_code"))
    # Wall time as the studies measure it: bash time's `real` of the launch, else the runner's clock,
    # else dtrain's own total.
    row["real_s"] = run.real_s
    row["total_s"] = number(end.get("total_s", run.console_total_s))
    row["wall_s"] = next((v for v in (run.real_s, number(run.result.get("wall_s")), row["total_s"])
                          if not math.isnan(v)), math.nan)
    epochs = pd.DataFrame(run.epochs)
    row["epochs"] = len(run.epochs) if run.epochs else len(run.katib)
    mean = lambda name: float(epochs[name].astype(float).mean()) if name in epochs else math.nan  # noqa: E731
    row["train_s"] = float(epochs["train_s"].sum()) if "train_s" in epochs else math.nan
    row["samples_per_s"] = mean("samples_per_s")
    row["tflops_achieved"] = mean("tflops_achieved")
    row["tflops_per_device"] = row["tflops_achieved"] / number(row["world_size"])
    row["mfu"] = mean("mfu")
    row["bytes_allreduced_per_step"] = mean("bytes_allreduced_per_step")
    row["net_tx_bytes_per_step"] = mean("net_tx_bytes_per_step")
    row["comm_s"] = float(epochs["comm_s"].sum()) if "comm_s" in epochs else math.nan
    row["exposed_comm_s"] = float(epochs["exposed_comm_s"].sum()) if "exposed_comm_s" in epochs else math.nan
    row["comm_wait_cpu_s"] = float(epochs["comm_wait_cpu_s"].sum()) if "comm_wait_cpu_s" in epochs else math.nan
    scores = [s for e in run.epochs for s in [e.get("straggler_by_rank")] if isinstance(s, list) and s]
    # The rank the others waited for most, over the run's epochs, and its mean score.
    if scores and len({len(s) for s in scores}) == 1:
        mean_scores = [sum(s[r] for s in scores) / len(scores) for r in range(len(scores[0]))]
        row["straggler_rank"] = max(range(len(mean_scores)), key=mean_scores.__getitem__)
        row["straggler_score"] = mean_scores[row["straggler_rank"]]
    else:
        row["straggler_rank"], row["straggler_score"] = math.nan, math.nan
    last_katib = run.katib[-1] if run.katib else {}
    row["final_test_accuracy"] = number(end.get("final_test_accuracy", last_katib.get("accuracy")))
    row["final_test_loss"] = number(end.get("final_test_loss", last_katib.get("loss")))
    row["final_train_loss"] = number(run.epochs[-1].get("train_loss")) if run.epochs else math.nan
    samples = pd.DataFrame(run.samples)
    peak = lambda name: float(samples[name].astype(float).max()) if name in samples else math.nan  # noqa: E731
    row["mean_cpu_percent"] = float(samples["cpu_percent"].astype(float).mean()) if "cpu_percent" in samples else math.nan
    row["peak_cpu_percent"] = peak("cpu_percent")
    peaks = end.get("peak_rss_bytes")
    row["peak_rss_bytes"] = float(max(peaks)) if isinstance(peaks, list) and peaks else peak("rss_bytes")
    row["peak_host_mem_used_bytes"] = peak("host_mem_used_bytes")
    row["peak_gpu_util_percent"] = peak("gpu_util_percent")
    row["peak_gpu_mem_used_bytes"] = peak("gpu_mem_used_bytes")
    row["peak_gpu_mem_bw_util_percent"] = peak("gpu_mem_bw_util_percent")
    row["peak_gpu_power_w"] = peak("gpu_power_w")
    row["source"] = "tensorboard" if run.tensorboard else ("run log" if run.run_start or run.epochs else "launcher output")
    row["path"] = str(run.path)
    return row


def rank_figures(run, epoch, key):
    """One row per rank of an epoch record that carries the ranks' waits (2 or more ranks)."""
    scores = epoch.get("straggler_by_rank")
    if not isinstance(scores, list):
        return []
    hosts = (run.run_start or {}).get("rank_hosts") or []
    waits = epoch.get("exposed_comm_s_by_rank") or []
    cpu = epoch.get("comm_wait_cpu_s_by_rank") or []
    at = lambda values, r: number(values[r]) if r < len(values) else math.nan  # noqa: E731
    return [{**key, "epoch": epoch.get("epoch"), "rank": r, "host": hosts[r] if r < len(hosts) else "",
             "exposed_comm_s": at(waits, r), "comm_wait_cpu_s": at(cpu, r), "straggler": at(scores, r)}
            for r in range(len(scores))]


def build_tables(runs, sweeps=None, floors=None, solos=None):
    """runs, epochs, samples and ops DataFrames of all runs (empty frames where nothing was recorded), the
    weak-scaling table, the scaling model's table where `sweeps` (model.find_sweeps) calibrate a
    platform's network (and `solos`, model.find_solos, its compute floor), dtrain beside its peers, the
    ranks' waits, and the emulator's floor (`floors`, model.find_floors)."""
    resolve_labels(runs)
    columns = label_columns(runs)
    runs_df = pd.DataFrame([run_row(r, columns) for r in runs])
    # A label may be named like a run figure (a study labels its runs with their workload): one column each.
    key_columns = list(dict.fromkeys(["run", *columns, "runtime", "workload"]))
    keys = runs_df.set_index("run")[[c for c in key_columns if c != "run"]].to_dict("index") if len(runs_df) else {}

    metrics = [f for f in dict.fromkeys(k for r in runs for e in r.epochs for k in e)
               if METRIC_FIELD.match(f) and f not in EPOCH_FIELDS]
    epoch_rows, sample_rows, op_rows, rank_rows = [], [], [], []
    for run in runs:
        key = {"run": run.run_id, **keys[run.run_id]}
        if run.epochs:
            for e in run.epochs:
                epoch_rows.append({**key, **{f: e.get(f, math.nan) for f in EPOCH_FIELDS + metrics}})
                rank_rows += rank_figures(run, e, key)
        else:
            for i, k in enumerate(run.katib, start=1):  # launcher output only: the Katib lines, one per epoch
                epoch_rows.append({**key, "epoch": i, "test_accuracy": k.get("accuracy", math.nan),
                                   "test_loss": k.get("loss", math.nan)})
        if run.samples:
            t0 = min(s.get("unix_time_ms", 0) for s in run.samples)
            for s in run.samples:
                sample_rows.append({**key, "rank": s.get("rank"), "unix_time_ms": s.get("unix_time_ms"),
                                    "t_s": (s.get("unix_time_ms", 0) - t0) / 1000.0,
                                    **{f: s.get(f, math.nan) for f in SAMPLE_FIELDS}})
        for p in run.profiles:
            steps = max(1, int(p.get("last_step", 0)) - int(p.get("first_step", 0)) + 1)
            for r in p["table_rows"]:
                op_rows.append({**key, "profile_rank": p.get("rank"), "steps": steps, "name": r.get("name"),
                                "kind": r.get("kind"), "calls": number(r.get("calls")),
                                "self_cpu_us": number(r.get("self_cpu_us")),
                                "total_cpu_us": number(r.get("total_cpu_us")),
                                "self_cuda_us": number(r.get("self_cuda_us")), "cuda_profiled": bool(p.get("cuda"))})
    epochs_df = pd.DataFrame(epoch_rows)
    configs = {r.run_id: run_config(r) for r in runs}
    scaling = weak_scaling(runs_df, epochs_df)
    model = scaling_model(runs_df, epochs_df, configs, sweeps or {}, solos)
    return {
        "runs": runs_df,
        "scaling": scaling,
        "model": model,
        "peer": runtime_comparison(scaling, model),
        "floor": floors if floors is not None else pd.DataFrame(columns=FLOOR_COLUMNS),
        "ranks": pd.DataFrame(rank_rows, columns=[*key_columns, "epoch", "rank", "host", "exposed_comm_s",
                                                  "comm_wait_cpu_s", "straggler"]),
        "epochs": epochs_df,
        "samples": pd.DataFrame(sample_rows),
        "ops": pd.DataFrame(op_rows),
    }
