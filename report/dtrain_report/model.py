"""A scaling model: the time per training step at each node count, predicted from what the smallest run of
a platform logged and an allreduce sweep of the platform's network, so a study sees how far each size
falls from what its network allows.

Per step, at N nodes (one rank each):

    step(N)    = compute + exposed(N)
    comm(N)    = buckets x 2(N-1) x latency + 2(N-1)/N x gradient_bytes / bandwidth   (ring allreduce)
    exposed(N) = max(0, comm(N) - overlap)

compute is the reference run's step time less its exposed communication (forward, backward, optimizer,
data: what does not change with N in weak scaling), and overlap the part of backward that communication
can hide behind: comm(reference) - its measured exposed communication, so that the model reproduces the
reference and what it says about larger N is a prediction. (Where the reference hid all of its
communication, the window is only known to be at least that long, and the model overstates exposure at
larger N. Where the reference exposed more communication than the sweep predicts for all of it, the
excess stays in compute, as a cost per step carried to every size.) The reference is the platform's smallest size of 2 or more nodes
(the median of its repetitions): a single node does not communicate, so it cannot show what moving the
gradients costs the node's own CPU (the TCP stack, MPI's progress), which on a CPU share is compute
time lost; sizes below the reference are not predicted. latency and bandwidth are a least-squares
fit of t = 2(N-1) x latency + 2(N-1)/N x bytes / bandwidth to the sweep of the fewest nodes (dtrain's own
communicator, what the reducer calls), so the model extrapolates to larger N from a small run and a small
sweep. Buckets are the reference run's own (run_start's gradient_buckets), or where a log lacks them cut from
its comm.bucket_mb and comm.first_bucket_mb as the reducer cuts them.
"""

import json
import math
import statistics
from pathlib import Path

import pandas as pd

MIB = 1024.0 * 1024.0
MODEL_COLUMNS = ["platform", "runtime", "workload", "nodes", "runs", "measured_step_s", "measured_min_step_s",
                 "measured_max_step_s", "predicted_step_s", "measured_over_predicted", "compute_s",
                 "measured_exposed_comm_s", "predicted_exposed_comm_s", "predicted_comm_s", "gradient_bytes",
                 "buckets", "latency_us", "bandwidth_gbps", "reference_nodes", "contention", "calibration"]


def bench_files(study_dirs, pattern, bench):
    """(platform, path, contents) of every JSON file named `pattern` under the study directories whose
    "bench" key is `bench`; the platform is the file's "platform" key, else its study directory's name."""
    for study in study_dirs:
        for path in sorted(Path(study).rglob(pattern)):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("bench") == bench:
                yield str(data.get("platform") or Path(study).resolve().name), path, data


def find_sweeps(study_dirs):
    """Every allreduce sweep (dtrain_allreduce_bench --json) under the study directories, by platform: the
    study's `calibration/` directory holds them, with the platform in the sweep's `platform` key (the
    cluster study runner writes it); a sweep without one calibrates the runs of its own study directory,
    under the directory's name."""
    sweeps = {}
    for platform, path, sweep in bench_files(study_dirs, "*.json", "allreduce"):
        if sweep.get("results"):
            sweeps.setdefault(platform, []).append({**sweep, "path": str(path)})
    return sweeps


FLOOR_COLUMNS = ["platform", "link_gbps", "link_node_cpu_s_per_gb", "host_stack_cpu_s_per_gb",
                 "floor_node_cpu_s_per_gb", "link_softirq_s_per_gb", "floor_softirq_s_per_gb", "path"]


def find_floors(study_dirs):
    """The emulator's own cost per platform (deploy/local/emulator_floor.py --json, calibration/floor.json
    in a cluster study), as a table: what moving a GB costs two nodes across the emulated link, what it
    costs inside one node (the host's TCP stack alone), the difference charged to the nodes, and the
    host's softirq time no node pays for."""
    rows = [{**{c: floor.get(c, math.nan) for c in FLOOR_COLUMNS}, "platform": platform, "path": str(path)}
            for platform, path, floor in bench_files(study_dirs, "floor.json", "emulator_floor")]
    return pd.DataFrame(rows, columns=FLOOR_COLUMNS)


