#!/usr/bin/env bash
# Runs deploy/k8s/run_study.sh against a stand-in kubectl that plays an MPI operator whose jobs succeed,
# and checks the study layout (labels, results, the launcher log, the run log copied from worker 0), the
# summary, and that dtrain-report reads the study. No cluster needed: what the stand-in's launcher prints
# and worker 0 holds are the console and run directory of a real 2-rank dtrain run made here first.
# Usage: run_study_test.sh DTRAIN MPIEXEC [MPIEXEC_FLAGS]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dtrain=$1
mpiexec=$2
mpi_flags=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$root/scripts/mpi_env.sh"
# The job's real output: the launcher's console with bash time's lines, as the MPIJob's launcher runs it.
{ time "$mpiexec" -np 2 $mpi_flags "$dtrain" --workload mnist --synthetic --epochs 1 --max-steps 3 --eval-samples 200 \
    --device cpu --backend mpi --progress off --log-dir "$work/job-logs" ; } >"$work/job-console.txt" 2>&1 ||
  { echo "FAIL: the job's dtrain run"; cat "$work/job-console.txt"; exit 1; }
JOB_RUN_DIR=$(ls -d "$work"/job-logs/*/)
export JOB_CONSOLE=$work/job-console.txt JOB_RUN_DIR
mkdir -p "$work/bin"
cat >"$work/bin/kubectl" <<'KUBECTL'
#!/usr/bin/env bash
# Stand-in kubectl: records calls; `get mpijob|trainjob -o jsonpath` reports Succeeded|Complete; `get pod`
# names a TrainJob's first node pod; `logs` prints the job's console; `cp` of rank 0's log directory (an
# MPIJob's worker 0, a TrainJob's first node) copies the job's run directory.
echo "$*" >>"$KUBECTL_LOG"
case "$*" in
  "cp "*"-worker-0:/home/dtrain/dtrain-logs "*|"cp "*"-node-0-0-x7k2p:/home/dtrain/dtrain-logs "*)
    mkdir -p "${*: -1}" && cp -r "$JOB_RUN_DIR" "${*: -1}/" ;;
  *"get mpijob"*jsonpath*) echo -n "Created Running Succeeded " ;;
  *"get trainjob"*jsonpath*) echo -n "Created Complete " ;;
  *"get pod"*"jobset.sigs.k8s.io/jobset-name="*"replicatedjob-name=node,batch.kubernetes.io/job-completion-index=0"*)
    name=${*##*jobset-name=}; echo -n "${name%%,*}-node-0-0-x7k2p" ;;
  *"logs"*) cat "$JOB_CONSOLE" ;;
  *"get mpijob"*) echo "kind: MPIJob" ;;
  *"get trainjob"*) echo "kind: TrainJob" ;;
esac
KUBECTL
chmod +x "$work/bin/kubectl"
export KUBECTL_LOG=$work/kubectl.log
failures=0
if ! PATH=$work/bin:$PATH bash "$root/deploy/k8s/run_study.sh" --sizes "2 4" --reps 2 --out "$work/study" \
     --label study=scaling -- \
     --platform gke --accelerator nvidia-tesla-v100 --image img:1 >"$work/out.txt" 2>&1; then
  echo "FAIL: run_study.sh exited non-zero"; cat "$work/out.txt"; failures=$((failures + 1))
fi
real=$(awk '$1 == "real" {print $2}' "$JOB_CONSOLE")
accuracy=$(grep -o 'metricName: accuracy, metricValue: [0-9.]*' "$JOB_CONSOLE" | tail -n 1 | awk '{print $NF}')
expected=$(printf 'size\trep\tjob\tresult\treal\taccuracy\n'
           for size in 2 4; do for rep in 1 2; do
             printf '%s\t%s\tdtrain-mnist-gke-%s\tsucceeded\t%s\t%s\n' "$size" "$rep" "$size" "$real" "$accuracy"
           done; done)
if [ "$(cat "$work/study/summary.tsv" 2>/dev/null)" != "$expected" ]; then
  echo "FAIL: summary.tsv differs:"; cat "$work/study/summary.tsv"; failures=$((failures + 1))
fi
run_name=$(basename "$JOB_RUN_DIR")
for f in labels.yaml job.yaml launcher.log status.yaml result.yaml "logs/$run_name/events.jsonl"; do
  [ -s "$work/study/n04-r2/$f" ] || { echo "FAIL: no $f for size 4 rep 2"; failures=$((failures + 1)); }
done
grep -q "replicas: 4" "$work/study/n04-r1/job.yaml" || { echo "FAIL: size 4 job has no 4 workers"; failures=$((failures + 1)); }
grep -q "cleanPodPolicy: None" "$work/study/n04-r1/job.yaml" ||
  { echo "FAIL: study jobs must keep worker 0 until its log is copied"; failures=$((failures + 1)); }
expected_labels=$(printf 'platform: "gke"\nnodes: 4\nranks: 4\ngpus_per_node: 1\naccelerator: "nvidia-tesla-v100"\nrepetition: 2\nrunner: "k8s"\nworkload: "mnist"\nbatch: 64\nstudy: "scaling"')
[ "$(cat "$work/study/n04-r2/labels.yaml")" = "$expected_labels" ] ||
  { echo "FAIL: labels.yaml:"; cat "$work/study/n04-r2/labels.yaml"; failures=$((failures + 1)); }
grep -q '^result: "succeeded"$' "$work/study/n04-r2/result.yaml" && grep -q '^exit_code: 0$' "$work/study/n04-r2/result.yaml" ||
  { echo "FAIL: result.yaml:"; cat "$work/study/n04-r2/result.yaml"; failures=$((failures + 1)); }
# Each run is applied, its run log copied, then it is deleted before the next starts.
order=$(grep -oE '^(apply|cp|delete -f [^ ]+ --wait)' "$KUBECTL_LOG" | cut -c1-6 | tr '\n' ' ')
[ "$order" = "apply cp delete apply cp delete apply cp delete apply cp delete " ] ||
  { echo "FAIL: apply/cp/delete order: $order"; failures=$((failures + 1)); }
# dtrain-report reads the study: a row per run with the launcher's time and the copied run log's figures
# (the labels' sizes, not the copied log's world size of 2).
if "$root/report/dtrain-report" "$work/study" --out "$work/report" >"$work/report.txt" 2>&1; then
  got=$(/usr/bin/python3 -c 'import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["run"], r["nodes"], r["repetition"], r["wall_s"], r["samples_per_s"], r["final_test_accuracy"], r["study"], r["label_study"])' \
    "$work/report/runs.csv" | sed "s|^study/||")
  want=$(/usr/bin/python3 - "$JOB_CONSOLE" "$JOB_RUN_DIR/events.jsonl" <<'PY'
import json, re, sys
real = next(re.match(r"real\s+(\d+)m([0-9.]+)s", l) for l in open(sys.argv[1]) if l.startswith("real"))
records = [json.loads(l) for l in open(sys.argv[2])]
epochs = [r for r in records if r["event"] == "epoch_end"]
end = next(r for r in records if r["event"] == "run_end")
wall = int(real.group(1)) * 60 + float(real.group(2))
sps = sum(e["samples_per_s"] for e in epochs) / len(epochs)
for size in (2, 4):
    for rep in (1, 2):
        print(f"n0{size}-r{rep} {size} {rep} {wall} {sps} {end['final_test_accuracy']} study scaling")
PY
)
  [ "$got" = "$want" ] || { echo "FAIL: runs.csv:"; echo "$got"; echo "expected:"; echo "$want"; failures=$((failures + 1)); }
else
  echo "FAIL: dtrain-report on the study"; cat "$work/report.txt"; failures=$((failures + 1))
fi
# A TrainJob study (torchrun, Trainer's runtime): the console from the first node pod (found by JobSet's
# labels), the run log copied from it, the labels saying how it ran.
: >"$KUBECTL_LOG"
if ! PATH=$work/bin:$PATH bash "$root/deploy/k8s/run_study.sh" --kind trainjob --sizes 2 --out "$work/study-tj" -- \
     --launcher torchrun --platform usernetes --gpus-per-worker 0 --image img:1 >"$work/out-tj.txt" 2>&1; then
  echo "FAIL: run_study.sh --kind trainjob exited non-zero"; cat "$work/out-tj.txt"; failures=$((failures + 1))
fi
tj=$work/study-tj/n02-r1
if [ "$(cut -f4 "$work/study-tj/summary.tsv" 2>/dev/null | tail -n 1)" = succeeded ] &&
   grep -q '^kind: TrainJob' "$tj/job.yaml" && grep -q 'numNodes: 2' "$tj/job.yaml" &&
   grep -q '^runner: "k8s-trainjob-torchrun"$' "$tj/labels.yaml" && [ -s "$tj/logs/$run_name/events.jsonl" ] &&
   grep -q "^logs --tail=-1 -l jobset.sigs.k8s.io/jobset-name=dtrain-mnist-usernetes-torchrun-2,jobset.sigs.k8s.io/replicatedjob-name=node,batch.kubernetes.io/job-completion-index=0" "$KUBECTL_LOG" &&
   [ "$(grep -oE '^(apply|cp|delete -f [^ ]+ --wait)' "$KUBECTL_LOG" | cut -c1-6 | tr '\n' ' ')" = "apply cp delete " ]; then
  echo "PASS: a TrainJob study: the first node's console and run log, labels runner k8s-trainjob-torchrun"
else
  echo "FAIL: the TrainJob study:"; cat "$work/out-tj.txt" "$work/study-tj/summary.tsv" "$tj/labels.yaml" "$KUBECTL_LOG"
  failures=$((failures + 1))
fi
if PATH=$work/bin:$PATH bash "$root/deploy/k8s/run_study.sh" --sizes 2 --out "$work/x" --timeout soon -- --platform gke \
     >/dev/null 2>"$work/err.txt" || ! grep -q "timeout must be like" "$work/err.txt"; then
  echo "FAIL: a bad --timeout was not rejected"; failures=$((failures + 1))
fi
echo "run_study_test: $failures failure(s)"
[ "$failures" -eq 0 ]
