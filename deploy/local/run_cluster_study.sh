#!/usr/bin/env bash
# Runs a scaling study on the emulated cluster of deploy/local/cluster.sh: for each size, a cluster of
# that many nodes with this platform's network (link rate, MTU, overlay) and CPU share per node; for each
# repetition one launch of dtrain across it (mpirun, or torchrun with one agent per node), timed by
# bash's `time`, into the study layout of docs/studies.md. With --calibrate, first an allreduce sweep of
# the platform's network at the smallest size of 2 or more (calibration/allreduce-nNN.json), from which
# dtrain-report's scaling model predicts every size. With --peer ddp, each repetition also runs PyTorch DDP
# (bench/peer/mnist_ddp.py: gloo, the same model, optimizer, batch, data and threads) right after dtrain's,
# so that noise hits both alike; the report sets their scaling figures side by side (peer.csv). With
# --floor, the emulator's own cost: first what a byte between two nodes costs them (calibration/floor.json,
# deploy/local/emulator_floor.py), then at each size every node training alone at once, with no
# communication (calibration/solo-nNN-RUNTIME.json): what sharing this machine costs a node's compute as
# nodes are added, which the report's scaling model takes as the floor under its prediction.
#
#   deploy/local/run_cluster_study.sh --sizes "1 2 4 8" --reps 3 --rate 1gbit --cpu 0.25 --calibrate \
#     --platform bridge --out study/bridge -- --workload mnist --synthetic --max-steps 40
#   dtrain-report study/bridge --out report
#
# Options: --sizes "1 2 4" (nodes, one rank each), --reps N, --out DIR, --platform NAME (label, default
# cluster), --rate RATE, --mtu BYTES, --overlay none|vxlan, --cpu CORES (cluster.sh up's options),
# --launcher mpirun|torchrun, --calibrate, --floor, --peer ddp, --label KEY=VALUE (repeatable), --dtrain PATH,
# --timeout SECONDS per run and per calibration step (default 3600; the ranks are then stopped with a
# checkpoint), --keep-checkpoints, --oversubscribe (sizes whose nodes' CPU shares add up to more than this
# machine's cores, refused without it), --allow-shared-dirs (an --out other users can write; passed on
# to dtrain). Ctrl-C (or SIGTERM, SIGHUP) stops the run in progress as the local runner does, takes the
# cluster down and leaves no process behind; exit 128 + the signal. Everything after
# `--` goes to dtrain (with --peer, the mnist flags the peer mirrors: --workload mnist, --data-dir,
# --batch-size, --epochs, --max-steps, --eval-samples, --threads, and dtrain's own --checkpoint, --progress,
# --backend). Needs root.
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
floor=0
peer=""
dtrain=""
timeout=3600
keep_checkpoints=0
oversubscribe=0
allow_shared_dirs=0
label=()
study_parse "dtrain's flags" sizes reps out platform rate mtu overlay cpu launcher calibrate? floor? peer label+ dtrain \
  timeout keep-checkpoints? oversubscribe? allow-shared-dirs? -- "$@"
set -- ${study_rest[@]+"${study_rest[@]}"}
study_check_options "$out" "$sizes" "$reps" ${label[@]+"${label[@]}"} platform="$platform"
case "$launcher" in mpirun|torchrun) ;; *) echo "$STUDY_RUNNER: --launcher must be mpirun or torchrun, got '$launcher'" >&2; exit 2 ;; esac
case "$timeout" in ''|*[!0-9]*|0) echo "$STUDY_RUNNER: --timeout takes seconds, got '$timeout'" >&2; exit 2 ;; esac
if [ -z "$dtrain" ]; then
  if [ -x "$root/build/dtrain" ]; then dtrain=$root/build/dtrain; else dtrain=$(command -v dtrain || true); fi
fi
[ -n "$dtrain" ] && [ -x "$dtrain" ] || { echo "$STUDY_RUNNER: no dtrain binary (build it, or give --dtrain PATH)" >&2; exit 2; }
dtrain=$(readlink -f "$dtrain")
bench=$(dirname "$dtrain")/dtrain_allreduce_bench
case "$peer" in ''|ddp) ;; *) echo "$STUDY_RUNNER: --peer must be ddp, got '$peer'" >&2; exit 2 ;; esac

