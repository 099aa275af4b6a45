#!/usr/bin/python3
"""dtrain-report on studies that dtrain itself wrote, one per input form of docs/studies.md:
  study-local  the runners' layout, by deploy/local/run_study.sh (1 and 2 ranks, profiled);
  plain        plain runs as a user makes them: `{ time mpirun -np N dtrain --log-dir RUN_DIR; }` with the
               console in RUN_DIR/stdout.log, at 1 and 2 ranks, 2 repetitions each;
  plain-gan    one such run of biggan, whose metrics are not a classifier's;
  katib-only   a launcher output alone (its run directory elsewhere), in a hand-made size/repetition tree;
  runlogger    the run log with every record kind that the real RunLogger writes (GPU samples among them),
               from the unit test that writes it.
Every value in the report's CSVs is checked against the run logs and consoles it came from, every run log
against the run-log schema, and every field the report reads against the fields the schema declares; the
report page is opened in headless Chromium, which must show every plot (screenshot: DTRAIN_SCREENSHOT_DIR).
Usage: report_test.py REPORT_COMMAND DTRAIN MPIEXEC UNIT_TEST_BINARY [MPIEXEC_FLAGS]"""

import csv
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "report"))
from dtrain_report import formats  # noqa: E402
from dtrain_report.tables import READS  # noqa: E402

sys.path.insert(0, str(ROOT / "test" / "support"))
from mpi_env import allow_root_mpi  # noqa: E402
from browser import browser, images, screenshot  # noqa: E402

# bash's `time` output, read here independently of the report.
REAL = re.compile(r"^real\s+(\d+)m([0-9.]+)s$")
FAST = ["--workload", "mnist", "--synthetic", "--epochs", "2", "--max-steps", "3", "--eval-samples", "200",
        "--sample-interval-s", "0.25", "--device", "cpu", "--backend", "mpi", "--progress", "off"]

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)
    return condition


def close(a, b, tol=1e-9):
    return abs(float(a) - float(b)) <= tol * max(1.0, abs(float(b)))


def timed_launch(mpiexec, flags, ranks, dtrain_args, console):
    """`{ time mpirun -np N dtrain ARGS; } > console 2>&1`, as a user or a job script runs it."""
    command = " ".join(shlex.quote(a) for a in [mpiexec, "-np", str(ranks), *flags, *dtrain_args])
    console.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["bash", "-c", f"{{ time {command} ; }} > {shlex.quote(str(console))} 2>&1"], timeout=600)
    check(proc.returncode == 0, f"{' '.join(dtrain_args)} at {ranks} ranks exited {proc.returncode}:\n"
                                f"{console.read_text(errors='replace')[-3000:]}")


def real_seconds(console):
    for line in console.read_text().splitlines():
        m = REAL.match(line.strip())
        if m:
            return int(m.group(1)) * 60 + float(m.group(2))
    return math.nan


