"""dtrain's TensorBoard directories (runtime/log/tensorboard_writer.h, docs/usage.md) read back as a run's
epochs and resource samples, for studies that kept only them (TensorBoard logs synced to a bucket, say).
Read with TensorBoard's own reader, from PyPI's tensorboard package (scripts/install_tensorboard.sh;
dtrain-report runs under its Python with DTRAIN_REPORT_PYTHON), imported only when a study holds such a
directory."""

import math
import re
from functools import reduce
from pathlib import Path

EVENT_FILE = "events.out.tfevents."
RANK_DIR = re.compile(r"^rank(\d+)$")


def is_tensorboard_dir(path):
    return path.is_dir() and any(p.name.startswith(EVENT_FILE) for p in path.iterdir())


def _accumulator(directory):
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return None
    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    accumulator.Reload()
    return accumulator


def read_run(directory, run):
    """Fills `run` (a runs.Run) from dtrain's TensorBoard directory `directory`: an epoch_end-like record
    per epoch from the epoch/ tags, a sample record per resource sample of each rank<r>/ run. The epoch of
    an epoch/ value is its step over the dataset's size, which is the greatest common divisor of those
    steps (epoch e ends at step e x the size)."""
    main = _accumulator(directory)
    if main is None:
        run.warnings.append(f"{directory}: a TensorBoard directory, not read: this Python has no tensorboard "
                            f"package (install it with scripts/install_tensorboard.sh and run dtrain-report with "
                            f"DTRAIN_REPORT_PYTHON set to the Python it prints)")
        return
    by_step = {}
    for tag in main.Tags().get("scalars", []):
        if not tag.startswith("epoch/"):
            continue
        for event in main.Scalars(tag):
            by_step.setdefault(event.step, {})[tag[len("epoch/"):]] = event.value
    steps = sorted(s for s in by_step if s > 0)
    if steps:
        size = reduce(math.gcd, steps)
        run.epochs = [{"epoch": step // size, **by_step[step]} for step in steps]
    for rank_dir in sorted(p for p in directory.iterdir() if p.is_dir() and RANK_DIR.match(p.name)):
        rank = int(RANK_DIR.match(rank_dir.name).group(1))
        accumulator = _accumulator(rank_dir)
        samples = {}
        for tag in accumulator.Tags().get("scalars", []):
            if not tag.startswith("resources/"):
                continue
            for event in accumulator.Scalars(tag):
                sample = samples.setdefault(event.step, {"rank": rank, "unix_time_ms": round(event.wall_time * 1000)})
                sample[tag[len("resources/"):]] = event.value
        run.samples += [samples[step] for step in sorted(samples)]
    run.samples.sort(key=lambda s: (s["rank"], s["unix_time_ms"]))
    run.tensorboard = True
