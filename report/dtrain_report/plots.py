"""The report's plots, as PNG files. Each function returns the files it wrote, or raises Skip with the
reason the study has nothing to show for it (the index page lists those)."""

import math
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from . import outdir  # noqa: E402
from .tables import is_metric  # noqa: E402

DPI = 110
GIB = 1024.0 ** 3


class Skip(Exception):
    """A plot the study has no data for."""


def series_label(row, keys):
    parts = []
    for k in keys:
        v = row[k]
        if k == "nodes":
            parts.append("? nodes" if pd.isna(v) else f"{int(v)} node{'' if int(v) == 1 else 's'}")
        elif not (isinstance(v, float) and math.isnan(v)):
            parts.append(str(v))
    return ", ".join(parts)


def distinct(df, column):
    return sorted(df[column].dropna().astype(str).unique()) if column in df else []


def group_keys(df):
    """Platform always; the runtime (dtrain and a peer), accelerator and workload too when the study has
    several."""
    keys = ["platform"]
    for k in ("runtime", "accelerator", "workload"):
        if len(distinct(df, k)) > 1:
            keys.append(k)
    return keys


def groups(df, keys):
    """(labels of the group, its rows) for each group of `df` by `keys`."""
    by = keys[0] if len(keys) == 1 else keys
    for values, group in df.groupby(by, dropna=False):
        yield dict(zip(keys, values if isinstance(values, tuple) else (values,))), group


def save(fig, out_dir, name):
    path = out_dir / name
    outdir.write(path, lambda f: fig.savefig(f, format="png", dpi=DPI, bbox_inches="tight"), binary=True)
    plt.close(fig)
    return path