# peer_command ARGS...: the PyTorch DDP peer's command line for dtrain's ARGS (the flags it can mirror),
# or an error naming the flag it cannot.
peer_command() {
  local -a cmd=(/usr/bin/python3 "$root/bench/peer/mnist_ddp.py")
  local threads="" workload=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --workload) workload=$2; shift 2 ;;
      --data-dir) cmd+=(--data-dir "$2"); shift 2 ;;
      --batch-size) cmd+=(--batch-size "$2"); shift 2 ;;
      --epochs) cmd+=(--epochs "$2"); shift 2 ;;
      --max-steps) cmd+=(--max-steps "$2"); shift 2 ;;
      --eval-samples) cmd+=(--test-samples "$2"); shift 2 ;;
      --threads) threads=$2; shift 2 ;;
      --checkpoint=*|--progress=*) shift ;;
      --checkpoint|--progress|--backend) shift 2 ;;
      *) echo "$STUDY_RUNNER: --peer ddp cannot mirror dtrain's '$1' (it mirrors --workload mnist, --data-dir, --batch-size, --epochs, --max-steps, --eval-samples, --threads)" >&2; return 2 ;;
    esac
  done
  [ "$workload" = mnist ] || { echo "$STUDY_RUNNER: --peer ddp runs mnist only; give dtrain --workload mnist (and --data-dir: the peer reads MNIST-format files)" >&2; return 2; }
  # dtrain's own choice where --threads is not given: one thread per whole core of the node's share.
  [ -n "$threads" ] || threads=$(awk -v c="${cpu:-$(nproc)}" 'BEGIN { t = int(c); print (t < 1 ? 1 : t) }')
  printf '%q ' "${cmd[@]}" --threads "$threads"
}
if [ -n "$peer" ]; then
  peer_command "$@" >/dev/null || exit 2
  [ "$launcher" = mpirun ] || { echo "$STUDY_RUNNER: --peer ddp runs under --launcher mpirun" >&2; exit 2; }
fi
up_options=(--rate "$rate" --mtu "$mtu" --overlay "$overlay")
[ -z "$cpu" ] || up_options+=(--cpu "$cpu")
case "$cpu" in ''|*[!0-9.]*|*.*.*|.) [ -z "$cpu" ] || { echo "$STUDY_RUNNER: --cpu takes cores per node (0.25, 1, 2), got '$cpu'" >&2; exit 2; } ;; esac
study_check_cores "$sizes" "${cpu:-1}" "$oversubscribe"
[ "$(id -u)" -eq 0 ] || { echo "$STUDY_RUNNER: the emulated cluster's namespaces, links and CPU shares need root" >&2; exit 2; }
export DTRAIN_CLUSTER=${DTRAIN_CLUSTER:-study}
study_make_out "$out" "$allow_shared_dirs"
out=$(readlink -f "$out")
shared=()
[ "$allow_shared_dirs" -eq 0 ] || shared=(--allow-shared-dirs)
trap 'bash "$cluster" down >/dev/null 2>&1' EXIT
study_trap_stops

if [ "$calibrate" -eq 1 ]; then
  [ -x "$bench" ] || { echo "$STUDY_RUNNER: --calibrate needs $bench (build with -DDTRAIN_BUILD_BENCH=ON)" >&2; exit 2; }
  n=$(for s in $sizes; do [ "$s" -ge 2 ] && echo "$s"; done | sort -n | head -n 1)
  n=${n:-2}
  study_make_subdir "$out/calibration"
  json="$out/calibration/allreduce-n$(printf %02d "$n").json"
  echo "$STUDY_RUNNER: calibration: allreduce sweep on $n nodes -> $json"
  # The network alone, without the CPU share: a rank waiting in MPI spends its quota polling, and a
  # quota of a quarter core throttles a 256 KiB allreduce from 3.6 ms to 150 ms. What the share costs
  # training is then the model's error, not part of its network (docs/benchmarks.md).
  bash "$cluster" up "$n" --rate "$rate" --mtu "$mtu" --overlay "$overlay"
  study_bounded 0 "$timeout" bash "$cluster" mpirun -- "$bench" --backend mpi --min-bytes 64K --max-bytes 32M --factor 4 \
    --warmup 2 --iters 8 --json "$json" >"$out/calibration/allreduce-n$(printf %02d "$n").log" 2>&1 ||
    { study_exit_if_stopped "the calibration sweep"; cat "$out/calibration/"*.log >&2; echo "$STUDY_RUNNER: the calibration sweep failed" >&2; exit 1; }
  # The sweep names its platform, so one report of several studies calibrates each with its own network.
  /usr/bin/python3 -c 'import json, sys
p = sys.argv[1]; s = json.load(open(p)); s.update(platform=sys.argv[2], link_rate=sys.argv[3], mtu=int(sys.argv[4]), overlay=sys.argv[5])
json.dump(s, open(p, "w"))' "$json" "$platform" "$rate" "$mtu" "$overlay"
fi

if [ "$floor" -eq 1 ]; then
  study_make_subdir "$out/calibration"
  # Two nodes with the study's links and CPU share: what moving a byte costs a node here, against the
  # same stream inside one node (the kernel's TCP alone, as on a host with a real NIC).
  bash "$cluster" up 2 "${up_options[@]}"
  study_bounded 0 "$timeout" /usr/bin/python3 "$here/emulator_floor.py" --cluster-script "$cluster" \
    --json "$out/calibration/floor.json" --platform "$platform" ||
    { study_exit_if_stopped "the emulator floor measurement"; echo "$STUDY_RUNNER: the emulator floor measurement failed" >&2; exit 1; }
fi

