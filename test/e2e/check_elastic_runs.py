#!/usr/bin/python3
"""Checks the run logs of an elastic dtrain job that torchrun restarted once: two runs in LOGS, the first
at world size BEFORE, the second at AFTER resuming from a checkpoint inside epoch 1 with torchrun's restart
count RESTARTS, and the resumed epoch taking exactly the steps after the checkpoint's, with every sample of
the epoch counted once. The global batch GLOBAL is held: each rank takes at most PER_RANK samples per pass,
so at AFTER ranks an optimizer step is ceil(GLOBAL / AFTER / PER_RANK) passes; an epoch is STEPS optimizer
steps.

Usage: check_elastic_runs.py LOGS BEFORE AFTER RESTARTS STEPS GLOBAL PER_RANK
"""
import glob
import json
import math
import sys


def main():
    logs = sys.argv[1]
    before, after, restarts, steps, global_batch, per_rank = map(int, sys.argv[2:8])
    runs = [[json.loads(line) for line in open(f)] for f in sorted(glob.glob(logs + "/*/events.jsonl"))]
    assert len(runs) == 2, f"{len(runs)} runs in {logs}"
    first, second = runs
    assert first[0]["world_size"] == before and second[0]["world_size"] == after, (first[0], second[0])
    resume = [e for e in second if e["event"] == "resume"][0]
    assert resume["restart_count"] == restarts, resume
    assert resume["from_world_size"] == before and resume["world_size"] == after, resume
    assert resume["epoch"] == 1 and resume["step"] >= 20 and resume["epoch_samples"] == resume["step"] * global_batch, resume
    assert resume["steps_redone"] >= 0 and resume["restart_s"] > 0 and resume["lost_s"] > 0, resume
    # The parts of restart_s the resumed process can see, in order, adding up to no more than it (the
    # process start is known to 10 ms).
    parts = [resume[k] for k in ("down_s", "join_s", "setup_s", "restore_s")]
    assert all(p >= 0 for p in parts) and sum(parts) <= resume["restart_s"] + 0.02, resume
    passes = math.ceil(global_batch / after / per_rank)
    epoch = [e for e in second if e["event"] == "epoch_end"][0]
    assert epoch["epoch"] == 1, epoch
    assert epoch["first_step"] == resume["step"] * passes + 1, (epoch, resume)
    assert epoch["first_step"] - 1 + epoch["steps"] == steps * passes, epoch
    for e in (e for e in second if e["event"] == "epoch_end"):
        assert e["train_samples"] == steps * global_batch, e
    assert second[-1]["event"] == "run_end", second[-1]
    print(f"check_elastic_runs: ok ({before} -> {after} ranks, resumed at step {resume['step'] + 1} of {steps}, "
          f"{resume['steps_redone']} steps redone, restart {resume['restart_s']:.1f} s: down {resume['down_s']:.2f}, "
          f"join {resume['join_s']:.2f}, setup {resume['setup_s']:.2f}, load {resume['restore_s']:.2f})")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        sys.exit(f"check_elastic_runs: {e}")
