#!/usr/bin/env bash
# The study runners' one way of reading options (deploy/study_layout.sh, study_parse): values in both
# spellings, repeated options, flags, what follows `--`; then the errors, and each of the four runners
# refusing a misspelt option and an option without its value (exit 2, before any run, naming the runner
# and listing its options).
# Usage: study_options_test.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../support/checks.sh
. "$root/test/support/checks.sh"

# parse ARGS...: study_parse with a spec of each kind, in a subshell; prints what it set.
parse() {
  (
    STUDY_RUNNER="test runner"
    # shellcheck source=../../deploy/study_layout.sh
    . "$root/deploy/study_layout.sh"
    sizes="1 2" out="" wait=0 sbatch_arg=()
    study_parse "dtrain's flags" sizes out sbatch-arg+ wait? -- "$@"
    printf 'sizes=%s|out=%s|wait=%s|sbatch_arg=%s|rest=%s\n' "$sizes" "$out" "$wait" \
      "${sbatch_arg[@]+$(printf '[%s]' "${sbatch_arg[@]}")}" "${study_rest[@]+$(printf '[%s]' "${study_rest[@]}")}"
  ) 2>&1
}
# expect WHAT ACTUAL WANTED: a verdict line.
expect() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got '$2', expected '$3'"; fi; }

expect "defaults stay when no option is given" "$(parse)" "sizes=1 2|out=|wait=0|sbatch_arg=|rest="
expect "values as --NAME V and --NAME=V, a repeated option, a flag, and what follows --" \
  "$(parse --sizes "2 4" --out=study --sbatch-arg --partition=gpu --sbatch-arg=--time=10 --wait -- --epochs 2 "a b")" \
  "sizes=2 4|out=study|wait=1|sbatch_arg=[--partition=gpu][--time=10]|rest=[--epochs][2][a b]"
expect "a later value replaces an earlier one" "$(parse --out a --out b)" "sizes=1 2|out=b|wait=0|sbatch_arg=|rest="
expect "a misspelt option is named with the runner's options" "$(parse --size 2; echo "exit $?")" \
  "test runner: unknown option '--size' (expected --sizes, --out, --sbatch-arg, --wait, then -- and dtrain's flags)
exit 2"
expect "a word that is no option is refused too" "$(parse 4; echo "exit $?")" \
  "test runner: unknown option '4' (expected --sizes, --out, --sbatch-arg, --wait, then -- and dtrain's flags)
exit 2"
expect "an option at the end without its value" "$(parse --sizes; echo "exit $?")" "test runner: --sizes needs a value
exit 2"
expect "a flag given a value" "$(parse --wait=yes; echo "exit $?")" "test runner: --wait takes no value, got '--wait=yes'
exit 2"

# Each runner, before it needs kubectl, sbatch, mpirun or root: a misspelt option and a missing value.
for runner in deploy/local/run_study.sh deploy/local/run_cluster_study.sh deploy/slurm/run_study.sh deploy/k8s/run_study.sh; do
  out=$(bash "$root/$runner" --out x --sizez 2 -- --epochs 1 2>&1)
  status=$?
  if [ "$status" -eq 2 ] && [[ "$out" == *"unknown option '--sizez' (expected "*"--sizes, "*"--label"*", then -- and "* ]]; then
    pass "$runner refuses --sizez, listing its options"
  else
    fail "$runner --sizez: exit $status: $out"
  fi
  out=$(bash "$root/$runner" --out x --reps 2>&1)
  status=$?
  if [ "$status" -eq 2 ] && [[ "$out" == *": --reps needs a value" ]]; then
    pass "$runner says --reps needs a value"
  else
    fail "$runner --reps without a value: exit $status: $out"
  fi
done

# cluster.sh's refusals: one sentence each, exit 2, nothing of bash's own ("integer expression expected")
# and nothing made (a cluster of a name of this test's own, never brought up).
if [ "$(id -u)" -eq 0 ]; then
  for args in "up 2 --cpu x|--cpu 'x' must be a positive number of cores" \
              "up 2 --loss 3|--loss '3' must be a fraction in [0, 1)" \
              "exec node1 true|no cluster 'opttest' is up" \
              "loss node1 0.5|no cluster 'opttest' is up" \
              "shape node1 1gbit|no cluster 'opttest' is up"; do
    # shellcheck disable=SC2086  # the words of a command line
    out=$(DTRAIN_CLUSTER=opttest bash "$root/deploy/local/cluster.sh" ${args%%|*} 2>&1)
    status=$?
    if [ "$status" -eq 2 ] && [ "$out" = "cluster: ${args#*|}${out#"cluster: ${args#*|}"}" ] &&
       [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && [ ! -e /run/dtrain-cluster/opttest/nodes ]; then
      pass "cluster.sh ${args%%|*}: one sentence, exit 2"
    else
      fail "cluster.sh ${args%%|*}: exit $status: $out"
    fi
  done
else
  echo "SKIP: cluster.sh's refusals are checked as root (it refuses to run without)"
fi

echo "study_options_test: $failures failed"
[ "$failures" -eq 0 ]
