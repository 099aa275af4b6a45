#!/usr/bin/env bash
# Runs deploy/k8s/run_study.sh against a stand-in kubectl that plays an MPI operator whose jobs succeed,
# and checks the study layout (labels, results, the launcher log, the run log copied from worker 0), the
# summary, and that dtrain-report reads the study. No cluster needed. Usage: run_study_test.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cat >"$work/bin/kubectl" <<'KUBECTL'
#!/usr/bin/env bash
# Stand-in kubectl: records calls; `get mpijob -o jsonpath` reports Succeeded; `logs` prints a launcher log;
# `cp` of worker 0's log directory writes a run log.
echo "$*" >>"$KUBECTL_LOG"
case "$*" in
  "cp "*"-worker-0:/home/dtrain/dtrain-logs "*)
    dest=${*: -1}/20260101T000000Z-mnist
    mkdir -p "$dest"
    printf '%s\n' '{"event":"run_start","workload":"mnist","world_size":2,"config":"train:\n  batch_size: 64\n"}' \
      '{"event":"epoch_end","epoch":1,"samples_per_s":5000.0,"train_s":12.0,"test_accuracy":0.8812}' \
      '{"event":"run_end","total_s":20.5,"final_test_accuracy":0.8812,"final_test_loss":0.3301}' >"$dest/events.jsonl" ;;
  *"get mpijob"*jsonpath*) echo -n "Created Running Succeeded " ;;
  *"logs"*) printf 'epoch 1/1 | ...\n2026-01-01T00:00:00Z INFO     {metricName: accuracy, metricValue: 0.8812};{metricName: loss, metricValue: 0.3301}\n\nreal\t1m2.345s\nuser\t0m1.000s\n' ;;
  *"get mpijob"*) echo "kind: MPIJob" ;;
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
expected=$(printf 'size\trep\tjob\tresult\treal\taccuracy\n2\t1\tdtrain-mnist-gke-2\tsucceeded\t1m2.345s\t0.8812\n2\t2\tdtrain-mnist-gke-2\tsucceeded\t1m2.345s\t0.8812\n4\t1\tdtrain-mnist-gke-4\tsucceeded\t1m2.345s\t0.8812\n4\t2\tdtrain-mnist-gke-4\tsucceeded\t1m2.345s\t0.8812')
if [ "$(cat "$work/study/summary.tsv" 2>/dev/null)" != "$expected" ]; then
  echo "FAIL: summary.tsv differs:"; cat "$work/study/summary.tsv"; failures=$((failures + 1))
fi
for f in labels.yaml job.yaml launcher.log status.yaml result.yaml logs/20260101T000000Z-mnist/events.jsonl; do
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
order=$(grep -oE '^(apply|cp|delete mpijob [a-z0-9-]+ --wait)' "$KUBECTL_LOG" | cut -c1-6 | tr '\n' ' ')
[ "$order" = "apply cp delete apply cp delete apply cp delete apply cp delete " ] ||
  { echo "FAIL: apply/cp/delete order: $order"; failures=$((failures + 1)); }
# dtrain-report reads the study: a row per run with the launcher's time and the copied run log's figures.
if "$root/report/dtrain-report" "$work/study" --out "$work/report" >"$work/report.txt" 2>&1; then
  got=$(/usr/bin/python3 -c 'import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["run"], r["nodes"], r["repetition"], r["wall_s"], r["samples_per_s"], r["final_test_accuracy"], r["study"], r["label_study"])' \
    "$work/report/runs.csv" | sed "s|^study/||")
  want=$(printf '%s\n' "n02-r1 2 1 62.345 5000.0 0.8812 study scaling" "n02-r2 2 2 62.345 5000.0 0.8812 study scaling" \
    "n04-r1 4 1 62.345 5000.0 0.8812 study scaling" "n04-r2 4 2 62.345 5000.0 0.8812 study scaling")
  [ "$got" = "$want" ] || { echo "FAIL: runs.csv:"; echo "$got"; failures=$((failures + 1)); }
else
  echo "FAIL: dtrain-report on the study"; cat "$work/report.txt"; failures=$((failures + 1))
fi
if PATH=$work/bin:$PATH bash "$root/deploy/k8s/run_study.sh" --sizes 2 --out "$work/x" --timeout soon -- --platform gke \
     >/dev/null 2>"$work/err.txt" || ! grep -q "timeout must be like" "$work/err.txt"; then
  echo "FAIL: a bad --timeout was not rejected"; failures=$((failures + 1))
fi
echo "run_study_test: $failures failure(s)"
[ "$failures" -eq 0 ]
