#!/usr/bin/env bash
# Submits deploy/slurm/dtrain.sbatch to a real one-node Slurm cluster on this machine: Debian's slurmctld
# and slurmd with a private config, state directory and unprivileged ports, authenticated by munge.
# 2 tasks train synthetic mnist for 2 short epochs, with the generic script, the Satori variant and
# torchrun.sbatch (one torchrun agent with 2 workers);
# the test checks exit 0, the per-epoch Katib lines and time's `real` line. Then a study of 2 repetitions
# through deploy/slurm/run_study.sh, whose layout dtrain-report reads; then it stops its daemons.
# Usage: slurm_test.sh DTRAIN   (needs root for munged and slurmd, as on CI machines)
set -uo pipefail
dtrain=$(readlink -f "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/dtrain-slurm.XXXXXX)
chmod 755 "$work"
started_munged=""
cleanup() {
  [ -f "$work/slurmd.pid" ] && kill "$(cat "$work/slurmd.pid")" 2>/dev/null
  [ -f "$work/slurmctld.pid" ] && kill "$(cat "$work/slurmctld.pid")" 2>/dev/null
  # A munged this test started goes too; one that was running before stays.
  [ -n "$started_munged" ] && pkill -x munged 2>/dev/null
  sleep 1
  rm -rf "$work"
}
trap cleanup EXIT
die() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -n 20 "$f"; done; exit 1; }

for tool in slurmctld slurmd sbatch munged; do
  command -v "$tool" >/dev/null || die "$tool not found (install slurm-wlm and munge)"
done
# munge: reuse a running daemon, else start one with the installed key.
if ! munge -n >/dev/null 2>&1; then
  [ -f /etc/munge/munge.key ] || mungekey --create >/dev/null 2>&1 || die "no munge key"
  mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null
  (runuser -u munge -- munged 2>/dev/null || munged --force) || die "cannot start munged"
  started_munged=1
  sleep 1
  munge -n >/dev/null || die "munge does not work"
fi

host=$(hostname -s)
node_line=$(slurmd -C | head -n 1)   # NodeName=<host> CPUs=... as slurmd sees this machine
mkdir -p "$work/state" "$work/spool"
cat >"$work/slurm.conf" <<CONF
ClusterName=dtraintest
SlurmctldHost=$host
SlurmUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
$node_line State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF=$work/slurm.conf
slurmctld -f "$SLURM_CONF" || die "slurmctld did not start"
slurmd -f "$SLURM_CONF" || die "slurmd did not start"
for _ in $(seq 60); do sinfo -h -o %T 2>/dev/null | grep -qE "^idle" && break; sleep 1; done
sinfo -h -o %T | grep -qE "^idle" || die "the node never became idle: $(sinfo 2>&1)"

. "$root/scripts/mpi_env.sh"
submit() {  # submit SCRIPT [sbatch options] -- DTRAIN ARGS: prints the job id
  local script=$1; shift
  local options=()
  while [ "$1" != "--" ]; do options+=("$1"); shift; done
  shift
  DTRAIN="$dtrain" sbatch --parsable --nodes=1 --ntasks-per-node=2 --gres=none --time=10 \
    --output="$work/job-%j.out" "${options[@]}" "$script" \
    "$@" --synthetic --epochs 2 --checkpoint=false --log-dir "$work/logs" --progress off
}
# shellcheck source=../support/checks.sh
. "$root/test/support/checks.sh"
wait_gone() { for _ in $(seq 300); do squeue -h -j "$1" 2>/dev/null | grep -q . || return 0; sleep 1; done; return 1; }
check_job() {  # check_job ID WHAT METRIC: the job completed with exit 0 and printed what the analysis reads
  local job=$1 what=$2 metric=$3
  for _ in $(seq 300); do
    squeue -h -j "$job" 2>/dev/null | grep -q . || break
    sleep 1
  done
  local out="$work/job-$job.out"
  [ -f "$out" ] || { fail "$what: no job output"; return; }
  echo "--- $what (job $job)"; grep -E "dtrain.sbatch|^epoch|metricName|^real" "$out"
  local state exit_code
  state=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z]*' | cut -d= -f2)
  exit_code=$(scontrol show job "$job" 2>/dev/null | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2)
  [ "$state" = COMPLETED ] && [ "$exit_code" = 0:0 ] || { fail "$what: job state $state, exit $exit_code"; cat "$out"; }
  [ "$(grep -c "{metricName: $metric, metricValue: [0-9.]*};" "$out")" -eq 2 ] ||
    fail "$what: expected 2 per-epoch metric lines"
  grep -q "world size 2" "$out" || fail "$what: the ranks did not form one world of size 2"
  grep -qE "^real[[:space:]]" "$out" || fail "$what: no 'real' line from time"
  # The end of a job that is not requeued removes the node's checkpoint copies in memory that are not needed.
  grep -qE "^dtrain: removed [0-9]+ checkpoint copies in memory" "$out" ||
    { fail "$what: the job's end did not run dtrain --remove-memory-copies"; cat "$out"; }
}
cd "$root"  # as users submit: from the project root (satori.sbatch finds dtrain.sbatch there)
job=$(submit deploy/slurm/dtrain.sbatch -- --workload mnist --max-steps 3 --eval-samples 1000) || die "sbatch failed"
# The Satori variant and its study's workload, biggan, with its GPU, memory and CPU requests shrunk to
# fit this machine and a few small steps.
satori=$(submit deploy/slurm/satori.sbatch --cpus-per-task=1 --mem=4000 -- \
  --workload biggan --max-steps 2 --batch-size 4 --d-steps 2 --eval-samples 16 --sample-every 1) ||
  die "sbatch of satori.sbatch failed"