def log2_axis(ax, values):
    values = sorted({int(v) for v in values if not pd.isna(v)})
    if len(values) > 2 and values[-1] / max(values[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(values)
    ax.set_xticklabels([str(v) for v in values])


def time_vs_nodes(runs, out_dir):
    """Wall time and training throughput against nodes, one line per platform: the median over the
    repetitions, with their minimum and maximum as the bar."""
    df = runs[runs["wall_s"].notna() & runs["nodes"].notna()] if len(runs) else runs
    if df is None or len(df) == 0:
        raise Skip("no run has both a wall time and a node count")
    keys = group_keys(df)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for values, group in groups(df, keys):
        label = series_label(values, keys)
        for ax, column in zip(axes, ("wall_s", "samples_per_s")):
            g = group[group[column].notna()]
            if g.empty:
                continue
            stats = g.groupby("nodes")[column].agg(["median", "min", "max", "count"]).reset_index()
            line, = ax.plot(stats["nodes"], stats["median"], marker="o", label=label)
            ax.errorbar(stats["nodes"], stats["median"],
                        yerr=[stats["median"] - stats["min"], stats["max"] - stats["median"]],
                        fmt="none", ecolor=line.get_color(), capsize=4, alpha=0.8)
            ax.scatter(g["nodes"], g[column], s=10, color=line.get_color(), alpha=0.4)
    reps = int(df.groupby(keys + ["nodes"]).size().max())
    axes[0].set_title(f"Wall time (bash time's real) vs nodes\nmedian, bars min-max over up to {reps} repetitions")
    axes[0].set_ylabel("wall time (s)")
    axes[1].set_title("Training throughput vs nodes\nmedian over repetitions, mean of each run's epochs")
    axes[1].set_ylabel("samples/s (all ranks)")
    for ax in axes:
        ax.set_xlabel("nodes")
        log2_axis(ax, df["nodes"])
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize=8)
    return [save(fig, out_dir, "time_vs_nodes.png")]


def epoch_curves(epochs, out_dir):
    """The workloads' metrics per epoch (test accuracy and loss, training loss; a GAN's losses), one line
    per platform and size (mean over repetitions)."""
    if epochs is None or len(epochs) == 0:
        raise Skip("no run recorded epochs (no epoch records and no Katib lines)")
    keys = group_keys(epochs) + ["nodes"]
    # A classifier's accuracy and losses first, then any other workload's metrics (a GAN's d_loss, ...).
    preferred = ["test_accuracy", "test_loss", "train_loss"]
    others = [c for c in epochs.columns if is_metric(c) and c not in preferred]
    panels = [(c, c.replace("train_", "training ", 1).replace("test_", "test ", 1).replace("_", " "))
              for c in preferred + sorted(others, key=lambda c: (not c.startswith("test_"), c))
              if c in epochs and pd.to_numeric(epochs[c], errors="coerce").notna().any()][:4]
    if not panels:
        raise Skip("no run recorded a metric per epoch")
    # Two panels a row: four in one row shrink each to a thumbnail on a page.
    columns = min(2, len(panels))
    rows = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 4.5 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (column, title) in zip(axes.flat, panels):
        for values, group in groups(epochs, keys):
            g = group[group[column].notna()]
            if g.empty:
                continue
            mean = g.groupby("epoch")[column].mean()
            label = series_label(values, keys)
            ax.plot(mean.index, mean.values, marker="o", markersize=3, label=label)
        ax.set_title(f"{title} per epoch (mean over repetitions)")
        ax.set_xlabel("epoch")
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if ax.has_data():
            ax.legend(fontsize=8)
    return [save(fig, out_dir, "epochs.png")]


def safe_name(text):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def resource_series(samples, out_dir):
    """Per run: CPU, memory, GPU and network use of every rank over time."""
    if samples is None or len(samples) == 0:
        raise Skip("no run has resource samples (dtrain --sample-interval-s)")
    outdir.subdir(out_dir, "resources")
    written = []
    for run_id, df in samples.groupby("run", sort=True):
        panels = [("cpu_percent", "CPU: process time, % of one core", "%", 1.0),
                  ("rss_bytes", "resident memory", "GiB", GIB)]
        for column, title, unit, scale in [("gpu_util_percent", "GPU utilisation", "%", 1.0),
                                           ("gpu_mem_used_bytes", "GPU memory used", "GiB", GIB),
                                           ("gpu_mem_bw_util_percent", "GPU memory bandwidth utilisation", "%", 1.0)]:
            if column in df and df[column].notna().any():
                panels.append((column, title, unit, scale))
        panels.append(("net", "network: bytes received + sent over the sampled interfaces", "MB/s", 1.0))
        fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.1 * len(panels)), sharex=True, squeeze=False)
        for ax, (column, title, unit, scale) in zip(axes[:, 0], panels):
            for rank, g in df.groupby("rank"):
                g = g.sort_values("t_s")
                if column == "net":
                    total = (g["net_rx_bytes"].astype(float) + g["net_tx_bytes"].astype(float)).diff()
                    seconds = g["t_s"].diff()
                    y = (total / seconds / 1e6).where(seconds > 0)
                else:
                    y = g[column].astype(float) / scale
                ax.plot(g["t_s"], y, linewidth=1, marker="." if len(g) < 40 else None, label=f"rank {int(rank)}")
            ax.set_title(title, fontsize=9, loc="left")
            ax.set_ylabel(unit)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
        fig.suptitle(f"Resource use of {run_id}", y=1.0)
        if df["rank"].nunique() <= 16:
            axes[0, 0].legend(fontsize=7, ncol=min(8, df["rank"].nunique()))
        axes[-1, 0].set_xlabel("time since the run's first sample (s)")
        fig.tight_layout()
        written.append(save(fig, out_dir, f"resources/{safe_name(run_id)}.png"))
    return written


def top_ops(ops, out_dir, top=12):
    """The operations that took most time per step, per accelerator and workload: self CUDA time where
    the profile has device activity, else self CPU time."""
    if ops is None or len(ops) == 0:
        raise Skip("no run was profiled (dtrain --profile-steps)")
    groups = list(ops.groupby(["accelerator", "workload"], dropna=False))
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, 0.32 * top * len(groups) + 1.2 * len(groups)),
                             squeeze=False)
    for ax, ((accelerator, workload), df) in zip(axes[:, 0], groups):
        cuda = bool(df["cuda_profiled"].any()) and df["self_cuda_us"].sum() > 0
        column = "self_cuda_us" if cuda else "self_cpu_us"
        per_step = df.assign(ms=df[column] / df["steps"] / 1000.0)
        mean = per_step.groupby("name")["ms"].mean().sort_values(ascending=False).head(top)[::-1]
        ax.barh([n if len(n) <= 60 else n[:57] + "..." for n in mean.index], mean.values,
                color="tab:green" if cuda else "tab:blue")
        kind = "self CUDA time" if cuda else "self CPU time (no CUDA activity in the profile)"
        ax.set_title(f"{workload} on {accelerator}: top operations by {kind}", fontsize=10)
        ax.set_xlabel("ms per profiled step (mean over profiled runs)")
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return [save(fig, out_dir, "top_ops.png")]