def find_solos(study_dirs):
    """The emulated cluster's compute floor: {(platform, runtime, nodes): the slowest node's time per step}
    in runs where every node trained alone at once, with no communication (run_cluster_study.sh --floor
    writes calibration/solo-nNN-RUNTIME.json). Their ratio to the reference size's is what sharing the machine
    costs a node's compute as nodes are added, which a real cluster's nodes do not pay."""
    solos = {}
    for platform, _, solo in bench_files(study_dirs, "solo-*.json", "solo_compute"):
        if not solo.get("step_s"):
            continue
        key = (platform, str(solo.get("runtime", "dtrain")), int(solo["nodes"]))
        # A synchronous step goes at its slowest node's pace: a node the others' load slows (the host's
        # own work takes some nodes' share) slows every step of the job.
        solos.setdefault(key, []).append(max(float(s) for s in solo["step_s"]))
    # Over a study's repetitions, the median of those.
    return {k: statistics.median(v) for k, v in solos.items()}


def fit_network(sweep):
    """(latency_s, bandwidth_bytes_per_s) of the ring model fitted to one sweep's dtrain times, least
    squares in the two unknowns; None where the sweep cannot determine them (one rank, one size)."""
    n = int(sweep["world_size"])
    if n < 2:
        return None
    xs = [(2 * (n - 1), 2 * (n - 1) / n * r["bytes"], r["dtrain_us"] * 1e-6) for r in sweep["results"]]
    if len(xs) < 2:
        return None
    # Normal equations for t = a x latency + b x (1 / bandwidth).
    saa = sum(a * a for a, _, _ in xs)
    sab = sum(a * b for a, b, _ in xs)
    sbb = sum(b * b for _, b, _ in xs)
    sat = sum(a * t for a, _, t in xs)
    sbt = sum(b * t for _, b, t in xs)
    det = saa * sbb - sab * sab
    if det <= 0:
        return None
    latency = (sat * sbb - sbt * sab) / det
    inverse_bw = (saa * sbt - sab * sat) / det
    if inverse_bw <= 0:
        return None
    return max(latency, 0.0), 1.0 / inverse_bw


def bucket_sizes(gradient_bytes, bucket_mb, first_bucket_mb):
    """The reducer's buckets, in bytes: the first (earliest ready) one of first_bucket_mb, then bucket_mb
    each; the last holds the rest."""
    sizes, left = [], gradient_bytes
    first = first_bucket_mb * MIB if first_bucket_mb and first_bucket_mb > 0 else bucket_mb * MIB
    size = first
    while left > 0:
        take = min(left, size)
        sizes.append(take)
        left -= take
        size = bucket_mb * MIB
    return sizes or [0.0]


def ring_time(n, nbytes, latency, bandwidth):
    return 0.0 if n < 2 else 2 * (n - 1) * latency + 2 * (n - 1) / n * nbytes / bandwidth


def comm_time(n, sizes, latency, bandwidth):
    return sum(ring_time(n, b, latency, bandwidth) for b in sizes)


def predict_step(n, compute, overlap, sizes, latency, bandwidth):
    """(step, exposed, comm) seconds at n nodes."""
    comm = comm_time(n, sizes, latency, bandwidth)
    exposed = max(0.0, comm - overlap)
    return compute + exposed, exposed, comm


def per_step(group, column):
    steps = group["steps"].astype(float)
    return group[column].astype(float) / steps


def run_steps(runs, epochs):
    """One row per succeeded run with step figures: platform, workload, nodes, run, step_s (training time
    per step), exposed_s (exposed communication per step) and bytes_allreduced_per_step, each the mean of
    the run's epochs (the first epoch's start-up costs fall alike on every size). None without them."""
    needed = {"steps", "train_s", "comm_s", "exposed_comm_s", "bytes_allreduced_per_step", "nodes", "platform"}
    if epochs is None or len(epochs) == 0 or not needed <= set(epochs.columns):
        return None
    ok = set(runs.loc[runs["result"] == "succeeded", "run"]) if "result" in runs else set(runs["run"])
    df = epochs[epochs["run"].isin(ok) & epochs["steps"].astype(float).gt(0)].copy()
    if df.empty:
        return None
    df["step_s"] = per_step(df, "train_s")
    df["exposed_s"] = per_step(df, "exposed_comm_s")
    if "runtime" not in df:
        df["runtime"] = "dtrain"
    return df.groupby(["platform", "runtime", "workload", "nodes", "run"], dropna=False)[
        ["step_s", "exposed_s", "bytes_allreduced_per_step"]].mean().reset_index()


