#!/usr/bin/env bash
# train.deterministic end to end: the parameters (and BatchNorm statistics) after 20 steps are the same
# bits at 1, 2, 4 and 8 ranks and over mpi and gloo, for mnist (dropout), resnet18 (BatchNorm, synthetic
# 32 px) and gcn (full-graph steps: every rank trains all 140 labelled nodes in one pass, no exchange).
# World sizes 1, 2 and 8 run over mpi and 4 over gloo, each compared with the 1-rank run, so every world
# size and both backends meet. Controls, which must differ: the same runs without the mode at 1 and 2
# ranks. A torchrun job that shrinks from 4 ranks to 2 inside its epoch is torchrun_test.sh's case (e).
# Usage: deterministic_test.sh DTRAIN MPIEXEC [MPIEXEC_FLAGS]
# DTRAIN_TEST_PYTHON: the interpreter with torch that reads the checkpoints (default Debian's).
set -uo pipefail
dtrain=$1
mpiexec=$2
mpi_flags=${3:-}
torch_python=${DTRAIN_TEST_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
. "$here/../../scripts/mpi_env.sh"
# shellcheck source=../support/checks.sh
. "$here/../support/checks.sh"

# Each workload's runs: 20 optimizer steps (the GCN takes one per epoch) on generated data, checkpoints
# only at the end and none kept in memory.
declare -A flags=(
  [mnist]="--workload mnist --synthetic --global-batch-size 64 --max-steps 20 --epochs 1 --eval-samples 100"
  [resnet18]="--workload resnet18 --synthetic --image-size 32 --global-batch-size 16 --max-steps 20 --epochs 1 --eval-samples 16"
  [gcn]="--workload gcn --synthetic --global-batch-size 144 --epochs 20"
)
common=(--device cpu --progress off --log-interval 0 --checkpoint-memory-dir "" --log-dir logs)
# run NAME RANKS BACKEND [FLAGS...]: trains into checkpoint directory NAME; false when dtrain fails.
run() {
  local name=$1 ranks=$2 backend=$3
  shift 3
  # A session directory of its own: two mpiruns that start at once (the 1- and 2-rank runs below) race
  # to create Open MPI's shared one, and 4.1.4 fails the loser ("orte_session_dir failed ... File exists",
  # open-mpi/ompi#8510).
  mkdir -p "ompi-$name"
  timeout 600 "$mpiexec" -np "$ranks" --oversubscribe --mca orte_tmpdir_base "$PWD/ompi-$name" $mpi_flags "$dtrain" \
    "${common[@]}" --backend "$backend" --checkpoint-dir "$name" "$@" >"$name.txt" 2>&1 || { tail -n 20 "$name.txt"; return 1; }
}
# The model of each directory's newest checkpoint against the first's, bit for bit (or, with --differ,
# differing somewhere in every one): test/support/same_model.py.
compare() { "$torch_python" "$here/../support/same_model.py" "$@"; }

for workload in mnist resnet18 gcn; do
  read -ra f <<<"${flags[$workload]}"
  # The 1-rank run computes on one thread: the 2-rank run takes the other core meanwhile.
  run "$workload-1" 1 mpi "${f[@]}" --deterministic & alone=$!
  run "$workload-2" 2 mpi "${f[@]}" --deterministic; pair=$?
  wait "$alone"; single=$?
  if [ "$single" -eq 0 ] && [ "$pair" -eq 0 ] && run "$workload-8" 8 mpi "${f[@]}" --deterministic &&
     run "$workload-gloo4" 4 gloo "${f[@]}" --deterministic &&
     result=$(compare "$workload-1" "$workload-2" "$workload-8" "$workload-gloo4"); then
    pass "$workload --deterministic: the same bits at 1, 2, 8 ranks (mpi) and 4 (gloo): $result"
  else
    fail "$workload --deterministic at 1, 2, 4 and 8 ranks: ${result:-a run failed}"
  fi
  result=""
  if [ "$workload" = gcn ]; then
    if grep -q "global batch 144 (train.global_batch_size) trained whole on each of the 2 ranks in one pass" gcn-2.txt; then
      pass "gcn --deterministic trains the whole global batch on every rank, in one pass"
    else
      fail "gcn --deterministic at 2 ranks did not say it trains the whole batch on every rank"; grep -i determin gcn-2.txt
    fi
  fi
  if run "$workload-plain1" 1 mpi "${f[@]}" --elastic-batch global && run "$workload-plain2" 2 mpi "${f[@]}" --elastic-batch global &&
     result=$(compare --differ "$workload-plain1" "$workload-plain2"); then
    pass "control: $workload without the mode differs between 1 and 2 ranks: $result"
  else
    fail "control: $workload without the mode at 1 and 2 ranks: ${result:-a run failed}"
  fi
  result=""
done

echo "deterministic_test: $failures failed"
[ "$failures" -eq 0 ]
