"""index.html: every plot and the run table on one page, with links to the CSV files."""

import html
import math

SUMMARY_COLUMNS = ["run", "platform", "nodes", "ranks", "accelerator", "repetition", "workload", "result",
                   "wall_s", "train_s", "epochs", "final_test_accuracy", "final_test_loss", "samples_per_s",
                   "tflops_achieved", "mfu", "peak_gpu_util_percent", "peak_rss_bytes", "bytes_allreduced_per_step",
                   "net_tx_bytes_per_step"]

MODEL_SUMMARY = ["platform", "workload", "nodes", "runs", "measured_step_s", "predicted_step_s",
                 "measured_over_predicted", "measured_exposed_comm_s", "predicted_exposed_comm_s", "compute_s",
                 "latency_us", "bandwidth_gbps"]


def fmt(value):
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if abs(value) >= 1e6:
            return f"{value:.4g}"
        return f"{value:.4g}" if abs(value) < 1 else f"{value:,.2f}".rstrip("0").rstrip(".")
    return str(value)


def write_index(out_dir, studies, tables, figures, skipped, warnings):
    runs = tables["runs"]
    columns = [c for c in SUMMARY_COLUMNS if c in runs]
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>dtrain report</title><style>",
             "body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;font-size:12px}",
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}",
             "td:first-child{text-align:left}img{max-width:100%;border:1px solid #ddd;margin:4px 0}",
             "</style></head><body>",
             f"<h1>dtrain report</h1><p>Studies: {html.escape(', '.join(studies))}; {len(runs)} run(s). Tables: ",
             ", ".join(f"<a href='{n}.csv'>{n}.csv</a>" for n in ("runs", "scaling", "model", "epochs", "samples", "ops")),
             "</p><h2>Runs</h2>"]
    if len(runs):
        parts.append(runs[columns].to_html(index=False, na_rep="", float_format=fmt, escape=True))
    scaling = tables.get("scaling")
    if scaling is not None and len(scaling) and scaling["nodes"].nunique() > 1:
        parts.append("<h2>Weak scaling: time per step and efficiency</h2><p>Efficiency is the time per step at "
                     "base_nodes over the time at each size (1.0: the same time at any size), with its spread "
                     "over the repetitions.</p>")
        parts.append(scaling.to_html(index=False, na_rep="", float_format=fmt, escape=True))
    model = tables.get("model")
    if model is not None and len(model):
        parts.append("<h2>Scaling model: measured / predicted time per step</h2><p>Predicted from each platform's "
                     "smallest run and its allreduce sweep (docs/studies.md); measured_over_predicted above 1 is "
                     "time the platform adds beyond what its network explains.</p>")
        parts.append(model[[c for c in MODEL_SUMMARY if c in model]].to_html(
            index=False, na_rep="", float_format=fmt, escape=True))
    for title, paths in figures:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        for p in paths:
            rel = p.relative_to(out_dir).as_posix()
            parts.append(f"<p><a href='{rel}'><img src='{rel}' alt='{html.escape(rel)}'></a></p>")
    if skipped:
        parts.append("<h2>Plots without data</h2><ul>")
        parts += [f"<li>{html.escape(t)}: {html.escape(why)}</li>" for t, why in skipped]
        parts.append("</ul>")
    if warnings:
        parts.append("<h2>Warnings</h2><ul>")
        parts += [f"<li>{html.escape(w)}</li>" for w in warnings]
        parts.append("</ul>")
    parts.append("</body></html>\n")
    (out_dir / "index.html").write_text("".join(parts))