# solo_runs SIZE RUNTIME COMMAND...: COMMAND (a one-rank run, given --log-dir DIR after it) on every node
# at once, then the nodes' median time per step into calibration/solo-nNN-RUNTIME.json.
solo_runs() {
  local size=$1 runtime=$2 k dir
  shift 2
  dir=$out/calibration/solo-n$(printf %02d "$size")-$runtime
  study_make_subdir "$out/calibration"
  study_new_run_dir "$dir"
  # Every node at once, each its own one-rank run, as one bounded command, so that a stop reaches them all
  # (relayed to each node's process; cluster.sh exec becomes it).
  local status=0
  study_bounded 0 "$timeout" bash -c '
    size=$1 cluster=$2 dir=$3
    shift 3
    trap "kill -USR2 \$(jobs -p) 2>/dev/null" USR2
    for k in $(seq 1 "$size"); do
      bash "$cluster" exec "node$k" "$@" --log-dir "$dir/node$k" >"$dir/node$k.log" 2>&1 &
    done
    s=0
    for p in $(jobs -p); do
      while :; do wait "$p"; c=$?; kill -0 "$p" 2>/dev/null || break; done
      [ "$c" -eq 0 ] || s=1
    done
    exit "$s"' solo "$size" "$cluster" "$dir" "$@" || status=1
  study_exit_if_stopped "the solo runs at size $size ($runtime)"
  [ "$status" -eq 0 ] || { echo "$STUDY_RUNNER: a solo run at size $size ($runtime) failed; see $dir" >&2; return 1; }
  /usr/bin/python3 - "$dir" "$dir.json" "$platform" "$runtime" "$size" <<'PY'
import glob, json, sys
d, path, platform, runtime, size = sys.argv[1:6]
steps = []
for log in sorted(glob.glob(d + "/node*/**/events.jsonl", recursive=True)):
    for line in open(log):
        e = json.loads(line)
        if e.get("event") == "epoch_end" and e.get("steps"):
            steps.append(e["train_s"] / e["steps"])
json.dump({"bench": "solo_compute", "platform": platform, "runtime": runtime, "nodes": int(size), "step_s": steps},
          open(path, "w"))
print(f"solo compute at {size} node(s), {runtime}: " + " ".join(f"{s:.3f}" for s in steps) + " s per step")
PY
}

failed=0
for size in $sizes; do
  bash "$cluster" up "$size" "${up_options[@]}"
  if [ "$floor" -eq 1 ]; then
    solo_runs "$size" dtrain "$dtrain" "$@" ${shared[@]+"${shared[@]}"} || failed=$((failed + 1))
    if [ -n "$peer" ]; then
      eval "peer_cmd=($(peer_command "$@"))"
      solo_runs "$size" pytorch-ddp "${peer_cmd[@]}" || failed=$((failed + 1))
    fi
  fi
  for rep in $(seq 1 "$reps"); do
    dir=$(study_run_dir "$out" "$size" "$rep")
    study_new_run_dir "$dir"
    study_write_labels "$dir" platform="$platform" nodes="$size" ranks="$size" ranks_per_node=1 \
      gpus_per_node=0 accelerator=cpu repetition="$rep" runner=local-cluster launcher="$launcher" \
      link_rate="$rate" mtu="$mtu" overlay="$overlay" cpu_per_node="${cpu:-all}" \
      ${label[@]+"${label[@]}"}
    command=(bash "$cluster" "$launcher" -- "$dtrain" "$@" --log-dir "$dir/logs" --checkpoint-dir "$dir/checkpoints"
             ${shared[@]+"${shared[@]}"})
    study_launch "$dir" "size $size rep $rep" "$timeout" "${command[@]}" || failed=$((failed + 1))
    [ "$keep_checkpoints" -eq 1 ] || rm -rf "$dir/checkpoints"
    if [ -n "$peer" ]; then
      pdir=$dir-pytorch-ddp
      study_new_run_dir "$pdir"
      study_write_labels "$pdir" platform="$platform" nodes="$size" ranks="$size" ranks_per_node=1 \
        gpus_per_node=0 accelerator=cpu repetition="$rep" runner=local-cluster launcher=mpirun \
        link_rate="$rate" mtu="$mtu" overlay="$overlay" cpu_per_node="${cpu:-all}" \
        ${label[@]+"${label[@]}"}
      eval "peer_cmd=($(peer_command "$@"))"
      command=(bash "$cluster" mpirun -x MASTER_ADDR=node1 -x MASTER_PORT=29533 --
               "${peer_cmd[@]}" --log-dir "$pdir/logs/peer")
      study_launch "$pdir" "size $size rep $rep (PyTorch DDP)" "$timeout" "${command[@]}" || failed=$((failed + 1))
    fi
  done
done
bash "$cluster" down >/dev/null 2>&1
echo "$STUDY_RUNNER: runs in $out; tables, plots and the scaling model: dtrain-report $out --out REPORT_DIR"
[ "$failed" -eq 0 ]
