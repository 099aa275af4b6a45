#!/usr/bin/env bash
# Runs a scaling study on the current kubectl context into the study layout of docs/studies.md: for each
# size and repetition, renders the job (an MPIJob: render_mpijob.py; a TrainJob: render_trainjob.py),
# applies it, waits until it succeeds or fails, keeps the log of the pod that prints dtrain's console (the
# Katib lines, and bash time's lines: an MPIJob's or an mpirun TrainJob's launcher, a torchrun TrainJob's
# first node), copies rank 0's run log from the pod it ran in where that pod still runs, then deletes the
# job and waits for its pods to go, so runs never overlap.
#
#   deploy/k8s/run_study.sh --sizes "2 4 8 16 32" --reps 3 --out study-gke-t4 -- \
#       --platform gke --accelerator nvidia-tesla-t4 --image IMAGE --epochs 10
#   deploy/k8s/run_study.sh --kind trainjob --sizes "2 4 8" --out study-gke-l4-trainjob -- \
#       --launcher torchrun --platform gke --accelerator nvidia-l4 --image IMAGE --queue team-a
#   dtrain-report study-gke-t4 study-usernetes-t4 --out report
#
# Everything after `--` goes to the renderer (except --workers, which the study sets, and for an MPIJob
# --clean-pod-policy, which is None so that worker 0 outlives the launcher until its log is copied).
# Options: --kind mpijob|trainjob (default mpijob), --sizes, --reps, --out, --timeout (per run: 90m, 4h,
# 600s; default 4h), --label KEY=VALUE (more labels, repeatable).
# A torchrun TrainJob's nodes exit when training does, so its run log is copied only where rank 0's pod is
# still up; give dtrain a volume (--dtrain-args "--log-dir /mounted/...") to keep it.
# Results: OUT/n<size>-r<rep>/{labels.yaml,job.yaml,launcher.log,status.yaml,result.yaml,logs/}, and
# OUT/summary.tsv with one line per run (result, bash time's real, final accuracy) to follow a study.
# --allow-shared-dirs uses an --out that other users can write (refused without it).
# Ctrl-C (or SIGTERM, SIGHUP) deletes the job in progress (its pods get SIGTERM: the ranks save a
# checkpoint and exit within the grace period), records it as stopped and ends the study; exit 128 + the
# signal.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
STUDY_RUNNER=run_study
# shellcheck source=../study_layout.sh
. "$here/../study_layout.sh"
sizes="2 4 8 16 32"
reps=1
out=""
timeout=${STUDY_TIMEOUT:-4h}
kind=mpijob
allow_shared_dirs=0
label=()
study_parse "the render options" kind sizes reps out timeout label+ allow-shared-dirs? -- "$@"
set -- ${study_rest[@]+"${study_rest[@]}"}
study_check_options "$out" "$sizes" "$reps" ${label[@]+"${label[@]}"}
case "$kind" in
  mpijob|trainjob) ;;
  *) echo "run_study: --kind must be mpijob or trainjob, got '$kind'" >&2; exit 2 ;;
esac
case "$timeout" in
  *h) timeout_s=$(( ${timeout%h} * 3600 )) ;;
  *m) timeout_s=$(( ${timeout%m} * 60 )) ;;
  *s) timeout_s=${timeout%s} ;;
  *[!0-9]*|"") echo "run_study: --timeout must be like 90m, 4h or 600s, got '$timeout'" >&2; exit 2 ;;
  *) timeout_s=$timeout ;;
esac
command -v kubectl >/dev/null || { echo "run_study: kubectl not found" >&2; exit 2; }

