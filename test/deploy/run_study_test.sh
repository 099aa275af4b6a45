#!/usr/bin/env bash
# Runs deploy/k8s/run_study.sh against a stand-in kubectl that plays an MPI operator whose jobs succeed,
# and checks the per-run files and the summary. No cluster needed. Usage: run_study_test.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cat >"$work/bin/kubectl" <<'KUBECTL'
#!/usr/bin/env bash
# Stand-in kubectl: records calls; `get mpijob -o jsonpath` reports Succeeded; `logs` prints a launcher log.
echo "$*" >>"$KUBECTL_LOG"
case "$*" in
  *"get mpijob"*jsonpath*) echo -n "Created Running Succeeded " ;;
  *"logs"*) printf 'epoch 1/1 | ...\n2026-01-01T00:00:00Z INFO     {metricName: accuracy, metricValue: 0.8812};{metricName: loss, metricValue: 0.3301}\n\nreal\t1m2.345s\nuser\t0m1.000s\n' ;;
  *"get mpijob"*) echo "kind: MPIJob" ;;
esac
KUBECTL
chmod +x "$work/bin/kubectl"
export KUBECTL_LOG=$work/kubectl.log
failures=0
if ! PATH=$work/bin:$PATH bash "$root/deploy/k8s/run_study.sh" --sizes "2 4" --reps 2 --out "$work/study" -- \
     --platform gke --accelerator nvidia-tesla-v100 --image img:1 >"$work/out.txt" 2>&1; then
  echo "FAIL: run_study.sh exited non-zero"; cat "$work/out.txt"; failures=$((failures + 1))
fi
expected=$(printf 'size\trep\tjob\tresult\treal\taccuracy\n2\t1\tdtrain-mnist-gke-2\tsucceeded\t1m2.345s\t0.8812\n2\t2\tdtrain-mnist-gke-2\tsucceeded\t1m2.345s\t0.8812\n4\t1\tdtrain-mnist-gke-4\tsucceeded\t1m2.345s\t0.8812\n4\t2\tdtrain-mnist-gke-4\tsucceeded\t1m2.345s\t0.8812')
if [ "$(cat "$work/study/summary.tsv" 2>/dev/null)" != "$expected" ]; then
  echo "FAIL: summary.tsv differs:"; cat "$work/study/summary.tsv"; failures=$((failures + 1))
fi
for f in job.yaml launcher.log status.yaml; do
  [ -s "$work/study/4/rep2/$f" ] || { echo "FAIL: no $f for size 4 rep 2"; failures=$((failures + 1)); }
done
grep -q "replicas: 4" "$work/study/4/rep1/job.yaml" || { echo "FAIL: size 4 job has no 4 workers"; failures=$((failures + 1)); }
# Each run is applied, then deleted before the next starts.
order=$(grep -oE '^(apply|delete mpijob [a-z0-9-]+ --wait)' "$KUBECTL_LOG" | cut -c1-6 | tr '\n' ' ')
[ "$order" = "apply delete apply delete apply delete apply delete " ] || { echo "FAIL: apply/delete order: $order"; failures=$((failures + 1)); }
if PATH=$work/bin:$PATH bash "$root/deploy/k8s/run_study.sh" --sizes 2 --out "$work/x" --timeout soon -- --platform gke \
     >/dev/null 2>"$work/err.txt" || ! grep -q "timeout must be like" "$work/err.txt"; then
  echo "FAIL: a bad --timeout was not rejected"; failures=$((failures + 1))
fi
echo "run_study_test: $failures failure(s)"
[ "$failures" -eq 0 ]
