#!/usr/bin/env bash
# A checkpoint written by one dtrain build resumes in another: the CPU build (Debian's LibTorch 1.13) and
# a CUDA build (PyPI's LibTorch 2.11 or 2.7, on the CPU), each way, with SGD with momentum, Adam, AdamW
# and Adadelta. Optimizer state is matched to parameters by name (checkpoint_format.h), not by an order
# that differs between LibTorch versions, so:
#   - read and written again without a step (a resume at the step the checkpoint holds, whose epoch then
#     ends), every parameter and optimizer-state tensor is bitwise the one written by the other build;
#   - resumed and trained on, the model and the test loss equal the writer's uninterrupted run's within
#     the bound the equivalence tests allow (the two LibTorches' kernels round differently).
#
#   cross_build_checkpoint_test.sh THIS_DTRAIN OTHER_DTRAIN
# Exit 77 (skipped, saying why) when OTHER_DTRAIN has not been built.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
this=$1
other=$2
if [ ! -x "$other" ]; then
  echo "SKIP: the other build's dtrain ($other) is not built; build it (scripts/build.sh, scripts/build_cuda.sh) to test across builds"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The comparisons are listed and made by one Python at the end: its start-up and imports cost more
# than the comparisons (test/support/same_model.py --pairs).
pairs="$work/pairs"
loss_of() { grep -o 'metricName: loss, metricValue: [0-9.]*' "$1" | tail -n 1 | awk '{print $NF}'; }
# One process, synthetic mnist, 8 steps of 64; a checkpoint at step 5 and at the epoch's end. Under
# --deterministic, whose dropout draws belong to the samples: a resume inside an epoch then continues
# exactly (without it the resumed steps draw other dropout masks than the uninterrupted run did).
run() {
  local dtrain=$1 dir=$2 log=$3
  shift 3
  "$dtrain" --workload mnist --synthetic --device cpu --epochs 1 --batch-size 64 --eval-samples 256 --seed 5 --deterministic --lr 0.01 --weight-decay 0.001 \
    --checkpoint-dir "$dir" --checkpoint-keep 0 --log-dir "$work/logs" --progress off --log-interval 0 "$@" >"$log" 2>&1 ||
    { echo "cross_build: $dtrain $* failed:"; tail -n 20 "$log"; return 1; }
}
failures=0
for optimizer in sgd adam adamw adadelta; do
  for direction in "$this $other" "$other $this"; do
    read -r writer reader <<<"$direction"
    name="$optimizer, written by $(basename "$(dirname "$writer")"), read by $(basename "$(dirname "$reader")")"
    case_dir="$work/$optimizer-$RANDOM"
    run "$writer" "$case_dir/written" "$case_dir.w.log" --optimizer "$optimizer" --max-steps 8 --checkpoint-every-steps 5
    step5="$case_dir/written/checkpoint-epoch-000001-step-00000005.safetensors"
    # Read and written again: resumed at step 5 with 5 steps to the epoch, which ends at once.
    mkdir -p "$case_dir/again" "$case_dir/on"
    cp "$step5" "$case_dir/again/"
    cp "$step5" "$case_dir/on/"
    run "$reader" "$case_dir/again" "$case_dir.a.log" --optimizer "$optimizer" --max-steps 5 --resume
    printf 'bitwise\t%s\t%s\t%s\n' "$name, after the round trip" "$step5" \
      "$case_dir/again/checkpoint-epoch-000001.safetensors" >>"$pairs"
    # Resumed and trained on to the writer's end.
    run "$reader" "$case_dir/on" "$case_dir.r.log" --optimizer "$optimizer" --max-steps 8 --resume
    printf '1e-4\t%s\t%s\t%s\n' "$name, resumed and trained on" "$case_dir/written/checkpoint-epoch-000001.safetensors" \
      "$case_dir/on/checkpoint-epoch-000001.safetensors" >>"$pairs"
    uninterrupted=$(loss_of "$case_dir.w.log")
    resumed=$(loss_of "$case_dir.r.log")
    if ! awk -v a="$uninterrupted" -v b="$resumed" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-3 * a + 1e-4) }'; then
      echo "FAILED: $name: test loss $resumed resumed, $uninterrupted uninterrupted"
      failures=$((failures + 1))
    fi
    echo "ran  $name: test loss $resumed resumed, $uninterrupted uninterrupted"
  done
done
/usr/bin/python3 "$here/../support/same_model.py" --min-tensors 8 --pairs "$pairs" || failures=$((failures + 1))
[ "$failures" -eq 0 ] || { echo "cross_build: $failures failures"; exit 1; }
echo "cross_build: every checkpoint resumed across the builds"
