#!/usr/bin/python3
"""dtrain-report's scaling model (report/dtrain_report/model.py) on worlds whose answer is known:
  - the ring fit recovers latency and bandwidth from a sweep that follows the ring model exactly, in the
    JSON layout dtrain_allreduce_bench writes, and ignores a sweep of one rank;
  - the buckets are cut as the reducer cuts them (first bucket, then bucket_mb each), or are the ones a
    run logged (gradient_buckets), with a control that cuts its own;
  - runs whose step times follow the model at 2, 4 and 8 nodes are predicted to within 1e-9 from the
    2-node run and the 2-node sweep, while a platform that adds 50 ms per step at 8 nodes shows it as
    measured / predicted = (step + 0.05) / step there, and a run that failed does not count;
  - solo runs (every node training alone at once) scale the model's compute by their contention, so a
    platform whose compute slows at 8 nodes by what its solo runs show is predicted exactly;
  - weak-scaling efficiency is the 1-node step time over each size's, with the repetitions' spread.
Usage: model_test.py"""

import math
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "report"))
from dtrain_report.model import MIB, bucket_sizes, fit_network, predict_step, scaling_model, weak_scaling  # noqa: E402

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(b))


LATENCY, BANDWIDTH = 40e-6, 118e6  # s per ring step, bytes/s


