"""index.html: every plot and the run table on one page, with links to the CSV files."""

import html
import math

from . import outdir

SUMMARY_COLUMNS = ["run", "platform", "nodes", "ranks", "accelerator", "repetition", "workload", "result",
                   "wall_s", "train_s", "epochs", "final_test_accuracy", "final_test_loss", "samples_per_s",
                   "tflops_achieved", "mfu", "peak_gpu_util_percent", "peak_rss_bytes", "bytes_allreduced_per_step",
                   "net_tx_bytes_per_step"]

MODEL_SUMMARY = ["platform", "runtime", "workload", "nodes", "runs", "measured_step_s", "predicted_step_s",
                 "measured_over_predicted", "measured_exposed_comm_s", "predicted_exposed_comm_s", "compute_s",
                 "latency_us", "bandwidth_gbps", "contention"]


def fmt(value):
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if abs(value) >= 1e6:
            return f"{value:.4g}"
        return f"{value:.4g}" if abs(value) < 1 else f"{value:,.2f}".rstrip("0").rstrip(".")
    return str(value)


def fmt_bytes(value):
    """1.5 GiB, 707 MiB: byte counts as a reader takes them in (the CSV keeps the exact numbers)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return value
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.0f} B"


def table_html(df):
    """A table that scrolls sideways inside the page when it is wider than it."""
    view = df.copy()
    for column in view.columns:
        if column.endswith("_bytes") or column.endswith("_bytes_per_step"):
            view[column] = view[column].map(fmt_bytes)
    return ("<div class='wide'>" + view.to_html(index=False, na_rep="", float_format=fmt, escape=True) + "</div>")


def write_index(out_dir, studies, tables, figures, skipped, warnings):
    runs = tables["runs"]
    columns = [c for c in SUMMARY_COLUMNS if c in runs]
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>dtrain report</title><style>",
             "body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;font-size:12px}",
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}",
             "td:first-child{text-align:left}img{max-width:100%;border:1px solid #ddd;margin:4px 0}",
             ".wide{overflow-x:auto}.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));"
             "gap:8px}.plots p{margin:0}",
             "</style></head><body>",
             f"<h1>dtrain report</h1><p>Studies: {html.escape(', '.join(studies))}; {len(runs)} run(s). Tables: ",
             ", ".join(f"<a href='{n}.csv'>{n}.csv</a>" for n in ("runs", "scaling", "model", "peer", "ranks", "floor", "epochs",
                                                                  "samples", "ops")),
             "</p><h2>Runs</h2>"]
    if len(runs):
        parts.append(table_html(runs[columns]))
    # The summary tables, each under its heading where the study has rows for it (weak scaling only
    # where it has more than one size).
    sections = [
        ("scaling", "Weak scaling: time per step and efficiency",
         "Efficiency is the time per step at base_nodes over the time at each size (1.0: the same time at any "
         "size), with its spread over the repetitions.",
         lambda df: df if df["nodes"].nunique() > 1 else df.iloc[0:0]),
        ("model", "Scaling model: measured / predicted time per step",
         "Predicted from each platform's smallest run and its allreduce sweep (docs/studies.md); "
         "measured_over_predicted above 1 is time the platform adds beyond what its network explains.",
         lambda df: df[[c for c in MODEL_SUMMARY if c in df]]),
        ("peer", "dtrain beside its peer",
         "The same workload, batch per rank and platform: speedup is the peer's time per step over dtrain's "
         "(above 1: dtrain is faster); the efficiencies and the model's errors (measured over predicted - 1) "
         "of each.", None),
        ("floor", "The emulated cluster's own cost",
         "What moving a GB costs two nodes' CPU across the emulated link, against the same stream inside one "
         "node (the host's TCP stack alone, as with a real NIC); floor_node_cpu_s_per_gb is the emulation's "
         "share charged to the nodes, floor_softirq_s_per_gb the host's softirq time that no node pays for "
         "(deploy/local/emulator_floor.py).", None),
    ]
    for key, title, text, shown_part in sections:
        df = tables.get(key)
        if df is None or not len(df):
            continue
        df = shown_part(df) if shown_part else df
        if len(df):
            parts.append(f"<h2>{html.escape(title)}</h2><p>{html.escape(text)}</p>")
            parts.append(table_html(df))
    for title, paths in figures:
        # Several plots of one kind (a run's resources each) side by side where the window has room.
        parts.append(f"<h2>{html.escape(title)}</h2>" + ("<div class='plots'>" if len(paths) > 1 else "<div>"))
        for p in paths:
            rel = p.relative_to(out_dir).as_posix()
            parts.append(f"<p><a href='{rel}'><img src='{rel}' alt='{html.escape(rel)}'></a></p>")
        parts.append("</div>")
    if skipped:
        parts.append("<h2>Plots without data</h2><ul>")
        parts += [f"<li>{html.escape(t)}: {html.escape(why)}</li>" for t, why in skipped]
        parts.append("</ul>")
    if warnings:
        parts.append("<h2>Warnings</h2><ul>")
        parts += [f"<li>{html.escape(w)}</li>" for w in warnings]
        parts.append("</ul>")
    parts.append("</body></html>\n")
    outdir.write(out_dir / "index.html", lambda f: f.write("".join(parts)))
