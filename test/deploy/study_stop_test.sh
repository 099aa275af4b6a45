#!/usr/bin/env bash
# A stopped study stops (deploy/study_layout.sh, study_bounded): the local runner stopped by SIGINT, SIGTERM
# and SIGHUP during its first run relays the stop to mpirun (the ranks save a checkpoint and exit), records
# the run as stopped, starts no later run, exits 128 + the signal and leaves no process of the study
# behind (counted); past --timeout the same stop, recorded as a timeout. The Kubernetes runner (a stand-in
# kubectl whose job runs on) deletes the job in progress, the Slurm runner (stand-in sbatch and scancel)
# cancels the job it submitted. And the refusals before any run: sizes beyond the cores, an --out that is
# a file or that other users can write.
# Usage: study_stop_test.sh DTRAIN
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dtrain=$(readlink -f "$1")
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (Debian: openmpi-bin)"; exit 77; }
work=$(mktemp -d)
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  pkill -KILL -f -- "$work/" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1
# shellcheck source=../support/checks.sh
. "$root/test/support/checks.sh"
train=(--workload mnist --synthetic --epochs 1 --max-steps 100000 --eval-samples 100 --progress off --log-interval 5
       --device cpu --backend mpi --tensorboard=false --sample-interval-s 0)

# start_runner OUTFILE RUNNER ARGS...: the runner in the background, its output in OUTFILE, with SIGINT,
# SIGTERM and SIGHUP at their defaults (a background job of a script starts with SIGINT ignored, which a
# shell cannot then trap: a terminal's Ctrl-C reaches a runner in the foreground as it does here).
start_runner() {
  local log=$1
  shift
  env --default-signal=INT,TERM,HUP bash "$@" >"$log" 2>&1 &
  runner=$!
}
# wait_for_text FILE TEXT: up to 60 s.
wait_for_text() {
  for _ in $(seq 1 600); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# left OUT: how many processes of the study in OUT are still there.
left() { pgrep -f -- "$1/" | grep -vx "$$" | wc -l; }

# --- the local runner, stopped by each signal during its first run ---------------------------------------
for signal in INT TERM HUP; do
  out=$work/study-$signal
  start_runner "$work/$signal.txt" "$root/deploy/local/run_study.sh" --sizes "1 2" --out "$out" --dtrain "$dtrain" \
    -- "${train[@]}"
  wait_for_text "$out/n01-r1/launcher.log" "Train Epoch" || { fail "SIG$signal: the first run never trained"; cat "$work/$signal.txt"; continue; }
  kill -"$signal" "$runner"
  wait "$runner"
  rc=$?
  sleep 0.5
  number=$(kill -l "$signal")
  stopped=$(grep -h '"event":"stopped"' "$out"/n01-r1/logs/*/events.jsonl 2>/dev/null)
  if [ "$rc" -eq $((128 + number)) ] && grep -q '^result: "stopped"' "$out/n01-r1/result.yaml" &&
     [[ "$stopped" == *'"signal":"SIGUSR2"'*'"saved":true'* ]] && [ ! -e "$out/n02-r1" ] && [ "$(left "$out")" -eq 0 ] &&
     grep -q "stopped by SIG$signal; no later run started" "$work/$signal.txt"; then
    pass "the local runner stopped by SIG$signal: the ranks saved a checkpoint, the run is recorded as stopped, no later run, exit $rc, no process left"
  else
    fail "SIG$signal: exit $rc, result '$(grep result: "$out/n01-r1/result.yaml" 2>/dev/null)', stopped record '$stopped'," \
         "later run $( [ -e "$out/n02-r1" ] && echo started || echo none), $(left "$out") process(es) left"
    cat "$work/$signal.txt"; pgrep -af -- "$out/"
  fi
done

# --- past --timeout: the same stop, recorded as a timeout, and the study goes on ----------------------------
out=$work/study-timeout
STUDY_STOP_GRACE_S=30 bash "$root/deploy/local/run_study.sh" --sizes 1 --out "$out" --dtrain "$dtrain" --timeout 5 \
  -- "${train[@]}" >"$work/timeout.txt" 2>&1
rc=$?
if [ "$rc" -eq 1 ] && grep -q '^result: "timeout"' "$out/n01-r1/result.yaml" && grep -q '^exit_code: 124' "$out/n01-r1/result.yaml" &&
   grep -q '"event":"stopped".*"saved":true' "$out"/n01-r1/logs/*/events.jsonl && [ "$(left "$out")" -eq 0 ] &&
   grep -q "failed (exit 124: it ran past --timeout 5 s)" "$work/timeout.txt"; then
  pass "a run past --timeout is stopped with a checkpoint, recorded as a timeout (exit 124), and leaves no process"
else
  fail "timeout: runner exit $rc"; cat "$work/timeout.txt" "$out/n01-r1/result.yaml"
fi

# --- refusals before any run ------------------------------------------------------------------------------
cores=$(nproc)
msg=$(bash "$root/deploy/local/run_study.sh" --sizes "1 $((cores + 1))" --out "$work/big" --dtrain "$dtrain" -- "${train[@]}" 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && [[ "$msg" == *"--sizes $((cores + 1)) needs $((cores + 1)) cores"*"this machine has $cores"*"pass --oversubscribe"* ]] &&
   [ ! -e "$work/big" ]; then
  pass "sizes beyond the cores are refused before any run, naming --oversubscribe"
else
  fail "sizes beyond the cores: exit $rc: $msg"
fi
touch "$work/a-file"
msg=$(bash "$root/deploy/local/run_study.sh" --out "$work/a-file" --dtrain "$dtrain" 2>&1)
rc=$?
expect_file="local run_study: --out '$work/a-file' exists but is not a directory"
mkdir -m 777 "$work/open"
msg2=$(bash "$root/deploy/local/run_study.sh" --out "$work/open" --dtrain "$dtrain" 2>&1)
rc2=$?
if [ "$rc" -eq 2 ] && [ "$msg" = "$expect_file" ] && [ "$rc2" -eq 2 ] &&
   [[ "$msg2" == *"--out '$work/open' can be written by every user (mode 0777) and has no sticky bit"*"--allow-shared-dirs"* ]]; then
  pass "an --out that is a file, or that every user can write, is refused in one sentence (exit 2)"
else
  fail "--out refusals: exit $rc '$msg'; exit $rc2 '$msg2'"
fi

# --- the Kubernetes runner: the job in progress is deleted ---------------------------------------------------
mkdir -p "$work/bin"
cat >"$work/bin/kubectl" <<'KUBECTL'
#!/usr/bin/env bash
# Stand-in kubectl: records calls; the job is Running for ever.
echo "$*" >>"$KUBECTL_LOG"
case "$*" in
  *"get mpijob"*jsonpath*) echo -n "Created Running " ;;
esac
KUBECTL
cat >"$work/bin/sbatch" <<'SBATCH'
#!/usr/bin/env bash
# Stand-in sbatch --parsable --wait: prints the job's id at once, then waits for the job (for ever).
echo "$*" >>"$SLURM_LOG"
echo "4242;cluster"
exec sleep 600
SBATCH
cat >"$work/bin/scancel" <<'SCANCEL'
#!/usr/bin/env bash
echo "scancel $*" >>"$SLURM_LOG"
SCANCEL
chmod +x "$work/bin/kubectl" "$work/bin/sbatch" "$work/bin/scancel"
export KUBECTL_LOG=$work/kubectl.log SLURM_LOG=$work/slurm.log
PATH=$work/bin:$PATH start_runner "$work/k8s.txt" "$root/deploy/k8s/run_study.sh" --sizes "2 4" --out "$work/study-k8s" \
  -- --platform gke --accelerator nvidia-tesla-v100 --image img:1
wait_for_text "$KUBECTL_LOG" "get mpijob" || fail "the Kubernetes runner never polled its job"
kill -TERM "$runner"
wait "$runner"
rc=$?
if [ "$rc" -eq 143 ] && grep -q "delete mpijob dtrain-mnist-gke-2 --ignore-not-found --wait=false" "$KUBECTL_LOG" &&
   grep -q '^result: "stopped"' "$work/study-k8s/n02-r1/result.yaml" && [ ! -e "$work/study-k8s/n04-r1" ] &&
   grep -q $'^2\t1\tdtrain-mnist-gke-2\tstopped' "$work/study-k8s/summary.tsv"; then
  pass "the Kubernetes runner stopped by SIGTERM deletes the job in progress (its pods then stop with a checkpoint) and ends the study"
else
  fail "Kubernetes runner stop: exit $rc"; cat "$work/k8s.txt" "$KUBECTL_LOG"
fi

# --- the Slurm runner: the job it submitted is cancelled ----------------------------------------------------
PATH=$work/bin:$PATH start_runner "$work/slurm.txt" "$root/deploy/slurm/run_study.sh" --sizes "1 2" --wait \
  --out "$work/study-slurm" -- --workload mnist
wait_for_text "$SLURM_LOG" "--wait" || fail "the Slurm runner never submitted"
sleep 0.3
kill -INT "$runner"
wait "$runner"
rc=$?
if [ "$rc" -eq 130 ] && grep -qx "scancel 4242" "$SLURM_LOG" && [ "$(grep -c -- --wait "$SLURM_LOG")" -eq 1 ] &&
   grep -q "cancelled job(s) 4242 (scancel)" "$work/slurm.txt" && [ "$(left "$work/study-slurm")" -eq 0 ]; then
  pass "the Slurm runner stopped by SIGINT cancels the job it submitted and submits no more"
else
  fail "Slurm runner stop: exit $rc"; cat "$work/slurm.txt" "$SLURM_LOG"
fi
pkill -f "sleep 600" 2>/dev/null
[ "$failures" -eq 0 ] || { echo "study stop: $failures failure(s)"; exit 1; }
