#!/usr/bin/env bash
# Weak scaling on the emulated cluster (deploy/local/cluster.sh), dtrain beside PyTorch DDP and, with
# --baseline, beside another dtrain build: for each repetition, one cluster study per runtime in turn
# (dtrain and the DDP peer right after each other at every size, then the baseline), so that the
# machine's drifting load hits all of them alike. The first repetition also measures the network
# (--calibrate, the scaling model's input) and the emulator's own floor (--floor). Then dtrain-report
# reads all of it: scaling.csv and model.csv per runtime, peer.csv with the dtrain/DDP ratios.
#
#   bench/cluster_scaling_bench.sh --out bench-out/q --platform q1g --rate 1gbit --cpu 0.25 \
#     --sizes "1 2 4 8" --reps 2 [--baseline OLD/dtrain] [--backend gloo] [--steps 40]
#
# mnist on the real Fashion-MNIST (/usr/share/datasets/fashion-mnist, Debian's dataset-fashion-mnist),
# batch 64 per rank, --steps steps, an evaluation of 64 samples, no checkpoints. Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=""
platform=""
rate=1gbit
cpu=0.25
sizes="1 2 4 8"
reps=2
baseline=""
backend=""
steps=40
data=/usr/share/datasets/fashion-mnist
dtrain=$root/build/dtrain
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --platform) platform=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --data-dir) data=$2; shift 2 ;;
    --dtrain) dtrain=$2; shift 2 ;;
    *) echo "cluster_scaling_bench: unknown option '$1' (expected --out, --platform, --rate, --cpu, --sizes, --reps, --baseline, --backend, --steps, --data-dir, --dtrain)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "cluster_scaling_bench: --out DIR is required" >&2; exit 2; }
[ -n "$platform" ] || platform="cpu$cpu-$rate"
[ -d "$data" ] || { echo "cluster_scaling_bench: no MNIST-format data in $data (Debian: apt install dataset-fashion-mnist)" >&2; exit 2; }
[ -x "$dtrain" ] || { echo "cluster_scaling_bench: no dtrain at $dtrain (build it, or give --dtrain)" >&2; exit 2; }
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "cluster_scaling_bench: --baseline '$baseline' is not an executable" >&2; exit 2; }
mkdir -p "$out"
out=$(readlink -f "$out")
flags=(--workload mnist --data-dir "$data" --epochs 1 --max-steps "$steps" --batch-size 64 --eval-samples 64
       --checkpoint=false --progress off)
[ -z "$backend" ] || flags+=(--backend "$backend")
study=("$root/deploy/local/run_cluster_study.sh" --sizes "$sizes" --reps 1 --rate "$rate" --cpu "$cpu")

for rep in $(seq 1 "$reps"); do
  first=()
  [ "$rep" -ne 1 ] || first=(--calibrate --floor)
  bash "${study[@]}" ${first[@]+"${first[@]}"} --peer ddp --platform "$platform" --dtrain "$dtrain" \
    --label repetition="$rep" --out "$out/$platform-r$rep" -- "${flags[@]}"
  if [ -n "$baseline" ]; then
    bash "${study[@]}" --platform "$platform-baseline" --dtrain "$baseline" --label repetition="$rep" \
      --out "$out/$platform-baseline-r$rep" -- "${flags[@]}"
  fi
done
if [ -n "$baseline" ]; then
  # The baseline ran on the same network: the calibration sweep stands for its platform name too.
  /usr/bin/python3 - "$out/$platform-r1/calibration" "$out/$platform-baseline-r1/calibration" "$platform-baseline" <<'EOF'
import json, pathlib, sys
source, target, name = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
target.mkdir(parents=True, exist_ok=True)
for path in source.glob("allreduce-*.json"):
    sweep = json.loads(path.read_text())
    sweep["platform"] = name
    (target / path.name).write_text(json.dumps(sweep))
EOF
fi
"$root/report/dtrain-report" "$out"/"$platform"-* --out "$out/report-$platform"
cat "$out/$platform-r1/calibration/floor.json"
echo
for table in peer scaling model; do echo "== $table.csv"; cat "$out/report-$platform/$table.csv"; done
