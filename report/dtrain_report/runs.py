"""Finding the runs of a study directory and reading what each left behind.

A run is, in this order of preference (docs/studies.md):
1. a directory holding labels.yaml: the layout the study runners write (labels, result.yaml,
   launcher.log, logs/ with dtrain's run directories);
2. a dtrain run directory (events.jsonl) outside such a directory; the launcher's output that names it
   (dtrain's console line `run <dir>: events.jsonl, ...`) adds bash time's `real`;
3. a text file outside both with Katib metric lines or bash time's `real` line (the output of runs made
   before dtrain wrote run logs, or of other tools): one row, from those lines and dtrain's first line;
4. a dtrain TensorBoard directory (tensorboard/ with event files) outside all of these, a run whose run
   log the study did not keep: its epochs and resource samples (tensorboard.py).
The console lines are read with the patterns of dtrain's console_lines.json (formats.py).
"""

import csv
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import tensorboard
from .formats import console_line

# bash's `time` ("real\t1m2.345s") and POSIX `time -p` ("real 62.34"): not dtrain's, so not in its formats.
BASH_REAL = re.compile(r"^real\s+(?:(\d+)m)?([0-9.]+)s?\s*$")
LOG_SUFFIXES = {".log", ".out", ".txt", ".err"}
CALIBRATION = "calibration"
# Sizes and repetitions in directory names of hand-made studies: "8", "n8", "nodes-8", "8nodes", "rep2", "r2".
NODES_IN_NAME = re.compile(r"^(?:n|nodes?[-_]?)?(\d+)(?:[-_]?nodes?)?$", re.IGNORECASE)
REP_IN_NAME = re.compile(r"(?:^|[-_])(?:rep|r)[-_]?(\d+)$", re.IGNORECASE)


@dataclass
class Run:
    """One run: where it is, its labels and everything read from its files."""

    study: str
    path: Path
    rel: str
    labels: dict = field(default_factory=dict)
    result: dict = field(default_factory=dict)
    launcher: Path = None
    real_s: float = math.nan
    katib: list = field(default_factory=list)  # one dict per Katib line: metric name -> value
    console: dict = field(default_factory=dict)  # dtrain's first console line's fields (workload, world_size, ...)
    console_total_s: float = math.nan  # dtrain's `done:` line
    run_start: dict = None
    run_end: dict = None
    epochs: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    profiles: list = field(default_factory=list)  # `profile` records, with "table_rows" read from the CSV
    errors: list = field(default_factory=list)  # `error` records
    stops: list = field(default_factory=list)  # `stopped` records: a signal ended the run (or a part of it)
    warnings: list = field(default_factory=list)  # what could not be read
    tensorboard: bool = False  # read from a TensorBoard directory alone

    @property
    def run_id(self):
        return f"{self.study}/{self.rel}" if self.rel != "." else self.study


def parse_number(text):
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return math.nan


def read_launcher_log(path, run, with_time=True):
    """Katib lines, dtrain's first and last lines and bash time's `real` line of a launcher's output
    (`with_time` False: the output holds several runs, so its time is none of theirs)."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        run.warnings.append(f"cannot read {path}: {e.strerror}")
        return
    run.launcher = path
    katib, header, done = console_line("katib_metric"), console_line("header"), console_line("done")
    for line in text.splitlines():
        pairs = katib.parse_all(line)
        if pairs:
            run.katib.append({p["name"]: parse_number(p["value"]) for p in pairs})
            continue
        fields = header.parse(line)
        if fields and not run.console:
            run.console = {"workload": fields["workload"], "world_size": int(fields["world_size"]),
                           "hosts": int(fields["host_count"]), "backend": fields["backend"],
                           "device": fields["device"]}
            continue
        fields = done.parse(line)
        if fields:
            run.console_total_s = parse_number(fields["total_s"])
            continue
        m = BASH_REAL.match(line.strip())
        if m and with_time:
            run.real_s = int(m.group(1) or 0) * 60 + float(m.group(2))


def looks_like_launcher_log(path):
    try:
        with open(path, errors="replace") as f:
            head = f.read(4 << 20)
    except OSError:
        return False
    return bool(console_line("katib_metric").regex.search(head)) or \
        any(BASH_REAL.match(l.strip()) for l in head.splitlines())


def named_run_dirs(path):
    """The run directories a launcher output names in dtrain's `run <dir>: events.jsonl, ...` lines, as
    printed (relative to where the job was launched, or absolute); a resumed run names its directory
    again."""
    pattern = console_line("run_directory")
    names = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                fields = pattern.parse(line.rstrip("\n"))
                if fields and fields["run_dir"] not in names:
                    names.append(fields["run_dir"])
    except OSError:
        pass
    return names


def suffix_match(printed, directory):
    """How many trailing path components `printed` (as a console printed it) shares with `directory`:
    0 when even the run directory's own name differs."""
    a = [p for p in Path(printed).parts if p not in ("/", ".")]
    b = directory.resolve().parts
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def common_depth(a, b):
    """The number of leading path components two files share: how close they are in the tree."""
    n = 0
    for x, y in zip(a.resolve().parts, b.resolve().parts):
        if x != y:
            break
        n += 1
    return n