SCALING_COLUMNS = ["platform", "runtime", "workload", "nodes", "runs", "step_s", "min_step_s", "max_step_s", "exposed_comm_s",
                   "base_nodes", "efficiency", "min_efficiency", "max_efficiency"]


def weak_scaling(runs, epochs):
    """Weak-scaling efficiency per platform, workload and size: the median time per step at the
    platform's smallest size (base_nodes, 1 where there are single-node runs) over the median at this
    size; its spread over the repetitions uses this size's slowest and fastest runs. With the same work
    per node at every size, 1.0 is perfect scaling."""
    per_run = run_steps(runs, epochs)
    if per_run is None:
        return pd.DataFrame(columns=SCALING_COLUMNS)
    rows = []
    for (platform, runtime, workload), group in per_run.groupby(["platform", "runtime", "workload"], dropna=False):
        by_n = group.groupby("nodes")
        base_n = min(by_n.groups)
        base = float(by_n.get_group(base_n)["step_s"].median())
        for n, at_n in by_n:
            step = at_n["step_s"]
            rows.append({"platform": platform, "runtime": runtime, "workload": workload, "nodes": int(n),
                         "runs": len(at_n), "step_s": float(step.median()), "min_step_s": float(step.min()),
                         "max_step_s": float(step.max()), "exposed_comm_s": float(at_n["exposed_s"].median()),
                         "base_nodes": int(base_n), "efficiency": base / float(step.median()),
                         "min_efficiency": base / float(step.max()), "max_efficiency": base / float(step.min())})
    return pd.DataFrame(rows, columns=SCALING_COLUMNS)


def scaling_model(runs, epochs, run_configs, sweeps, solos=None):
    """The model's table: one row per platform, workload and node count with a measured step time and a
    prediction. `run_configs` maps a run id to its configuration (for the bucket sizes). With `solos`
    (find_solos) for the platform and runtime at the reference size and at n, the compute per step at n
    is the reference's times solo(n) / solo(ref) (`contention`): the emulator's own floor."""
    solos = solos or {}
    per_run = run_steps(runs, epochs) if sweeps else None
    if per_run is None:
        return pd.DataFrame(columns=MODEL_COLUMNS)
    study_of = dict(zip(runs["run"], runs["study"])) if "study" in runs else {}
    rows = []
    for (platform, runtime, workload), group in per_run.groupby(["platform", "runtime", "workload"], dropna=False):
        platform_sweeps = sweeps.get(str(platform)) or sweeps.get(study_of.get(group["run"].iloc[0], ""))
        if not platform_sweeps:
            continue
        calibration = min(platform_sweeps, key=lambda s: (int(s["world_size"]) < 2, int(s["world_size"])))
        fitted = fit_network(calibration)
        if fitted is None:
            continue
        latency, bandwidth = fitted
        sizes_by_n = group.groupby("nodes")
        communicating = [n for n in sizes_by_n.groups if n >= 2]
        if not communicating:
            continue
        reference_n = min(communicating)
        reference = sizes_by_n.get_group(reference_n)
        # What the communicating sizes allreduce per step (a single node's runs allreduce nothing).
        reduced = group.loc[group["nodes"] >= 2, "bytes_allreduced_per_step"].dropna()
        gradient_bytes = float(reduced.median()) if len(reduced) else math.nan
        if math.isnan(gradient_bytes):
            continue
        config = run_configs.get(reference["run"].iloc[0], {})
        comm_config = config.get("comm", {}) if isinstance(config.get("comm"), dict) else {}
        layout = comm_config.get("bucket_layout") or []
        if sum(layout) > 0:
            # The reference's own buckets (run_start's gradient_buckets), scaled to the bytes on the wire
            # (half of them under --compress bf16).
            sizes = [b * gradient_bytes / sum(layout) for b in layout]
        else:
            sizes = bucket_sizes(gradient_bytes, float(comm_config.get("bucket_mb", 25.0)),
                                 float(comm_config.get("first_bucket_mb", 0.0) or 0.0))
        reference_comm = comm_time(int(reference_n), sizes, latency, bandwidth)
        overlap = max(0.0, reference_comm - float(reference["exposed_s"].median()))
        # Where the reference exposed more than its whole predicted allreduce, the excess is a cost per
        # step the network does not explain; it stays in compute, so the reference is reproduced.
        compute = float(reference["step_s"].median()) - max(0.0, reference_comm - overlap)
        for n, at_n in sizes_by_n:
            if n < reference_n:
                continue
            solo_ref, solo_n = solos.get((str(platform), str(runtime), int(reference_n))), solos.get(
                (str(platform), str(runtime), int(n)))
            contention = solo_n / solo_ref if solo_ref and solo_n else 1.0
            predicted, exposed, comm = predict_step(int(n), compute * contention, overlap, sizes, latency,
                                                    bandwidth)
            measured = float(at_n["step_s"].median())
            rows.append({
                "platform": platform, "runtime": runtime, "workload": workload, "nodes": int(n), "runs": len(at_n),
                "measured_step_s": measured, "measured_min_step_s": float(at_n["step_s"].min()),
                "measured_max_step_s": float(at_n["step_s"].max()), "predicted_step_s": predicted,
                "measured_over_predicted": measured / predicted if predicted > 0 else math.nan,
                "compute_s": compute * contention, "measured_exposed_comm_s": float(at_n["exposed_s"].median()),
                "predicted_exposed_comm_s": exposed, "predicted_comm_s": comm, "gradient_bytes": gradient_bytes,
                "buckets": len(sizes), "latency_us": latency * 1e6, "bandwidth_gbps": bandwidth / 1e9,
                "reference_nodes": int(reference_n), "contention": contention, "calibration": calibration["path"],
            })
    return pd.DataFrame(rows, columns=MODEL_COLUMNS)