# One torchrun agent on the node with 2 workers (Debian's torchrun).
elastic=$(DTRAIN_TORCHRUN=/usr/bin/torchrun DTRAIN_NPROC_PER_NODE=2 DTRAIN_TORCHRUN_LOGS="$work/torchrun-logs" \
  submit deploy/slurm/torchrun.sbatch --ntasks-per-node=1 -- --workload mnist --max-steps 3 --eval-samples 1000) ||
  die "sbatch of torchrun.sbatch failed"
check_job "$job" "dtrain.sbatch" accuracy
check_job "$satori" "satori.sbatch" d_accuracy
grep -q "threads per rank 1 (OMP_NUM_THREADS=1)" "$work/job-$satori.out" ||
  fail "satori.sbatch: the ranks' threads do not follow --cpus-per-task=1"
check_job "$elastic" "torchrun.sbatch" accuracy
grep -q '"bootstrap":"env","launcher":"torchrun' "$work"/logs/*/events.jsonl ||
  fail "torchrun.sbatch: no run log of a torchrun-bootstrapped run"
# A worker's configuration error: torchrun exits 1, the job with dtrain's status (2), so that requeue rules
# and sacct tell a bad configuration from a crash. --max_restarts 0: the workers would only fail again.
bad=$(DTRAIN_TORCHRUN=/usr/bin/torchrun DTRAIN_NPROC_PER_NODE=2 DTRAIN_MAX_RESTARTS=0 DTRAIN_TORCHRUN_LOGS="$work/torchrun-logs-bad" \
  submit deploy/slurm/torchrun.sbatch --ntasks-per-node=1 -- --workload no-such-workload) ||
  die "sbatch of torchrun.sbatch (bad workload) failed"
wait_gone "$bad"
bad_exit=$(scontrol show job "$bad" 2>/dev/null | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2)
if [ "$bad_exit" = 2:0 ] && grep -q "torchrun.sbatch: the agents exited 1; the first failed dtrain worker, 2" "$work/job-$bad.out" &&
   grep -q "unknown workload 'no-such-workload'" "$work/job-$bad.out"; then
  pass "torchrun.sbatch: a worker's configuration error is the job's exit status 2, not torchrun's 1"
else
  fail "torchrun.sbatch with a bad workload: ExitCode $bad_exit"; tail -n 30 "$work/job-$bad.out"
fi
grids=$(find "$work/logs" -path "*biggan*/samples/epoch-00000[12].png" | wc -l)
[ "$grids" -eq 2 ] || fail "satori.sbatch: expected the sample grids of epochs 1 and 2, found $grids"
# Signals as Slurm sends them (docs/failures.md, "Signals"). scancel: every task gets SIGTERM, the ranks
# save a checkpoint and stop (exit 143). SIGUSR1 (what --signal=USR1@N sends before the time limit) with
# --checkpoint-on-usr1: the ranks save and stop (exit 138), dtrain.sbatch requeues the job, and the
# requeued job resumes there and finishes.
wait_training() {  # wait_training LOGDIR: until a run under LOGDIR logs training progress (at most 120 s)
  for _ in $(seq 480); do
    cat "$1"/*/events.jsonl 2>/dev/null | grep -q '"event":"train_progress"' && return 0
    sleep 0.25
  done
  return 1
}
signal_run=(--workload mnist --synthetic --epochs 2 --max-steps 80 --log-interval 10 --eval-samples 500 --progress off)
cancelled=$(DTRAIN="$dtrain" sbatch --parsable --nodes=1 --ntasks-per-node=2 --gres=none --time=10 \
  --output="$work/job-%j.out" deploy/slurm/dtrain.sbatch "${signal_run[@]}" --log-dir "$work/logs-term") ||
  die "sbatch of the scancel job failed"
wait_training "$work/logs-term" && scancel "$cancelled"
wait_gone "$cancelled"
stopped=$(cat "$work"/logs-term/*/events.jsonl 2>/dev/null | grep '"event":"stopped"')
if echo "$stopped" | grep -q '"signal":"SIGTERM".*"saved":true' && ! find "$work/logs-term" -name '*.tmp' | grep -q .; then
  pass "scancel: the ranks stopped with a checkpoint ($(echo "$stopped" | grep -o '"step":[0-9]*'))"