# The runners' labels.yaml and result.yaml are a few hundred bytes of flat key: value lines. A larger file,
# or one with anchors and aliases, is not theirs: an alias bomb (a few KiB whose aliases expand to billions
# of nodes) once took 3.2 GB and 74 s to fail here. Both are refused before anything is built from them,
# as yaml.safe_load refuses !!python tags.
YAML_MAX_BYTES = 1 << 20


class _FlatYamlLoader(yaml.SafeLoader):
    """safe_load's loader, refusing aliases: nothing a study runner writes uses them."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"found an alias (*{event.anchor}); labels and results "
                                              "have no use for aliases, so the file is refused", event.start_mark)
        return super().compose_node(parent, index)


def read_yaml_mapping(path, run):
    try:
        if not path.is_file():  # not a FIFO that would block the read
            raise ValueError("it is not a regular file")
        with open(path, "rb") as f:
            raw = f.read(YAML_MAX_BYTES + 1)
        if len(raw) > YAML_MAX_BYTES:
            raise ValueError(f"it holds more than {YAML_MAX_BYTES} bytes, which no study runner writes")
        data = yaml.load(raw.decode("utf-8", errors="replace"), Loader=_FlatYamlLoader)  # noqa: S506 (safe, no aliases)
    except (OSError, ValueError, yaml.YAMLError) as e:
        run.warnings.append(f"cannot read {path}: {e}")
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        run.warnings.append(f"{path} is not a YAML mapping of labels")
        return {}
    return data


def read_events(path, run):
    """The records of one events.jsonl; a line that is not a JSON object (a run killed mid-write) is
    skipped, and counted in a warning."""
    bad = 0
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        run.warnings.append(f"cannot read {path}: {e.strerror}")
        return
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if not isinstance(record, dict):
            bad += 1
            continue
        kind = record.get("event")
        if kind == "run_start" and run.run_start is None:
            run.run_start = record
        elif kind == "run_end":
            run.run_end = record
        elif kind == "epoch_end":  # a resumed run repeats no epoch, but a re-run one counts once
            run.epochs = [e for e in run.epochs if e.get("epoch") != record.get("epoch")] + [record]
        elif kind == "sample":
            run.samples.append(record)
        elif kind == "profile":
            run.profiles.append(read_profile(path.parent, record, run))
        elif kind == "error":
            run.errors.append(record)
        elif kind == "stopped":
            run.stops.append(record)
    if bad:
        run.warnings.append(f"{path}: {bad} line(s) are not JSON records and were skipped")


def read_profile(run_dir, record, run):
    """A `profile` record with its operations table; the table's path is taken relative to the run
    directory, so a study copied elsewhere still finds it."""
    record = dict(record)
    table = run_dir / Path(record.get("table", "")).name
    rows = []
    try:
        with open(table, newline="") as f:
            for row in csv.DictReader(f):
                rows.append(row)
    except OSError as e:
        run.warnings.append(f"cannot read the profile table {table}: {e.strerror}")
    record["table_rows"] = rows
    return record


def files_under(study_dir, warnings):
    """Every file under `study_dir` (links to directories not followed), in path order. A directory that
    cannot be read is said in `warnings`: the runs in it are left out."""
    found = []

    def unreadable(error):
        warnings.append(f"cannot read the directory {error.filename}: {error.strerror}; any run in it is left out")

    for root, dirs, files in os.walk(study_dir, onerror=unreadable):
        dirs.sort()
        found += [Path(root) / f for f in files]
    return sorted(found)


def fill_from_events(run, files):
    for path in files:
        read_events(path, run)
    run.epochs.sort(key=lambda e: e.get("epoch", 0))
    run.samples.sort(key=lambda s: (s.get("rank", 0), s.get("unix_time_ms", 0)))


def labels_from_path(rel):
    """Nodes and repetition spelled in a hand-made study's directory names, e.g. 8/rep2 or n8-r2."""
    found = {}
    for part in Path(rel).parts:
        for piece in re.split(r"(?<=\d)[-_](?=[a-z])", part, flags=re.IGNORECASE):
            m = NODES_IN_NAME.match(piece)
            if m and "nodes" not in found:
                found["nodes"] = int(m.group(1))
            m = REP_IN_NAME.search(piece)
            if m:
                found["repetition"] = int(m.group(1))
    return found


