#!/usr/bin/env bash
# Runs a scaling study on the emulated cluster of deploy/local/cluster.sh: for each size, a cluster of
# that many nodes with this platform's network (link rate, MTU, overlay) and CPU share per node; for each
# repetition one launch of dtrain across it (mpirun, or torchrun with one agent per node), timed by
# bash's `time`, into the study layout of docs/studies.md. With --calibrate, first an allreduce sweep of
# the platform's network at the smallest size of 2 or more (calibration/allreduce-nNN.json), from which
# dtrain-report's scaling model predicts every size.
#
#   deploy/local/run_cluster_study.sh --sizes "1 2 4 8" --reps 3 --rate 1gbit --cpu 0.25 --calibrate \
#     --platform bridge --out study/bridge -- --workload mnist --synthetic --max-steps 40
#   dtrain-report study/bridge --out report
#
# Options: --sizes "1 2 4" (nodes, one rank each), --reps N, --out DIR, --platform NAME (label, default
# cluster), --rate RATE, --mtu BYTES, --overlay none|vxlan, --cpu CORES (cluster.sh up's options),
# --launcher mpirun|torchrun, --calibrate, --label KEY=VALUE (repeatable), --dtrain PATH, --timeout SECONDS
# per run (default 3600), --keep-checkpoints. Everything after `--` goes to dtrain. Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
STUDY_RUNNER="local run_cluster_study"
# shellcheck source=../study_layout.sh
. "$here/../study_layout.sh"
# shellcheck source=../../scripts/mpi_env.sh
. "$root/scripts/mpi_env.sh"
cluster="$here/cluster.sh"

sizes="1 2"
reps=1
out=""
platform=cluster
rate=none
mtu=1500
overlay=none
cpu=""
launcher=mpirun
calibrate=0
dtrain=""
timeout_s=3600
keep_checkpoints=0
extra_labels=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --platform) platform=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --overlay) overlay=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --launcher) launcher=$2; shift 2 ;;
    --calibrate) calibrate=1; shift ;;
    --dtrain) dtrain=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --keep-checkpoints) keep_checkpoints=1; shift ;;
    --label) extra_labels+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "$STUDY_RUNNER: unknown option '$1' (expected --sizes, --reps, --out, --platform, --rate, --mtu, --overlay, --cpu, --launcher, --calibrate, --label, --dtrain, --timeout, --keep-checkpoints, then -- and dtrain's flags)" >&2; exit 2 ;;
  esac
done
study_check_options "$out" "$sizes" "$reps" ${extra_labels[@]+"${extra_labels[@]}"} platform="$platform"
case "$launcher" in mpirun|torchrun) ;; *) echo "$STUDY_RUNNER: --launcher must be mpirun or torchrun, got '$launcher'" >&2; exit 2 ;; esac
case "$timeout_s" in ''|*[!0-9]*|0) echo "$STUDY_RUNNER: --timeout takes seconds, got '$timeout_s'" >&2; exit 2 ;; esac
if [ -z "$dtrain" ]; then
  if [ -x "$root/build/dtrain" ]; then dtrain=$root/build/dtrain; else dtrain=$(command -v dtrain || true); fi
fi
[ -n "$dtrain" ] && [ -x "$dtrain" ] || { echo "$STUDY_RUNNER: no dtrain binary (build it, or give --dtrain PATH)" >&2; exit 2; }
dtrain=$(readlink -f "$dtrain")
bench=$(dirname "$dtrain")/dtrain_allreduce_bench
up_options=(--rate "$rate" --mtu "$mtu" --overlay "$overlay")
[ -z "$cpu" ] || up_options+=(--cpu "$cpu")
export DTRAIN_CLUSTER=${DTRAIN_CLUSTER:-study}
trap 'bash "$cluster" down >/dev/null 2>&1' EXIT
mkdir -p "$out"
out=$(readlink -f "$out")

if [ "$calibrate" -eq 1 ]; then
  [ -x "$bench" ] || { echo "$STUDY_RUNNER: --calibrate needs $bench (build with -DDTRAIN_BUILD_BENCH=ON)" >&2; exit 2; }
  n=$(for s in $sizes; do [ "$s" -ge 2 ] && echo "$s"; done | sort -n | head -n 1)
  n=${n:-2}
  mkdir -p "$out/calibration"
  json="$out/calibration/allreduce-n$(printf %02d "$n").json"
  echo "$STUDY_RUNNER: calibration: allreduce sweep on $n nodes -> $json"
  # The network alone, without the CPU share: a rank waiting in MPI spends its quota polling, and a
  # quota of a quarter core throttles a 256 KiB allreduce from 3.6 ms to 150 ms. What the share costs
  # training is then the model's error, not part of its network (docs/benchmarks.md).
  bash "$cluster" up "$n" --rate "$rate" --mtu "$mtu" --overlay "$overlay"
  bash "$cluster" mpirun -- "$bench" --backend mpi --min-bytes 64K --max-bytes 32M --factor 4 --warmup 2 --iters 8 \
    --json "$json" >"$out/calibration/allreduce-n$(printf %02d "$n").log" 2>&1 </dev/null ||
    { cat "$out/calibration/"*.log >&2; echo "$STUDY_RUNNER: the calibration sweep failed" >&2; exit 1; }
  # The sweep names its platform, so one report of several studies calibrates each with its own network.
  /usr/bin/python3 -c 'import json, sys
p = sys.argv[1]; s = json.load(open(p)); s.update(platform=sys.argv[2], link_rate=sys.argv[3], mtu=int(sys.argv[4]), overlay=sys.argv[5])
json.dump(s, open(p, "w"))' "$json" "$platform" "$rate" "$mtu" "$overlay"
fi

failed=0
for size in $sizes; do
  bash "$cluster" up "$size" "${up_options[@]}"
  for rep in $(seq 1 "$reps"); do
    dir=$(study_run_dir "$out" "$size" "$rep")
    rm -rf "$dir"
    mkdir -p "$dir"
    study_write_labels "$dir" platform="$platform" nodes="$size" ranks="$size" ranks_per_node=1 \
      gpus_per_node=0 accelerator=cpu repetition="$rep" runner=local-cluster launcher="$launcher" \
      link_rate="$rate" mtu="$mtu" overlay="$overlay" cpu_per_node="${cpu:-all}" \
      ${extra_labels[@]+"${extra_labels[@]}"}
    command=(timeout "$timeout_s" bash "$cluster" "$launcher" -- "$dtrain" "$@"
             --log-dir "$dir/logs" --checkpoint-dir "$dir/checkpoints")
    study_launch "$dir" "size $size rep $rep" "${command[@]}" || failed=$((failed + 1))
    [ "$keep_checkpoints" -eq 1 ] || rm -rf "$dir/checkpoints"
  done
done
bash "$cluster" down >/dev/null 2>&1
echo "$STUDY_RUNNER: runs in $out; tables, plots and the scaling model: dtrain-report $out --out REPORT_DIR"
[ "$failed" -eq 0 ]
