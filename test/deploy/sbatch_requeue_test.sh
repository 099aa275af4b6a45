#!/usr/bin/env bash
# dtrain.sbatch's requeue rules, status by status, without a Slurm cluster: the script runs with stand-ins
# for srun (ending with the status under test), scontrol (recording what it is asked) and dtrain (its
# --version). A run that another try can finish is requeued (138 always, 6 while the job has been requeued
# fewer than DTRAIN_MAX_RESTARTS times); one that cannot (2, 3, 4, 5) or was cancelled (143) is not; the
# job's status is dtrain's either way. deploy_slurm runs the requeue after a lost peer on a real cluster.
# Usage: sbatch_requeue_test.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=../support/checks.sh
. "$root/test/support/checks.sh"

mkdir "$work/bin"
cat >"$work/bin/srun" <<'EOF'
#!/usr/bin/env bash
# The job's launch ends with FAKE_STATUS; the end-of-job cleanup step says what dtrain says.
for arg in "$@"; do
  if [ "$arg" = --remove-memory-copies ]; then echo "dtrain: removed 0 checkpoint copies in memory"; exit 0; fi
done
exit "$FAKE_STATUS"
EOF
cat >"$work/bin/scontrol" <<'EOF'
#!/usr/bin/env bash
echo "scontrol $*" >>"$FAKE_LOG"
EOF
cat >"$work/bin/dtrain" <<'EOF'
#!/usr/bin/env bash
echo "dtrain 0.1.0 (stand-in)"
EOF
chmod +x "$work/bin/srun" "$work/bin/scontrol" "$work/bin/dtrain"

# run STATUS RESTARTS [VAR=VALUE...]: dtrain.sbatch as Slurm starts it, its launch ending with STATUS
# after RESTARTS requeues; sets $rc, $out and $requeued (yes or no).
run() {
  local status=$1 restarts=$2
  shift 2
  : >"$work/scontrol.log"
  out=$(env PATH="$work/bin:$PATH" FAKE_STATUS="$status" FAKE_LOG="$work/scontrol.log" DTRAIN_LAUNCH=pmix \
          SLURM_JOB_ID=42 SLURM_NTASKS=2 SLURM_NNODES=1 SLURM_NTASKS_PER_NODE=2 SLURM_RESTART_COUNT="$restarts" \
          "$@" bash "$root/deploy/slurm/dtrain.sbatch" --workload mnist 2>&1)
  rc=$?
  requeued=no
  grep -qx "scontrol requeue 42" "$work/scontrol.log" && requeued=yes
}

# status, requeues so far, requeued?, variables
cases=(
  "138 0 yes"
  "138 7 yes"                 # a chain of time-limit continuations goes on however long it is
  "6 0 yes"
  "6 2 yes"
  "6 3 no"                    # the default DTRAIN_MAX_RESTARTS, 3, reached
  "6 1 no DTRAIN_MAX_RESTARTS=1"
  "6 0 no DTRAIN_REQUEUE=0"
  "138 0 no DTRAIN_REQUEUE=0"
  "0 0 no" "1 0 no" "2 0 no" "3 0 no" "4 0 no" "5 0 no"
  "143 0 no"                  # scancel, preemption, the time limit
)
for c in "${cases[@]}"; do
  read -r status restarts expected vars <<<"$c"
  # shellcheck disable=SC2086  # vars: zero or one VAR=VALUE
  run "$status" "$restarts" $vars
  what="exit $status after $restarts requeue(s)${vars:+ with $vars}"
  if [ "$rc" -eq "$status" ] && [ "$requeued" = "$expected" ]; then
    pass "$what: requeued $requeued, the job's status $rc"
  else
    fail "$what: requeued $requeued (expected $expected), the job's status $rc (expected $status)"; echo "$out"
  fi
  # A job that ends for good leaves no checkpoint copy in memory behind; a requeued one keeps them.
  if [ "$requeued" = no ] && ! grep -q "removed 0 checkpoint copies" <<<"$out"; then
    fail "$what: the job's end did not run dtrain --remove-memory-copies"
  elif [ "$requeued" = yes ] && grep -q "removed 0 checkpoint copies" <<<"$out"; then
    fail "$what: a requeued job removed its copies in memory"
  fi
done
run 6 0
grep -q "a peer was lost (exit 6); requeue 1 of at most 3" <<<"$out" ||
  fail "a requeue after a lost peer does not say which of how many it is: $out"
run 6 3
grep -q "after 3 requeue(s), the most DTRAIN_MAX_RESTARTS=3 allows: not requeueing" <<<"$out" ||
  fail "a lost peer past the limit does not say why the job is not requeued: $out"
run 6 0 DTRAIN_MAX_RESTARTS=three
if [ "$rc" -eq 2 ] && [ "$requeued" = no ] && grep -q "DTRAIN_MAX_RESTARTS must be a count, got 'three'" <<<"$out"; then
  pass "DTRAIN_MAX_RESTARTS=three: refused before the launch (exit 2)"
else
  fail "DTRAIN_MAX_RESTARTS=three: exit $rc, requeued $requeued: $out"
fi
# The statuses requeued are those docs/failures.md's table calls worth a retry.
retry=$(grep -E '^\| (6|128 \+ N) \|' "$root/docs/failures.md" | grep -c '| yes')
[ "$retry" -eq 2 ] || fail "docs/failures.md no longer says that 6 and 128 + N are worth a retry"
echo "sbatch_requeue_test: $failures failure(s)"
[ "$failures" -eq 0 ]