PEER_COLUMNS = ["platform", "workload", "nodes", "peer", "dtrain_step_s", "peer_step_s", "speedup",
                "dtrain_efficiency", "peer_efficiency", "dtrain_exposed_comm_s", "peer_exposed_comm_s",
                "dtrain_model_error", "peer_model_error"]


def runtime_comparison(scaling, model):
    """dtrain beside each peer a study ran on the same platform, workload and size (bench/peer/: PyTorch
    DDP): the median time per step of each, speedup = the peer's time over dtrain's (with the same batch
    per rank, dtrain's samples/s over the peer's), both weak-scaling efficiencies, and the scaling model's
    error for each (measured over predicted - 1) where the platform has an allreduce sweep."""
    if scaling is None or len(scaling) == 0 or "runtime" not in scaling:
        return pd.DataFrame(columns=PEER_COLUMNS)
    error = {}
    if model is not None and len(model):
        for r in model.itertuples():
            error[(r.platform, r.runtime, r.workload, r.nodes)] = r.measured_over_predicted - 1.0
    rows = []
    ours = scaling[scaling["runtime"] == "dtrain"]
    for peer in scaling[scaling["runtime"] != "dtrain"].itertuples():
        mine = ours[(ours["platform"] == peer.platform) & (ours["workload"] == peer.workload) &
                    (ours["nodes"] == peer.nodes)]
        if mine.empty:
            continue
        m = mine.iloc[0]
        rows.append({"platform": peer.platform, "workload": peer.workload, "nodes": int(peer.nodes),
                     "peer": peer.runtime, "dtrain_step_s": m["step_s"], "peer_step_s": peer.step_s,
                     "speedup": peer.step_s / m["step_s"] if m["step_s"] > 0 else math.nan,
                     "dtrain_efficiency": m["efficiency"], "peer_efficiency": peer.efficiency,
                     "dtrain_exposed_comm_s": m["exposed_comm_s"], "peer_exposed_comm_s": peer.exposed_comm_s,
                     "dtrain_model_error": error.get((peer.platform, "dtrain", peer.workload, peer.nodes), math.nan),
                     "peer_model_error": error.get((peer.platform, peer.runtime, peer.workload, peer.nodes), math.nan)})
    return pd.DataFrame(rows, columns=PEER_COLUMNS)