# The labels the render options imply (the renderers' defaults where not given).
platform="" accelerator="" gpus=1 workload=mnist batch=64 launcher=torchrun
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  arg=${args[i]} value=""
  case "$arg" in
    --*=*) value=${arg#*=}; arg=${arg%%=*} ;;
    *) [ $((i + 1)) -lt ${#args[@]} ] && value=${args[i + 1]} ;;
  esac
  case "$arg" in
    --platform) platform=$value ;;
    --accelerator) accelerator=$value ;;
    --gpus-per-worker) gpus=$value ;;
    --workload) workload=$value ;;
    --batch-size) batch=$value ;;
    --launcher) launcher=$value ;;
    --workers|--clean-pod-policy) echo "run_study: $arg is set by the study; leave it out of the render options" >&2; exit 2 ;;
  esac
done
[ -n "$platform" ] || { echo "run_study: the render options need --platform" >&2; exit 2; }
[ -n "$accelerator" ] || { if [ "$gpus" = 0 ]; then accelerator=cpu; else accelerator=gpu; fi; }
# What each kind of job needs: the renderer and its study options, the resource kubectl names, the
# conditions that end it, and the labels of the pod with dtrain's console and of the one with rank 0.
if [ "$kind" = mpijob ]; then
  render=("$here/render_mpijob.py" --clean-pod-policy None)
  resource=mpijob succeeded=Succeeded runner_label=k8s
else
  render=("$here/render_trainjob.py")
  resource=trainjob succeeded=Complete runner_label=k8s-trainjob-$launcher
fi
# first_node JOB: a TrainJob's first node pod (JobSet's labels): rank 0's under both launchers (the
# hostfile's first host, node rank 0), and dtrain's console under torchrun.
first_node() {
  echo "jobset.sigs.k8s.io/jobset-name=$1,jobset.sigs.k8s.io/replicatedjob-name=node,batch.kubernetes.io/job-completion-index=0"
}
# console_selector JOB: the pod with dtrain's console, as a label selector.
console_selector() {
  if [ "$kind" = mpijob ]; then
    echo "training.kubeflow.org/job-name=$1,training.kubeflow.org/job-role=launcher"
  elif [ "$launcher" = mpirun ]; then
    echo "jobset.sigs.k8s.io/jobset-name=$1,jobset.sigs.k8s.io/replicatedjob-name=launcher"
  else
    first_node "$1"
  fi
}
# rank0_pod JOB: the pod rank 0 ran in: an MPIJob's worker 0, a TrainJob's first node (its name has a
# random suffix).
rank0_pod() {
  if [ "$kind" = mpijob ]; then
    echo "$1-worker-0"
  else
    kubectl "${namespace_args[@]}" get pod -o jsonpath='{.items[0].metadata.name}' -l "$(first_node "$1")" 2>/dev/null || true
  fi
}
pod_label=$( [ "$kind" = mpijob ] && echo training.kubeflow.org/job-name || echo jobset.sigs.k8s.io/jobset-name )

study_make_out "$out" "$allow_shared_dirs"
summary="$out/summary.tsv"
[ ! -L "$summary" ] || { echo "run_study: '$summary' is a symbolic link, which the study does not follow; remove it" >&2; exit 2; }
[ -f "$summary" ] || printf 'size\trep\tjob\tresult\treal\taccuracy\n' | study_write_file "$summary"
study_trap_stops