def tflops(runs, out_dir):
    """Achieved TFLOP/s per device and peak utilisation, per model and platform/accelerator."""
    df = runs[runs["tflops_per_device"].notna()] if len(runs) else runs
    if df is None or len(df) == 0:
        raise Skip("no run recorded achieved FLOP/s (epoch records' tflops_achieved)")
    df = df.assign(where=df["platform"].astype(str) + " / " + df["accelerator"].astype(str))
    gpu = df["peak_gpu_util_percent"].notna().any()
    util_column = "peak_gpu_util_percent" if gpu else "peak_cpu_percent"
    util_title = "peak GPU utilisation (%)" if gpu else "peak CPU use per rank (% of one core; no GPU samples)"
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, column, title in ((axes[0], "tflops_per_device", "achieved TFLOP/s per device"),
                              (axes[1], util_column, util_title)):
        table = df.groupby(["workload", "where"])[column].median().unstack("where")
        if table.notna().any().any():
            table.plot.bar(ax=ax, rot=0)
            ax.legend(fontsize=8, title=None)
        ax.set_title(f"{title}\nmedian over runs", fontsize=10)
        ax.set_xlabel("workload")
        ax.set_ylabel(title.split(" (")[0] if column == "tflops_per_device" else title, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    if df["mfu"].notna().any():
        mfu = df.groupby(["workload", "where"])["mfu"].median()
        text = "; ".join(f"{w} on {p}: MFU {v:.1%}" for (w, p), v in mfu.items() if not pd.isna(v))
        fig.text(0.01, -0.02, text, fontsize=8)
    return [save(fig, out_dir, "tflops.png")]


def bytes_vs_batch(runs, out_dir):
    """Bytes per training step against the per-rank batch size: gradient bytes each rank allreduces and
    the bytes its network interfaces sent."""
    df = runs[runs["batch_size"].notna() & runs["bytes_allreduced_per_step"].notna()] if len(runs) else runs
    if df is None or len(df) == 0:
        raise Skip("no run recorded bytes per step with a batch size")
    keys = group_keys(df) + ["nodes"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for values, group in groups(df, keys):
        label = series_label(values, keys)
        for ax, column in zip(axes, ("bytes_allreduced_per_step", "net_tx_bytes_per_step")):
            stats = group.groupby("batch_size")[column].median() / 1e6
            if stats.notna().any():
                ax.plot(stats.index, stats.values, marker="o", label=label)
    axes[0].set_title("Gradient bytes allreduced per step (per rank)", fontsize=10)
    axes[1].set_title("Bytes sent by the rank's network interfaces per step\n(0 when all ranks share one host)",
                      fontsize=10)
    for ax in axes:
        ax.set_xlabel("batch size per rank (samples)")
        ax.set_ylabel("MB per step")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        log2_axis(ax, df["batch_size"])
        if ax.has_data():
            ax.legend(fontsize=8)
    return [save(fig, out_dir, "bytes_vs_batch.png")]


def step_time_vs_nodes(model, out_dir):
    """Training time per step against nodes, measured (median, bars min-max over repetitions) and as the
    scaling model predicts it from the smallest run and the network's allreduce sweep (dashed), one colour
    per platform and workload; and the exposed communication per step, measured and predicted."""
    if model is None or len(model) == 0:
        raise Skip("no platform has both runs with communication figures and an allreduce sweep "
                   "(calibration/*.json: deploy/local/run_cluster_study.sh writes them)")
    keys = ["platform"] + [k for k in ("runtime", "workload") if len(distinct(model, k)) > 1]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for values, group in groups(model, keys):
        group = group.sort_values("nodes")
        label = series_label(values, keys)
        line, = axes[0].plot(group["nodes"], group["measured_step_s"], marker="o", label=f"{label}: measured")
        axes[0].errorbar(group["nodes"], group["measured_step_s"],
                         yerr=[group["measured_step_s"] - group["measured_min_step_s"],
                               group["measured_max_step_s"] - group["measured_step_s"]],
                         fmt="none", ecolor=line.get_color(), capsize=4, alpha=0.8)
        axes[0].plot(group["nodes"], group["predicted_step_s"], linestyle="--", color=line.get_color(),
                     label=f"{label}: model")
        axes[1].plot(group["nodes"], group["measured_exposed_comm_s"], marker="o", color=line.get_color(),
                     label=f"{label}: measured")
        axes[1].plot(group["nodes"], group["predicted_exposed_comm_s"], linestyle="--", color=line.get_color(),
                     label=f"{label}: model")
    axes[0].set_title("Time per training step vs nodes\nmeasured (median, bars min-max) and the network model (dashed)")
    axes[0].set_ylabel("seconds per step")
    axes[1].set_title("Exposed communication per step vs nodes\n(the part backward did not hide)")
    axes[1].set_ylabel("seconds per step")
    for ax in axes:
        ax.set_xlabel("nodes")
        log2_axis(ax, model["nodes"])
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return [save(fig, out_dir, "step_time_vs_nodes.png")]


def straggler_scores(ranks, out_dir):
    """Per rank, the share of the training time the other ranks waited for it (the straggler score, mean
    over the repetitions and epochs), one panel per platform, runtime and size: a slow node stands out
    as one high bar instead of disappearing into an average."""
    if ranks is None or len(ranks) == 0:
        raise Skip("no run with 2 or more ranks recorded the ranks' waits (straggler_by_rank: dtrain 0.1.0 "
                   "and later)")
    keys = ["platform"] + [k for k in ("runtime", "workload") if len(distinct(ranks, k)) > 1] + ["nodes"]
    panels = list(groups(ranks, keys))[:12]
    columns = min(3, len(panels))
    rows = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 3.2 * rows), squeeze=False)
    for ax, (values, group) in zip(axes.flat, panels):
        per_rank = group.groupby("rank").agg(straggler=("straggler", "mean"), host=("host", "first")).reset_index()
        ticks = [f"{int(r)}\n{h}" if isinstance(h, str) and h else str(int(r))
                 for r, h in zip(per_rank["rank"], per_rank["host"])]
        worst = per_rank["straggler"].idxmax() if per_rank["straggler"].notna().any() else None
        colors = ["tab:red" if i == worst and per_rank["straggler"].iloc[i] >= 0.1 else "tab:blue"
                  for i in range(len(per_rank))]
        ax.bar(range(len(per_rank)), per_rank["straggler"], color=colors)
        ax.set_xticks(range(len(per_rank)))
        ax.set_xticklabels(ticks, fontsize=7)
        ax.set_title(series_label(values, keys), fontsize=9)
        ax.set_ylim(0, max(0.2, float(per_rank["straggler"].max() or 0) * 1.2))
        ax.set_xlabel("rank (host)")
        ax.set_ylabel("straggler score")
        ax.grid(alpha=0.3, axis="y")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle("Straggler score per rank: the share of training the others waited for it (red: 0.1 or more)")
    fig.tight_layout()
    return [save(fig, out_dir, "straggler_scores.png")]


PLOTS = [
    ("Time and throughput vs nodes", time_vs_nodes, "runs"),
    ("Time per step vs nodes: measured and the scaling model", step_time_vs_nodes, "model"),
    ("Accuracy and loss per epoch", epoch_curves, "epochs"),
    ("Achieved TFLOP/s and peak utilisation", tflops, "runs"),
    ("Bytes per step vs batch size", bytes_vs_batch, "runs"),
    ("Top operations", top_ops, "ops"),
    ("Resource use over time, per run", resource_series, "samples"),
    ("Straggler score per rank", straggler_scores, "ranks"),
]
