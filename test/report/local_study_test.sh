#!/usr/bin/env bash
# A local study end to end, as docs/studies.md walks through it: deploy/local/run_study.sh runs synthetic
# mnist at 1 and 2 ranks, 2 repetitions each, one run profiled; dtrain-report, installed by
# `cmake --install` into a temporary prefix, turns it into tables and plots. Checks one row per run with
# its labels and results, both ranks' samples, the profile's operations, and that every PNG is an image.
# Usage: local_study_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $1"; failures=$((failures + 1)); }

if ! bash "$root/deploy/local/run_study.sh" --sizes "1 2" --reps 2 --out "$work/study-local" --dtrain "$build/dtrain" \
     --label batch=64 -- --workload mnist --synthetic --epochs 2 --max-steps 6 --eval-samples 500 \
     --sample-interval-s 0.25 --profile-steps 2:3 --device cpu --backend mpi >"$work/study.txt" 2>&1; then
  fail "run_study.sh failed"; cat "$work/study.txt"
fi
if ! cmake --install "$build" --prefix "$work/prefix" >"$work/install.txt" 2>&1; then
  fail "cmake --install failed"; cat "$work/install.txt"
fi
[ -x "$work/prefix/bin/dtrain" ] || fail "dtrain is not installed"
if ! "$work/prefix/bin/dtrain-report" "$work/study-local" --out "$work/report" >"$work/report.txt" 2>&1; then
  fail "the installed dtrain-report failed"; cat "$work/report.txt"
fi
"${DTRAIN_TEST_PYTHON:-/usr/bin/python3}" - "$work/study-local" "$work/report" <<'PY' || failures=$((failures + 1))
import csv, pathlib, sys
from PIL import Image
study, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def rows(name):
    with open(out / name, newline="") as f:
        return list(csv.DictReader(f))
runs = {r["run"]: r for r in rows("runs.csv")}
assert sorted(runs) == [f"study-local/n0{n}-r{r}" for n in (1, 2) for r in (1, 2)], sorted(runs)
for run_id, r in runs.items():
    n = int(run_id[-4])
    assert (r["platform"], r["nodes"], r["ranks"], r["world_size"], r["batch"]) == ("local", str(n), str(n), str(n), "64"), r
    assert r["result"] == "succeeded" and r["exit_code"] in ("0", "0.0") and r["workload"] == "mnist", r
    assert float(r["wall_s"]) > float(r["total_s"]) > 0, r   # bash time's real includes start-up
    assert float(r["samples_per_s"]) > 0 and float(r["tflops_achieved"]) > 0 and r["epochs"] == "2", r
    assert 0 <= float(r["final_test_accuracy"]) <= 1, r
    # Gradient bytes: 1,199,882 fp32 parameters allreduced per step at 2 ranks, none at 1.
    assert float(r["bytes_allreduced_per_step"]) == (4 * 1199882 if n == 2 else 0), r["bytes_allreduced_per_step"]
epochs = rows("epochs.csv")
assert len(epochs) == 8 and {e["epoch"] for e in epochs} == {"1", "2"}, len(epochs)
samples = rows("samples.csv")
ranks = {(s["run"], s["rank"]) for s in samples}
assert ranks == {(f"study-local/n0{n}-r{r}", str(k)) for n in (1, 2) for r in (1, 2) for k in range(n)}, sorted(ranks)
ops = rows("ops.csv")
assert {o["run"] for o in ops} == set(runs), "every run was profiled"
assert any(o["name"] == "aten::convolution_backward" and o["calls"] in ("4", "4.0") for o in ops), ops[:5]
# The ranks' waits of the 2-rank runs, as their run logs have them, with the hosts of run_start.
import json
for r in (1, 2):
    run_dir = next((study / f"n02-r{r}" / "logs").glob("*/events.jsonl"))
    log = [json.loads(line) for line in run_dir.read_text().splitlines() if line.strip()]
    hosts = next(e for e in log if e["event"] == "run_start")["rank_hosts"]
    mine = sorted((int(x["epoch"]), int(x["rank"]), x["host"], float(x["straggler"]), float(x["comm_wait_cpu_s"]))
                  for x in rows("ranks.csv") if x["run"] == f"study-local/n02-r{r}")
    want = sorted((e["epoch"], k, hosts[k], e["straggler_by_rank"][k], e["comm_wait_cpu_s_by_rank"][k])
                  for e in log if e["event"] == "epoch_end" for k in range(2))
    assert mine == want, (mine, want)
assert not [x for x in rows("ranks.csv") if x["run"].startswith("study-local/n01")], "one rank has no waits to compare"
pngs = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png"))
expected = ["bytes_vs_batch.png", "epochs.png"] + [f"resources/study-local_n0{n}-r{r}.png" for n in (1, 2) for r in (1, 2)] \
    + ["straggler_scores.png", "tflops.png", "time_vs_nodes.png", "top_ops.png"]
assert pngs == expected, pngs
for p in pngs:
    with Image.open(out / p) as image:
        image.verify()
index = (out / "index.html").read_text()
assert all(p in index for p in pngs) and "runs.csv" in index
print(f"local study: {len(runs)} runs, {len(epochs)} epochs, {len(samples)} samples, {len(ops)} op rows, {len(pngs)} plots")
PY
echo "local_study_test: $failures failure(s)"
[ "$failures" -eq 0 ]