for size in $sizes; do
  for rep in $(seq 1 "$reps"); do
    dir=$(study_run_dir "$out" "$size" "$rep")
    study_new_run_dir "$dir"
    ranks=$size
    [ "$gpus" -gt 0 ] 2>/dev/null && ranks=$(( size * gpus ))
    study_write_labels "$dir" platform="$platform" nodes="$size" ranks="$ranks" gpus_per_node="$gpus" \
      accelerator="$accelerator" repetition="$rep" runner="$runner_label" workload="$workload" batch="$batch" \
      ${label[@]+"${label[@]}"}
    /usr/bin/env python3 "${render[@]}" --workers "$size" "$@" >"$dir/job.yaml" ||
      { echo "run_study: the renderer refused the options (above)" >&2; exit 2; }
    # The job's name (an mpirun TrainJob's runtime, first in the file, has the same one).
    job=$(awk '/^  name: /{print $2; exit}' "$dir/job.yaml")
    namespace_args=()
    ns=$(awk '/^  namespace: /{print $2; exit}' "$dir/job.yaml")
    [ -n "$ns" ] && namespace_args=(-n "$ns")
    echo "run_study: size $size rep $rep: $job -> $dir"
    kubectl "${namespace_args[@]}" delete "$resource" "$job" --ignore-not-found --wait=true >/dev/null
    started=$(study_now)
    _study_busy=1  # a stop from here on deletes this job (below) before the study ends
    kubectl "${namespace_args[@]}" apply -f "$dir/job.yaml" >/dev/null
    # An MPIJob ends with a Succeeded or a Failed condition, a TrainJob with Complete or Failed.
    result=timeout
    code=124
    deadline=$(( $(date +%s) + timeout_s ))
    while [ "$(date +%s)" -lt "$deadline" ] && [ "$_study_stop" -eq 0 ]; do
      state=" $(kubectl "${namespace_args[@]}" get "$resource" "$job" \
        -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}' 2>/dev/null || true)"
      case "$state" in
        *" $succeeded "*) result=succeeded; code=0; break ;;
        *" Failed "*) result=failed; code=1; break ;;
      esac
      sleep 10 &
      wait $! || true  # a stop ends the wait at once
    done
    if [ "$_study_stop" -ne 0 ]; then
      # Deleting the job gives its pods SIGTERM: the ranks save a checkpoint and exit within the grace.
      kubectl "${namespace_args[@]}" logs --tail=-1 -l "$(console_selector "$job")" >"$dir/launcher.log" 2>&1 || true
      kubectl "${namespace_args[@]}" delete "$resource" "$job" --ignore-not-found --wait=false >/dev/null 2>&1 || true
      study_write_result "$dir" $(( 128 + _study_stop )) "$started" "$(study_now)" stopped
      printf '%s\t%s\t%s\t%s\t\t\n' "$size" "$rep" "$job" stopped >>"$summary"
      study_exit_if_stopped "size $size rep $rep ($resource $job deleted: its pods stop with a checkpoint):"
    fi
    finished=$(study_now)
    kubectl "${namespace_args[@]}" logs --tail=-1 -l "$(console_selector "$job")" >"$dir/launcher.log" 2>&1 || true
    kubectl "${namespace_args[@]}" get "$resource" "$job" -o yaml >"$dir/status.yaml" 2>&1 || true
    # Rank 0 writes the run log (events.jsonl with every rank's samples) in its pod: MPIJob's worker 0, a
    # TrainJob's first node.
    rank0=$(rank0_pod "$job")
    if [ -z "$rank0" ] ||
       ! kubectl "${namespace_args[@]}" cp "$rank0:/home/dtrain/dtrain-logs" "$dir/logs" >"$dir/copy.log" 2>&1; then
      echo "run_study: warning: could not copy the run log from rank 0's pod ${rank0:-(none found)} (see $dir/copy.log);" \
           "the report will use the console log only" >&2
    fi
    study_write_result "$dir" "$code" "$started" "$finished" "$result"
    kubectl "${namespace_args[@]}" delete -f "$dir/job.yaml" --wait=true >/dev/null 2>&1 || true
    kubectl "${namespace_args[@]}" wait --for=delete pod -l "$pod_label=$job" --timeout=10m >/dev/null 2>&1 || true
    real=$(awk '$1 == "real" {print $2}' "$dir/launcher.log" | tail -n 1)
    accuracy=$(grep -o 'metricName: accuracy, metricValue: [0-9.]*' "$dir/launcher.log" | tail -n 1 | awk '{print $NF}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$rep" "$job" "$result" "${real:-}" "${accuracy:-}" >>"$summary"
    echo "run_study: size $size rep $rep: $result, real ${real:-?}, accuracy ${accuracy:-?}"
    _study_busy=""
    study_exit_if_stopped "after size $size rep $rep:"
  done
done
echo "run_study: results in $out (summary: $summary); tables and plots: dtrain-report $out --out REPORT_DIR"