else
  fail "scancel: no stop record with a saved checkpoint: '$stopped'"; cat "$work/job-$cancelled.out"
fi
requeued=$(DTRAIN="$dtrain" sbatch --parsable --requeue --nodes=1 --ntasks-per-node=2 --gres=none --time=10 \
  --open-mode=append --output="$work/job-%j.out" deploy/slurm/dtrain.sbatch "${signal_run[@]}" --checkpoint-on-usr1 \
  --log-dir "$work/logs-usr1") || die "sbatch of the SIGUSR1 job failed"
wait_training "$work/logs-usr1" && scancel --signal=USR1 "$requeued"
# start_requeued JOB: once JOB is requeued, starts it again soon. Slurm holds a requeued job for about
# two minutes (its begin time); a test need not wait for that, only until slurmd has ended the first
# run's step processes (a step launched while one of the same id is still ending is refused: "StepId=N.0
# aborted before step completely launched"), the node is done completing it, and a new second has begun
# since: slurmd revoked the first run's credential when it was killed, to the second, and refuses a
# credential of the same job made within that second ("Killing non-startable batch JobId=N: Job
# credential revoked", seen once in a cold CI run when the restart came 0.9 s after the kill).
start_requeued() {
  for _ in $(seq 240); do
    if scontrol show job "$1" 2>/dev/null | grep -q "Restarts=1" &&
       scontrol show job "$1" 2>/dev/null | grep -q "JobState=PENDING"; then
      for _ in $(seq 120); do pgrep -f "slurmstepd: \\[$1\\." >/dev/null || break; sleep 0.5; done
      for _ in $(seq 120); do scontrol show node 2>/dev/null | grep -q "State=[A-Z+]*COMPLETING" || break; sleep 0.5; done
      sleep 2
      scontrol update JobId="$1" StartTime=now
      return 0
    fi
    sleep 0.5
  done
  return 1
}
# diagnose JOB: what Slurm says of JOB, for a failed check.
diagnose() {
  scontrol show job "$1" 2>&1 | grep -E 'JobState|Restarts|ExitCode|Reason' | sed 's/^ */  /'
  grep -h -E "JobId=$1[^0-9]|job_id $1[^0-9]|StepId=$1\\." "$work/slurmctld.log" "$work/slurmd.log" 2>/dev/null | tail -n 15
  cat "$work/job-$1.out"
}
start_requeued "$requeued"
wait_gone "$requeued"
state=$(scontrol show job "$requeued" 2>/dev/null | grep -o 'JobState=[A-Z]*' | cut -d= -f2)
restarts=$(scontrol show job "$requeued" 2>/dev/null | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
kinds=$(cat "$work"/logs-usr1/*/events.jsonl 2>/dev/null | grep -oE '"event":"(stopped|resume|run_end)"' | cut -d'"' -f4 | tr '\n' ' ')
if [ "$state" = COMPLETED ] && [ "$restarts" = 1 ] && [ "$kinds" = "stopped resume run_end " ] &&
   grep -q '"event":"stopped".*"signal":"SIGUSR1"' "$work"/logs-usr1/*/events.jsonl; then
  pass "SIGUSR1: stopped with a checkpoint, requeued, resumed and finished (state $state, restarts $restarts)"
else
  fail "SIGUSR1 and requeue: state $state, restarts $restarts, records '$kinds'"; diagnose "$requeued"
fi
# A lost peer: rank 1 frozen (SIGSTOP) mid-training, rank 0's collective gives up after --comm-timeout-s
# and the job step ends with dtrain's 6, on which dtrain.sbatch requeues the job (DTRAIN_MAX_RESTARTS=1:
# once); the requeued job resumes from the newest checkpoint and finishes. (Each status's rule:
# deploy_slurm_requeue_rules.)
lost=$(DTRAIN="$dtrain" DTRAIN_MAX_RESTARTS=1 sbatch --parsable --requeue --nodes=1 --ntasks-per-node=2 --gres=none \
  --time=10 --open-mode=append --output="$work/job-%j.out" deploy/slurm/dtrain.sbatch "${signal_run[@]}" \
  --comm-timeout-s 10 --checkpoint-every-steps 5 --log-dir "$work/logs-lost") || die "sbatch of the lost-peer job failed"
rank1=""
if wait_training "$work/logs-lost"; then
  # The rank as srun starts it (SLURM_PROCID) or mpirun (OMPI_COMM_WORLD_RANK).
  rank1=$(pgrep -f -- "--log-dir $work/logs-lost" | while read -r pid; do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxE 'SLURM_PROCID=1|OMPI_COMM_WORLD_RANK=1' && echo "$pid"; done | head -1)
fi
if [ -n "$rank1" ]; then
  kill -STOP "$rank1"
  start_requeued "$lost"
  kill -KILL "$rank1" 2>/dev/null
fi
wait_gone "$lost"
state=$(scontrol show job "$lost" 2>/dev/null | grep -o 'JobState=[A-Z]*' | cut -d= -f2)
restarts=$(scontrol show job "$lost" 2>/dev/null | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
kinds=$(cat "$work"/logs-lost/*/events.jsonl 2>/dev/null | grep -oE '"event":"(resume|run_end)"' | cut -d'"' -f4 | tr '\n' ' ')
if [ -n "$rank1" ] && [ "$state" = COMPLETED ] && [ "$restarts" = 1 ] && [ "$kinds" = "resume run_end " ] &&
   grep -q "a peer was lost (exit 6); requeue 1 of at most 1" "$work/job-$lost.out"; then
  pass "a lost peer: exit 6, requeued once, resumed and finished (state $state, restarts $restarts)"
else
  fail "a lost peer and requeue: rank 1 '$rank1', state $state, restarts $restarts, records '$kinds'"
  diagnose "$lost"
fi

# A study: two chained jobs into the study layout, then its report.
study=$work/study-slurm
if DTRAIN="$dtrain" bash deploy/slurm/run_study.sh --sizes 1 --reps 2 --out "$study" --ranks-per-node 2 --wait \
     --sbatch-arg=--time=10 --platform testslurm -- --workload mnist --synthetic --epochs 2 --max-steps 3 \
     --eval-samples 500 --progress off >"$work/study.txt" 2>&1; then
  for rep in 1 2; do
    run=$study/n01-r$rep
    grep -q '^exit_code: 0$' "$run/result.yaml" 2>/dev/null || { fail "study run $rep: result.yaml"; cat "$run/result.yaml" "$run/launcher.log"; }
    grep -qE "^real[[:space:]]" "$run/launcher.log" || fail "study run $rep: no real line"
    ls "$run"/logs/*/events.jsonl >/dev/null 2>&1 || fail "study run $rep: no run log"
  done
  if "$root/report/dtrain-report" "$study" --out "$work/report" >"$work/report.txt" 2>&1; then
    rows=$(/usr/bin/python3 -c 'import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["platform"], r["nodes"], r["ranks"], r["world_size"], r["repetition"], r["result"], r["epochs"], float(r["wall_s"]) > 0)' "$work/report/runs.csv")
    [ "$rows" = "$(printf 'testslurm 1 2 2 1 succeeded 2 True\ntestslurm 1 2 2 2 succeeded 2 True')" ] ||
      { fail "the Slurm study's runs.csv:"; echo "$rows"; }
  else
    fail "dtrain-report on the Slurm study"; cat "$work/report.txt"
  fi
else
  fail "deploy/slurm/run_study.sh"; cat "$work/study.txt"
fi
echo "slurm_test: $failures failure(s)"
[ "$failures" -eq 0 ]