def records(run_dir, kind):
    """The run log's records of `kind`; the half record of a killed run (made below) is left out."""
    found = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("event") == kind:
            found.append(record)
    return found


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def make_studies(root, dtrain, mpiexec, flags, unit_tests):
    studies = {}
    # The runners' layout, by the local runner.
    local = root / "study-local"
    proc = subprocess.run(["bash", str(ROOT / "deploy" / "local" / "run_study.sh"), "--sizes", "1 2", "--reps", "1",
                           "--out", str(local), "--dtrain", dtrain, "--label", "zone=lab", "--", *FAST,
                           "--profile-steps", "2:3"], capture_output=True, text=True, timeout=900)
    check(proc.returncode == 0, f"run_study.sh failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    studies["study-local"] = local
    # Its network's allreduce sweep, as dtrain_allreduce_bench writes it, calibrates the scaling model.
    bench = Path(dtrain).parent / "dtrain_allreduce_bench"
    if bench.exists():
        (local / "calibration").mkdir()
        proc = subprocess.run([mpiexec, *flags, "-np", "2", str(bench), "--backend", "mpi", "--min-bytes", "64K",
                               "--max-bytes", "4M", "--factor", "4", "--iters", "5", "--json",
                               str(local / "calibration" / "allreduce-n02.json")], capture_output=True, text=True,
                              timeout=300)
        check(proc.returncode == 0, f"dtrain_allreduce_bench failed: {proc.stdout[-1000:]}{proc.stderr[-1000:]}")
    else:
        print(f"report_test: no {bench} (a build without -DDTRAIN_BUILD_BENCH=ON): the scaling model is not checked")

    # Plain runs, the console of each beside its run directory.
    plain = root / "plain"
    for ranks in (1, 2):
        for rep in (1, 2):
            run_dir = plain / f"n{ranks}-rep{rep}"
            timed_launch(mpiexec, flags, ranks, [dtrain, *FAST, "--log-dir", str(run_dir)], run_dir / "stdout.log")
    studies["plain"] = plain
    gan = root / "plain-gan" / "biggan"
    timed_launch(mpiexec, flags, 1, [dtrain, "--workload", "biggan", "--synthetic", "--epochs", "2", "--max-steps", "2",
                                     "--batch-size", "8", "--eval-samples", "32", "--device", "cpu", "--backend", "mpi",
                                     "--progress", "off", "--log-dir", str(gan)], gan / "stdout.log")
    studies["plain-gan"] = root / "plain-gan"

    # A launcher output alone: its run directory went elsewhere (a node's local disk, say).
    katib = root / "katib-only"
    timed_launch(mpiexec, flags, 2, [dtrain, *FAST, "--log-dir", str(root / "elsewhere")],
                 katib / "8" / "rep2" / "launcher.log")
    (katib / "notes.txt").write_text("nothing to see\n")  # no Katib or time lines: no run
    studies["katib-only"] = katib

    # The RunLogger's every record kind, as a plain run directory.
    logger_dir = root / "runlogger" / "20261125T101500Z-mnist"
    proc = subprocess.run([unit_tests, "the RunLogger writes every record kind of the run log"],
                          env={**os.environ, "DTRAIN_RUN_LOG_OUT": str(logger_dir)}, capture_output=True, text=True)
    check(proc.returncode == 0, f"the unit test writing every record kind failed: {proc.stdout}{proc.stderr}")
    studies["runlogger"] = root / "runlogger"
    return studies


def check_plain_run(run, run_dir, ranks, rep, epochs_csv, samples_csv):
    console = run_dir.parent / "stdout.log"
    end = records(run_dir, "run_end")[-1]
    epochs = records(run_dir, "epoch_end")
    name = run["run"]
    check((run["workload"], run["nodes"], run["world_size"], run["repetition"]) == ("mnist", str(ranks), str(ranks), str(rep)),
          f"{name}: workload {run['workload']}, nodes {run['nodes']}, world size {run['world_size']}, "
          f"repetition {run['repetition']}")
    real = real_seconds(console)
    check(not math.isnan(real) and close(run["real_s"], real) and close(run["wall_s"], real),
          f"{name}: real_s {run['real_s']}, wall_s {run['wall_s']}; bash time's real in its console is {real}")
    check(float(run["wall_s"]) > float(run["total_s"]) > 0 and close(run["total_s"], end["total_s"]),
          f"{name}: total_s {run['total_s']}, the run log's {end['total_s']}, wall {run['wall_s']}")
    check(close(run["samples_per_s"], sum(e["samples_per_s"] for e in epochs) / len(epochs)),
          f"{name}: samples_per_s {run['samples_per_s']} is not the mean over its epochs")
    check(close(run["final_test_accuracy"], end["final_test_accuracy"]) and
          close(run["final_test_loss"], end["final_test_loss"]), f"{name}: final metrics")
    check(close(run["peak_rss_bytes"], max(end["peak_rss_bytes"])), f"{name}: peak RSS")
    check(close(run["bytes_allreduced_per_step"], epochs[0]["bytes_allreduced_per_step"]) and
          (float(run["bytes_allreduced_per_step"]) > 0) == (ranks > 1), f"{name}: bytes allreduced per step")
    mine = [e for e in epochs_csv if e["run"] == name]
    check([int(e["epoch"]) for e in mine] == [e["epoch"] for e in epochs] and
          all(close(a["train_loss"], b["train_loss"]) and close(a["test_accuracy"], b["test_accuracy"])
              for a, b in zip(mine, epochs)), f"{name}: epochs.csv rows {mine}")
    check(sum(s["run"] == name for s in samples_csv) == len(records(run_dir, "sample")), f"{name}: samples.csv rows")


def main():
    report = [sys.argv[1]]
    dtrain, mpiexec, unit_tests = sys.argv[2], sys.argv[3], sys.argv[4]
    flags = sys.argv[5].split() if len(sys.argv) > 5 and sys.argv[5] else []
    allow_root_mpi()

    # The report reads only fields that dtrain's schema declares.
    for kind, fields in READS.items():
        for f in fields:
            check(formats.declares(kind, f), f"the report reads '{f}' of {kind} records, which the schema does not declare")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        studies = make_studies(root, dtrain, mpiexec, flags, unit_tests)
        if failures:
            return
        # What dtrain wrote matches its schema (the report's inputs are the real thing).
        for study in studies.values():
            for log in study.rglob("events.jsonl"):
                problems, _ = formats.schema_errors(log)
                check(not problems, f"{log}: {problems[:3]}")
        # A run killed in the middle of a write leaves half a record.
        killed = next((studies["plain"] / "n1-rep2").glob("*/events.jsonl"))
        line = killed.read_text().splitlines()[-1]
        with open(killed, "a") as f:
            f.write(line[: len(line) // 2])

        out = root / "report"
        proc = subprocess.run(report + [str(s) for s in studies.values()] + ["--out", str(out)],
                              capture_output=True, text=True)
        check(proc.returncode == 0, f"dtrain-report exited {proc.returncode}: {proc.stderr}")
        check("line(s) are not JSON records and were skipped" in proc.stderr, "the half-written record is reported: " + proc.stderr)
        runs = {r["run"]: r for r in rows(out / "runs.csv")}
        plain_runs = {f"plain/n{n}-rep{r}/{d.name}": (n, r, d) for n in (1, 2) for r in (1, 2)
                      for d in (studies["plain"] / f"n{n}-rep{r}").iterdir() if d.is_dir()}
        gan_dir = next(d for d in (studies["plain-gan"] / "biggan").iterdir() if d.is_dir())
        expected = sorted(["study-local/n01-r1", "study-local/n02-r1", *plain_runs, f"plain-gan/biggan/{gan_dir.name}",
                           "katib-only/8/rep2/launcher.log", "runlogger/20261125T101500Z-mnist"])
        check(sorted(runs) == expected, f"runs found: {sorted(runs)}, expected {expected}")
        if failures:
            return
        # No run without its workload, size or accelerator: no "unknown" or "? nodes" series in any plot.
        for name, run in runs.items():
            check(run["workload"] not in ("", "unknown") and run["nodes"] != "" and
                  run["accelerator"] not in ("", "unknown"), f"{name}: workload {run['workload']}, nodes "
                                                             f"{run['nodes']}, accelerator {run['accelerator']}")
        epochs_csv = rows(out / "epochs.csv")
        samples_csv = rows(out / "samples.csv")

        # Plain runs: one row each, bash time's real from the console beside the run directory.
        plain_rows = [r for r in runs if r.startswith("plain/")]
        check(len(plain_rows) == 4, f"the plain study gives {len(plain_rows)} rows, expected 4")
        for name, (ranks, rep, run_dir) in plain_runs.items():
            check_plain_run(runs[name], run_dir, ranks, rep, epochs_csv, samples_csv)

        # The runner's layout: its labels and result files.
        for n in (1, 2):
            run = runs[f"study-local/n0{n}-r1"]
            check((run["platform"], run["nodes"], run["zone"], run["result"]) == ("local", str(n), "lab", "succeeded"),
                  f"study-local n{n}: {run}")
            check(float(run["wall_s"]) > float(run["total_s"]) > 0, f"study-local n{n}: wall {run['wall_s']}")
        # The scaling model, calibrated by the study's real sweep: the 2-rank run is its reference, which
        # it reproduces; the 1-rank run (no communication) is not predicted.
        calibrated = (studies["study-local"] / "calibration").exists()
        model = rows(out / "model.csv")
        if calibrated:
            check(len(model) == 1 and model[0]["platform"] == "local" and model[0]["nodes"] == "2" and
                  close(model[0]["measured_over_predicted"], 1.0, 1e-6) and float(model[0]["bandwidth_gbps"]) > 0 and
                  model[0]["calibration"].endswith("allreduce-n02.json"), f"model.csv: {model}")
        ops = rows(out / "ops.csv")
        check({o["run"] for o in ops} == {"study-local/n01-r1", "study-local/n02-r1"} and
              any(o["name"] == "aten::convolution_backward" for o in ops), f"ops.csv runs {({o['run'] for o in ops})}")

        # A GAN's own metrics become epoch columns; the Katib text copies of them do not.
        gan_name = f"plain-gan/biggan/{gan_dir.name}"
        gan_epochs = records(gan_dir, "epoch_end")
        mine = [e for e in epochs_csv if e["run"] == gan_name]
        for column in ("train_d_loss", "train_g_loss", "test_d_loss", "test_g_loss", "test_d_accuracy"):
            check(column in mine[0] and all(close(a[column], b[column]) for a, b in zip(mine, gan_epochs)),
                  f"biggan epochs.csv column {column}: {[e.get(column) for e in mine]}")
        check(not {"d_loss", "g_loss", "loss", "accuracy"} & set(epochs_csv[0]),
              f"epochs.csv reads the Katib text copies: {sorted(epochs_csv[0])}")
        gan = runs[gan_name]
        check(gan["workload"] == "biggan" and close(gan["real_s"], real_seconds(gan_dir.parent / "stdout.log")),
              f"biggan run: {gan['workload']}, real_s {gan['real_s']}")

        # A launcher output alone: dtrain's first line names the workload and world size, its Katib lines
        # are the epochs, bash time the wall time, the path the size and repetition.
        katib = runs["katib-only/8/rep2/launcher.log"]
        console = studies["katib-only"] / "8" / "rep2" / "launcher.log"
        pairs = [p for line in console.read_text().splitlines() for p in formats.console_line("katib_metric").parse_all(line)]
        accuracies = [float(p["value"]) for p in pairs if p["name"] == "accuracy"]
        check((katib["workload"], katib["world_size"], katib["nodes"], katib["repetition"], katib["source"]) ==
              ("mnist", "2", "8", "2", "launcher output"), f"launcher output alone: {katib}")
        check(close(katib["wall_s"], real_seconds(console)) and katib["epochs"] == "2" and
              close(katib["final_test_accuracy"], accuracies[-1]), f"launcher output alone: figures {katib}")
        check([float(e["test_accuracy"]) for e in epochs_csv if e["run"] == "katib-only/8/rep2/launcher.log"] == accuracies,
              "Katib lines as epochs")

        # The RunLogger's own records: GPU samples, MFU, the profile whose table is not there.
        logger_dir = studies["runlogger"] / "20261125T101500Z-mnist"
        logger = runs["runlogger/20261125T101500Z-mnist"]
        gpu = [s["gpu_util_percent"] for s in records(logger_dir, "sample") if "gpu_util_percent" in s]
        check(close(logger["peak_gpu_util_percent"], max(gpu)), f"peak GPU utilisation {logger['peak_gpu_util_percent']}")
        mfu = [e["mfu"] for e in records(logger_dir, "epoch_end") if "mfu" in e]
        check(logger["mfu"] != "" and close(logger["mfu"], sum(mfu) / len(mfu)), f"mfu {logger['mfu']}, epochs' {mfu}")
        check("cannot read the profile table" in proc.stderr, "a profile record whose table is missing is reported")

        # Plots: valid PNGs, all shown on the index page.
        pngs = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png"))
        resources = sorted(f"resources/{re.sub(r'[^A-Za-z0-9._-]+', '_', r).strip('_')}.png"
                           for r in runs if r != "katib-only/8/rep2/launcher.log")
        # straggler_scores.png: the 2-rank runs' waits per rank.
        expected_pngs = sorted(["bytes_vs_batch.png", "epochs.png", "tflops.png", "time_vs_nodes.png", "top_ops.png",
                                "straggler_scores.png", *resources] + (["step_time_vs_nodes.png"] if calibrated else []))
        check(pngs == expected_pngs, f"plots {pngs}, expected {expected_pngs}")
        index = (out / "index.html").read_text()
        for p in pngs:
            with Image.open(out / p) as image:
                image.verify()
            with Image.open(out / p) as image:
                check(image.format == "PNG" and image.size[0] > 300 and image.size[1] > 200, f"{p}: {image.size}")
            check(p in index, f"index.html does not show {p}")

        # The page as a user's browser shows it: every plot loaded and drawn at a readable size, the run
        # table there, and a page that is not blank. The screenshot stays for a person to look at.
        shots = Path(os.environ.get("DTRAIN_SCREENSHOT_DIR", root))
        shots.mkdir(parents=True, exist_ok=True)
        with browser() as driver:
            driver.get((out / "index.html").as_uri())
            shown = {i["src"]: i for i in images(driver)}
            for p in pngs:
                img = shown.get(p)
                check(img is not None and img["loaded"] and img["shown"][0] >= 400 and img["shown"][1] >= 200,
                      f"index.html in Chromium: plot {p}: {img}")
            check(sorted(shown) == pngs, f"index.html in Chromium shows images {sorted(shown)}, expected {pngs}")
            text = driver.execute_script("return document.body.innerText")
            check("plain/n2-rep1/" in text and "final_test_accuracy" in text, "index.html in Chromium: the run table")
            drawn = screenshot(driver, str(shots / "report-index.png"))
            check(drawn > 0.1, f"index.html in Chromium: only {drawn:.1%} of the page differs from its background")
            print(f"report_test: index.html in Chromium: {len(shown)} plots loaded, {drawn:.0%} of the page drawn, "
                  f"screenshot {shots / 'report-index.png'}")

        # No runs at all: a clear error, exit 3; a study that does not exist: exit 2.
        empty = root / "empty"
        empty.mkdir()
        proc = subprocess.run(report + [str(empty), "--out", str(root / "r2")], capture_output=True, text=True)
        check(proc.returncode == 3 and "no runs found" in proc.stderr, f"empty study: {proc.returncode} {proc.stderr}")
        proc = subprocess.run(report + [str(root / "missing"), "--out", str(root / "r3")], capture_output=True, text=True)
        check(proc.returncode == 2 and "does not exist" in proc.stderr, f"missing study: {proc.returncode} {proc.stderr}")

        check_hostile_study(report, root, studies["plain"] / "n1-rep1")
        check_planted(report, root, studies["study-local"] / "n01-r1")


def check_hostile_study(report, root, run_dir):
    """A study as a shared file system may hold it, from a real run directory: a run directory whose name
    is not UTF-8, a run log with lines that are JSON but not records, another tool's events.jsonl, and a
    directory the reader may not open. Every run that can be read is reported, nothing crashes, and what is
    left out is said."""
    import shutil
    hostile = root / "hostile"
    hostile.mkdir()
    shutil.copytree(run_dir, hostile / "good")
    shutil.copytree(run_dir, os.fsdecode(bytes(hostile / "name") + b"\xff\xfe"))
    shutil.copytree(run_dir, hostile / "lines")
    sub = next(p.name for p in run_dir.iterdir() if (p / "events.jsonl").is_file())
    with open(hostile / "lines" / sub / "events.jsonl", "a") as f:
        f.write("[1, 2, 3]\n42\n\"text\"\n")
    (hostile / "foreign").mkdir()
    (hostile / "foreign" / "events.jsonl").write_text('{"loss": 0.5}\n{"loss": 0.4}\n')
    shutil.copytree(run_dir, hostile / "locked")
    out = root / "r-hostile"
    command = list(report)
    if os.geteuid() == 0:
        # root reads any directory: the report runs as another user, to whom "locked" is closed.
        command = ["setpriv", "--reuid=23456", "--regid=23456", "--clear-groups"] + command
        out.mkdir()
        os.chown(out, 23456, 23456)  # the report's --out is its user's own
        for d in [root, hostile]:
            os.chmod(d, 0o755)
        subprocess.run(["chmod", "-R", "a+rX", str(hostile)], check=True)
    os.chmod(hostile / "locked", 0)
    env = {**os.environ, "MPLCONFIGDIR": str(out / ".matplotlib")}
    proc = subprocess.run(command + [str(hostile), "--out", str(out)], capture_output=True, text=True, env=env)
    os.chmod(hostile / "locked", 0o755)
    check(proc.returncode == 0, f"hostile study: exit {proc.returncode}: {proc.stderr[-2000:]}")
    if proc.returncode != 0:
        return
    runs = {r["run"] for r in rows(out / "runs.csv")}
    check(runs == {f"hostile/good/{sub}", f"hostile/lines/{sub}", f"hostile/name\\xff\\xfe/{sub}"},
          f"hostile study: runs {sorted(runs)}, expected good, lines and the name with its bytes shown as \\xNN")
    check(f"lines/{sub}/events.jsonl: 3 line(s) are not JSON records and were skipped" in proc.stderr,
          f"hostile study: no warning about the lines that are not records: {proc.stderr}")
    check("foreign/events.jsonl holds no dtrain run log records" in proc.stderr,
          f"hostile study: no warning about another tool's events.jsonl: {proc.stderr}")
    check("cannot read the directory " + str(hostile / "locked") in proc.stderr and "any run in it is left out" in proc.stderr,
          f"hostile study: no warning about the directory it could not read: {proc.stderr}")
    for csv_file in out.glob("*.csv"):
        csv_file.read_bytes().decode("utf-8")  # raises if any output is not UTF-8
    print(f"report_test: hostile study: {len(runs)} runs reported, the unreadable and foreign ones named")


def check_planted(report, root, run_dir):
    """What another user may leave in a shared study or --out: labels.yaml as an alias bomb (a few KiB that
    expand to billions of nodes), links under the report's own file names in --out. The bomb is refused at
    once and named, the links are replaced and not written through, and an --out that every user can write
    is refused unless --allow-shared-dirs says it is meant."""
    import shutil
    import time
    study = root / "planted"
    shutil.copytree(run_dir, study / "n01-r1")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(9))
    (study / "n01-r1" / "labels.yaml").write_text(bomb + "platform: local\n")
    out = root / "r-planted"
    out.mkdir()
    victim = root / "victim.txt"
    victim.write_text("precious\n")
    for name in ("index.html", "runs.csv", "epochs.png"):
        os.symlink(victim, out / name)
    os.symlink(victim, out / "resources")
    started = time.monotonic()
    proc = subprocess.run(report + [str(study), "--out", str(out)], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    check(proc.returncode == 2 and "'" + str(out / "resources") + "' is in the way" in proc.stderr,
          f"planted: a link as the resources directory is refused: {proc.returncode} {proc.stderr[-600:]}")
    os.unlink(out / "resources")
    started = time.monotonic()
    proc = subprocess.run(report + [str(study), "--out", str(out)], capture_output=True, text=True, timeout=120)
    took = max(took, time.monotonic() - started)
    check(proc.returncode == 0, f"planted: exit {proc.returncode}: {proc.stderr[-2000:]}")
    check("labels.yaml: found an alias (*a); labels and results have no use for aliases" in proc.stderr and took < 60,
          f"planted: the alias bomb is refused at once ({took:.1f} s) and named: {proc.stderr[-1000:]}")
    check(victim.read_text() == "precious\n" and not (out / "index.html").is_symlink() and
          not (out / "runs.csv").is_symlink() and "n01-r1" in (out / "runs.csv").read_text(),
          "planted: the links under the report's names are replaced, the file they named untouched")
    shared = root / "r-shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    proc = subprocess.run(report + [str(study), "--out", str(shared)], capture_output=True, text=True)
    check(proc.returncode == 2 and f"--out '{shared}' can be written by every user (mode 0777) and has no sticky bit"
          in proc.stderr and "--allow-shared-dirs" in proc.stderr, f"planted: a shared --out: {proc.returncode} {proc.stderr}")
    proc = subprocess.run(report + [str(study), "--out", str(shared), "--allow-shared-dirs"], capture_output=True, text=True)
    check(proc.returncode == 0, f"planted: a shared --out with --allow-shared-dirs: {proc.returncode} {proc.stderr[-600:]}")
    print(f"report_test: planted study and --out: the alias bomb refused in {took:.1f} s, links replaced")


main()
print(f"report_test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