def shown(name):
    """A file name as the tables, plots and page show it: names that are not UTF-8 (the bytes a file
    system allows) with their odd bytes as \\xNN, so every output stays valid UTF-8 and two names stay two."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def is_run_log(run):
    """Whether the events.jsonl read into `run` is dtrain's: it holds at least one of dtrain's records."""
    return bool(run.run_start or run.run_end or run.epochs or run.samples or run.errors or run.stops or run.profiles)


def discover(study_dir, warnings=None):
    """Every run under `study_dir`, in path order. What looks like a run but is not one (another tool's
    events.jsonl) is left out, and said in `warnings`."""
    warnings = [] if warnings is None else warnings
    study_dir = Path(study_dir)
    study = shown(study_dir.resolve().name)
    runs = []
    claimed = set()  # directories and files that belong to a run already

    def rel(path):
        return shown(os.path.relpath(path, study_dir))

    # A study's calibration/ holds what measures the platform, not runs of the study: the allreduce
    # sweeps, the emulator's floor and its solo runs (model.py reads those).
    files = [f for f in files_under(study_dir, warnings)
             if CALIBRATION not in f.relative_to(study_dir).parts[:-1]]
    events = [f for f in files if f.name == "events.jsonl"]

    # 1. Runner layout.
    for labels in [f for f in files if f.name == "labels.yaml"]:
        d = labels.parent
        run = Run(study=study, path=d, rel=rel(d))
        run.labels = read_yaml_mapping(labels, run)
        if (d / "result.yaml").is_file():
            run.result = read_yaml_mapping(d / "result.yaml", run)
        if (d / "launcher.log").is_file():
            read_launcher_log(d / "launcher.log", run)
        fill_from_events(run, [f for f in events if d in f.parents])
        runs.append(run)
        claimed.add(d.resolve())

    def inside_claimed(path):
        p = path.resolve()
        return any(c == p or c in p.parents for c in claimed)

    # 2. Plain dtrain run directories, with the launcher output that names them.
    plain = [p.parent for p in events if not inside_claimed(p)]
    text_files = [p for p in files if p.suffix in LOG_SUFFIXES and p.is_file() and not inside_claimed(p)]
    names = {t: named_run_dirs(t) for t in text_files}
    used_text = set()
    for d in plain:
        run = Run(study=study, path=d, rel=rel(d))
        fill_from_events(run, [d / "events.jsonl"])
        if not is_run_log(run) and not any(w.startswith("cannot read") for w in run.warnings):
            warnings.append(f"{d / 'events.jsonl'} holds no dtrain run log records (run_start, epoch_end, ...): "
                            f"not a dtrain run, left out")
            continue
        # The output naming this directory by the longest tail of its path; of equals, the nearest.
        best = max(((max(suffix_match(n, d) for n in printed), common_depth(t, d), t)
                    for t, printed in names.items() if printed), default=None, key=lambda c: c[:2])
        if best is not None and best[0] > 0:
            launcher = best[2]
            # A resumed run names its directory again, maybe from another working directory.
            runs_named = len({Path(n).name for n in names[launcher]})
            read_launcher_log(launcher, run, with_time=runs_named == 1)
            if runs_named > 1:
                run.warnings.append(f"{launcher} holds the output of {runs_named} runs; its time is given to "
                                    f"none of them")
        runs.append(run)
        claimed.add(d.resolve())
    # An output that names a run directory of this study is that run's, not a run of its own (a second
    # copy of a console, say).
    for t, printed in names.items():
        if any(suffix_match(n, d) > 0 for n in printed for d in plain):
            used_text.add(t.resolve())

    # 3. Launcher output alone.
    for t in text_files:
        if t.resolve() in used_text or inside_claimed(t) or not looks_like_launcher_log(t):
            continue
        run = Run(study=study, path=t, rel=rel(t))
        read_launcher_log(t, run)
        runs.append(run)

    # 4. TensorBoard directories alone (a run's tensorboard/, whose rank<r>/ runs belong to it).
    event_dirs = sorted({p.parent for p in files if p.name.startswith(tensorboard.EVENT_FILE)})
    for d in event_dirs:
        if inside_claimed(d) or (tensorboard.RANK_DIR.match(d.name) and d.parent in event_dirs):
            continue
        where = d.parent if d.name == "tensorboard" and d.parent != study_dir else d
        run = Run(study=study, path=d, rel=rel(where))
        tensorboard.read_run(d, run)
        runs.append(run)
        claimed.add(d.resolve())
    return sorted(runs, key=lambda r: r.rel)