def sweep(n, platform="p"):
    ring = lambda b: 2 * (n - 1) * LATENCY + 2 * (n - 1) / n * b / BANDWIDTH  # noqa: E731
    results = [{"bytes": b, "count": b // 4, "dtrain_us": ring(b) * 1e6, "raw_us": ring(b) * 1.1e6}
               for b in (65536, 262144, 1 << 20, 4 << 20, 16 << 20)]
    return {"bench": "allreduce", "backend": "mpi", "world_size": n, "hosts": n, "results": results,
            "platform": platform, "path": f"calibration/allreduce-n{n:02d}.json"}


fitted = fit_network(sweep(2))
check(fitted is not None and close(fitted[0], LATENCY, 1e-6) and close(fitted[1], BANDWIDTH, 1e-6),
      f"fit of an exact ring sweep: {fitted}, expected ({LATENCY}, {BANDWIDTH})")
check(fit_network(sweep(1)) is None, "a sweep of one rank determines nothing")

sizes = bucket_sizes(4799528, 25.0, 1.0)
check(sizes == [MIB, 4799528 - MIB], f"mnist's buckets: {sizes}")
sizes = bucket_sizes(46.8 * MIB, 25.0, 1.0)
check([round(s / MIB, 3) for s in sizes] == [1.0, 25.0, 20.8], f"resnet18's buckets: {sizes}")

# A world that follows the model: compute 0.2 s, 0.02 s of overlap (less than the 2-node allreduce, so the
# 2-node run shows it), mnist's gradients.
GRAD, COMPUTE, OVERLAP = 4799528, 0.2, 0.02
cut = bucket_sizes(GRAD, 25.0, 1.0)
runs, epochs, configs = [], [], {}
for platform, extra_at_8 in (("exact", 0.0), ("slow8", 0.05)):
    for n in (1, 2, 4, 8):
        for rep in (1, 2, 3):
            step, exposed, comm = predict_step(n, COMPUTE, OVERLAP, cut, LATENCY, BANDWIDTH) if n > 1 else (COMPUTE, 0.0, 0.0)
            step += extra_at_8 if n == 8 else 0.0
            run = f"{platform}/n{n}-r{rep}"
            result = "failed" if (n == 4 and rep == 3) else "succeeded"
            runs.append({"run": run, "result": result})
            steps = 30
            # A failed run's figures would throw the median off, were it counted.
            scale = 10.0 if result == "failed" else 1.0
            epochs.append({"run": run, "platform": platform, "workload": "mnist", "nodes": n, "steps": steps,
                           "train_s": scale * step * steps, "comm_s": comm * steps, "exposed_comm_s": exposed * steps,
                           "bytes_allreduced_per_step": GRAD if n > 1 else 0})
            configs[run] = {"comm": {"bucket_mb": 25.0, "first_bucket_mb": 1.0}}
model = scaling_model(pd.DataFrame(runs), pd.DataFrame(epochs), configs,
                      {"exact": [sweep(2, "exact"), sweep(8, "exact")], "slow8": [sweep(2, "slow8")]})
check(sorted(set(model["nodes"])) == [2, 4, 8], f"predicted sizes {sorted(set(model['nodes']))}, expected 2, 4, 8")
for _, row in model.iterrows():
    expected = 1.0
    if row["platform"] == "slow8" and row["nodes"] == 8:
        step = predict_step(8, COMPUTE, OVERLAP, cut, LATENCY, BANDWIDTH)[0]
        expected = (step + 0.05) / step
    check(close(row["measured_over_predicted"], expected, 1e-9),
          f"{row['platform']} at {row['nodes']} nodes: measured / predicted {row['measured_over_predicted']}, expected {expected}")
    check(row["calibration"].endswith("n02.json") and row["reference_nodes"] == 2 and
          row["runs"] == (2 if row["nodes"] == 4 else 3),
          f"{row['platform']} at {row['nodes']}: calibration {row['calibration']}, reference {row['reference_nodes']}, runs {row['runs']}")
check(scaling_model(pd.DataFrame(runs), pd.DataFrame(epochs), configs, {}).empty, "no sweep, no model")

# Runs that logged their own buckets (run_start's gradient_buckets; --bucket-sizing network cuts four of
# 1.2 MB here where bucket_mb would cut 1 MiB and the rest): the model sends those. A model that cut its
# own would be off at 8 nodes, where the buckets' latency differs.
layout = [GRAD / 4] * 4
own_runs, own_epochs, own_configs = [], [], {}
for n in (1, 2, 4, 8):
    step, exposed, comm = predict_step(n, COMPUTE, OVERLAP, layout, LATENCY, BANDWIDTH) if n > 1 else (COMPUTE, 0.0, 0.0)
    run = f"own/n{n}"
    own_runs.append({"run": run, "result": "succeeded"})
    own_epochs.append({"run": run, "platform": "own", "workload": "mnist", "nodes": n, "steps": 30, "train_s": step * 30,
                       "comm_s": comm * 30, "exposed_comm_s": exposed * 30, "bytes_allreduced_per_step": GRAD if n > 1 else 0})
    own_configs[run] = {"comm": {"bucket_mb": 25.0, "first_bucket_mb": 1.0, "bucket_layout": layout}}
own = scaling_model(pd.DataFrame(own_runs), pd.DataFrame(own_epochs), own_configs, {"own": [sweep(2, "own")]})
check(len(own) == 3 and all(close(r, 1.0) for r in own["measured_over_predicted"]) and set(own["buckets"]) == {4},
      f"a run's own buckets: measured / predicted {list(own['measured_over_predicted'])}, buckets {set(own['buckets'])}")
for c in own_configs.values():
    del c["comm"]["bucket_layout"]
cut_here = scaling_model(pd.DataFrame(own_runs), pd.DataFrame(own_epochs), own_configs, {"own": [sweep(2, "own")]})
check(not close(cut_here[cut_here["nodes"] == 8]["measured_over_predicted"].iloc[0], 1.0),
      "the control: buckets cut from bucket_mb miss the runs' own at 8 nodes")

# The emulator's floor: with solo runs (every node alone at once) 8% slower at 8 nodes than at 2, the
# model's compute at 8 nodes grows by as much, and slow8's extra 0.05 s is explained as far as the solo
# runs say: a contention of (step + 0.05) / step makes the prediction exact there.
step8 = predict_step(8, COMPUTE, OVERLAP, cut, LATENCY, BANDWIDTH)[0]
exposed8 = step8 - COMPUTE
contention = (COMPUTE + 0.05) / COMPUTE
solos = {("slow8", "dtrain", 2): 0.5, ("slow8", "dtrain", 4): 0.5, ("slow8", "dtrain", 8): 0.5 * contention,
         ("exact", "pytorch-ddp", 8): 9.0}  # another runtime's solo runs do not touch dtrain's rows
floored = scaling_model(pd.DataFrame(runs), pd.DataFrame(epochs), configs,
                        {"exact": [sweep(2, "exact")], "slow8": [sweep(2, "slow8")]}, solos)
for _, row in floored.iterrows():
    want = contention if (row["platform"] == "slow8" and row["nodes"] == 8) else 1.0
    check(close(row["contention"], want) and close(row["measured_over_predicted"], 1.0) and
          row["runtime"] == "dtrain",
          f"with solo runs, {row['platform']} at {row['nodes']}: contention {row['contention']} (expected {want}), "
          f"measured / predicted {row['measured_over_predicted']} (expected 1)")
check(close(exposed8, floored[(floored["platform"] == "slow8") & (floored["nodes"] == 8)]["predicted_exposed_comm_s"].iloc[0]),
      "the contention scales compute, not the exposed communication")

# Weak scaling: the 1-node step over each size's, the failed run left out; a repetition 10% slower
# widens the spread on one side only.
epochs[-1]["train_s"] *= 1.1  # slow8's last 8-node repetition
scaling = weak_scaling(pd.DataFrame(runs), pd.DataFrame(epochs))
check(len(scaling) == 8 and set(scaling["base_nodes"]) == {1}, f"weak scaling rows {len(scaling)}, bases {set(scaling['base_nodes'])}")
for _, row in scaling.iterrows():
    step = predict_step(row["nodes"], COMPUTE, OVERLAP, cut, LATENCY, BANDWIDTH)[0] if row["nodes"] > 1 else COMPUTE
    step += 0.05 if (row["platform"] == "slow8" and row["nodes"] == 8) else 0.0
    slow = row["platform"] == "slow8" and row["nodes"] == 8
    check(close(row["efficiency"], COMPUTE / step) and close(row["max_efficiency"], COMPUTE / step) and
          close(row["min_efficiency"], COMPUTE / (step * (1.1 if slow else 1.0))) and
          row["runs"] == (2 if row["nodes"] == 4 else 3),
          f"{row['platform']} at {row['nodes']}: efficiency {row['efficiency']} ({row['min_efficiency']}.."
          f"{row['max_efficiency']}), expected {COMPUTE / step}")

print(f"model_test: {len(model)} predictions checked, {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
