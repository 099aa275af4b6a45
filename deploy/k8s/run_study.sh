#!/usr/bin/env bash
# Runs a scaling study on the current kubectl context: for each size and repetition, renders the MPIJob
# (render_mpijob.py), applies it, waits until it succeeds or fails, keeps the launcher's log (the Katib
# metric lines and bash time's `real` line) and the job's final state, then deletes the job and waits
# for its pods to go, so runs never overlap.
#
#   deploy/k8s/run_study.sh --sizes "2 4 8 16 32" --reps 3 --out study-gke-v100 -- \
#       --platform gke --accelerator nvidia-tesla-v100 --image IMAGE --epochs 10
#
# Everything after `--` goes to render_mpijob.py (except --workers, which the study sets).
# Results: OUT/<size>/rep<r>/{job.yaml,launcher.log,status.yaml}, and OUT/summary.tsv with one line per run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sizes="2 4 8 16 32"
reps=1
out=""
timeout=${STUDY_TIMEOUT:-4h}
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "run_study: unknown option '$1' (expected --sizes, --reps, --out, --timeout, then -- and the render options)" >&2; exit 2 ;;
  esac
done
if [ -z "$out" ]; then echo "run_study: --out DIR is required" >&2; exit 2; fi
case "$timeout" in
  *h) timeout_s=$(( ${timeout%h} * 3600 )) ;;
  *m) timeout_s=$(( ${timeout%m} * 60 )) ;;
  *s) timeout_s=${timeout%s} ;;
  *[!0-9]*|"") echo "run_study: --timeout must be like 90m, 4h or 600s, got '$timeout'" >&2; exit 2 ;;
  *) timeout_s=$timeout ;;
esac
command -v kubectl >/dev/null || { echo "run_study: kubectl not found" >&2; exit 2; }
mkdir -p "$out"
summary="$out/summary.tsv"
[ -f "$summary" ] || printf 'size\trep\tjob\tresult\treal\taccuracy\n' >"$summary"

for size in $sizes; do
  for rep in $(seq 1 "$reps"); do
    dir="$out/$size/rep$rep"
    mkdir -p "$dir"
    /usr/bin/env python3 "$here/render_mpijob.py" --workers "$size" "$@" >"$dir/job.yaml"
    job=$(awk '/^  name: /{print $2; exit}' "$dir/job.yaml")
    namespace_args=()
    ns=$(awk '/^  namespace: /{print $2; exit}' "$dir/job.yaml")
    [ -n "$ns" ] && namespace_args=(-n "$ns")
    echo "run_study: size $size rep $rep: $job"
    kubectl "${namespace_args[@]}" delete mpijob "$job" --ignore-not-found --wait=true >/dev/null
    kubectl "${namespace_args[@]}" apply -f "$dir/job.yaml" >/dev/null
    # An MPIJob ends with a Succeeded or a Failed condition; wait for either.
    result=timeout
    deadline=$(( $(date +%s) + timeout_s ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
      state=$(kubectl "${namespace_args[@]}" get mpijob "$job" \
        -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}' 2>/dev/null || true)
      case "$state" in
        *Succeeded*) result=succeeded; break ;;
        *Failed*) result=failed; break ;;
      esac
      sleep 10
    done
    kubectl "${namespace_args[@]}" logs --tail=-1 \
      -l "training.kubeflow.org/job-name=$job,training.kubeflow.org/job-role=launcher" >"$dir/launcher.log" 2>&1 || true
    kubectl "${namespace_args[@]}" get mpijob "$job" -o yaml >"$dir/status.yaml" 2>&1 || true
    kubectl "${namespace_args[@]}" delete mpijob "$job" --wait=true >/dev/null 2>&1 || true
    kubectl "${namespace_args[@]}" wait --for=delete pod -l "training.kubeflow.org/job-name=$job" --timeout=10m \
      >/dev/null 2>&1 || true
    real=$(awk '$1 == "real" {print $2}' "$dir/launcher.log" | tail -n 1)
    accuracy=$(grep -o 'metricName: accuracy, metricValue: [0-9.]*' "$dir/launcher.log" | tail -n 1 | awk '{print $NF}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$rep" "$job" "$result" "${real:-}" "${accuracy:-}" >>"$summary"
    echo "run_study: size $size rep $rep: $result, real ${real:-?}, accuracy ${accuracy:-?}"
  done
done
echo "run_study: results in $out (summary: $summary)"
