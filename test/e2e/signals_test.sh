#!/usr/bin/env bash
# End-to-end tests of stopping for signals, as job systems send them (docs/failures.md, "Signals"):
#   (a) SIGTERM to one rank under mpirun: every rank stops at the same step with a checkpoint there,
#       exit 143, a `stopped` record; --resume continues at that step and finishes
#   (b) SIGTERM to scripts/mpirun_local.sh: relayed as SIGUSR2 by mpirun at once, the script exits 143
#   (c) SIGUSR1 to the ranks (Slurm's --signal=USR1@N): kills without --checkpoint-on-usr1, stops with it
#       (exit 138)
#   (d) a stuck peer: the stop cannot finish, the signalled rank exits at once after
#       --stop-timeout-s, earlier checkpoints intact, no .tmp
#   (e) a second signal (after the first's 2-second window): the rank exits at once
#   (f) SIGTERM to torchrun's agent: its workers stop with a checkpoint, a new torchrun resumes
#   (g) SIGTERM to the image's entrypoint running torchrun as a pod's PID 1 would: relayed to the agent
#   (h) on a GPU (where there is one): the ranks agree every 10 steps; the stop comes at such a step,
#       --resume continues after it
#   (i) SIGTERM during an evaluation longer than --stop-timeout-s: the end of the epoch's training is saved
#       (held before the evaluation), --resume evaluates it and goes on, ending as an uninterrupted run does
#   (j) SIGTERM while the ranks are still joining (a torchrun-style start whose peer never comes): nothing
#       to save, so the process exits at once, not after the stop timeout
#   (k) a console that goes away (`dtrain | head -1`): exit 5 with the error and its record, not SIGPIPE
#   (l) a rank killed -9 under mpirun: mpirun ends the job with SIGTERM and SIGKILL within seconds; the
#       survivor's run log says at once who sent its SIGTERM and what that means
#   (m) torchrun's agent killed -9: its orphaned workers end, rank 0 with an `error` record naming it
# Usage: signals_test.sh DTRAIN MPIEXEC [MPIEXEC_FLAGS]
set -uo pipefail
mpiexec=$2
mpi_flags=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
torchrun=${TORCHRUN:-/usr/bin/torchrun}
work=$(mktemp -d)
cleanup() {
  pkill -9 -f "$work/" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
# A copy of the binary under this test's directory, so that cleanup finds every process it started.
cp "$1" "$work/dtrain"
dtrain=$work/dtrain
. "$root/scripts/mpi_env.sh"
# shellcheck source=../support/checks.sh
. "$root/test/support/checks.sh"
cpu=(--device cpu --backend mpi)
# Two epochs of 60 steps (about 6 s each here): long enough to be signalled in the middle of one.
train=(--workload mnist --synthetic --epochs 2 --max-steps 60 --log-interval 10 --eval-samples 200 --progress off)
# Background jobs are started without `timeout`, which would take the signals meant for the launcher
# (and die of SIGUSR1); ctest's timeout bounds the test. Each case ends by killing what is left of it.
leftovers() { pkill -9 -f "$work/" 2>/dev/null; sleep 0.5; }

# The pid of rank $2 among the processes of the binary $1 started by mpirun.
rank_pid() {
  local pid
  for pid in $(pgrep -f "^$1 "); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$pid"; return 0; fi
  done
  return 1
}
# Waits up to 120 s until the run log under $1 has a train_progress record (training is under way).
wait_training() {
  for _ in $(seq 1 480); do
    if cat "$1"/*/events.jsonl 2>/dev/null | grep -q '"event":"train_progress"'; then return 0; fi
    sleep 0.25
  done
  return 1
}
# The `stopped` record of the run log under $1 as "SIGNAL RANK EPOCH STEP SAVED CHECKPOINT".
stopped_record() {
  /usr/bin/python3 - "$1" <<'PY'
import glob, json, sys
for path in glob.glob(sys.argv[1] + "/*/events.jsonl"):
    for line in open(path):
        r = json.loads(line)
        if r["event"] == "stopped":
            print(r["signal"], r["rank"], r["epoch"], r["step"], str(r["saved"]).lower(), r["checkpoint"])
PY
}

# The `at_once` reason of the `stopped` record of a stop that could not wait, if any.
stopped_at_once() {
  /usr/bin/python3 - "$1" <<'PY'
import glob, json, sys
for path in glob.glob(sys.argv[1] + "/*/events.jsonl"):
    for line in open(path):
        r = json.loads(line)
        if r["event"] == "stopped" and "at_once" in r:
            print(r["at_once"])
PY
}
no_tmp() { ! find "$1" -name '*.tmp' | grep -q .; }

# --- (a) SIGTERM to one rank ---------------------------------------------------------------------------
"$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${train[@]}" --log-dir logs-a >a.out 2>&1 &
job=$!
wait_training logs-a && kill -TERM "$(rank_pid "$dtrain" 1)"
wait "$job"
rc=$?
leftovers
read -r sig rank epoch step saved checkpoint <<<"$(stopped_record logs-a)"
if [ "$rc" -eq 143 ] && [ "$sig" = SIGTERM ] && [ "$rank" = 1 ] && [ "$epoch" = 1 ] && [ "${step:-0}" -gt 0 ] &&
   [ "$saved" = true ] && [ -f "$checkpoint" ] && no_tmp logs-a &&
   grep -q "stopped by SIGTERM (rank 1) in epoch 1 after step $step: checkpoint .* saved; --resume continues there" a.out &&
   ! grep -q "dtrain: error" a.out; then
  pass "SIGTERM to rank 1 under mpirun: both ranks stopped after step $step with a checkpoint there, exit 143"
else
  fail "SIGTERM to one rank (exit $rc, record '$sig $rank $epoch $step $saved $checkpoint')"; cat a.out
fi
timeout 300 "$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${train[@]}" --log-dir logs-a --resume >a2.out 2>&1
rc=$?
# Rank 0's copy in memory (checkpoint.memory_dir) is the same checkpoint; the resume may read either.
if [ "$rc" -eq 0 ] && grep -q "resumed epoch 1 at step $((step + 1)) from .*/$(basename "$checkpoint")" a2.out &&
   [ "$(cat logs-a/*/events.jsonl | grep -c '"event":"run_end"')" -eq 1 ] &&
   /usr/bin/python3 -c "
import sys; sys.path.insert(0, '$root/report')
from dtrain_report import formats
problems, kinds = formats.schema_errors(sys.argv[1])
assert not problems and kinds.count('stopped') == 1, (problems, kinds)" logs-a/*/events.jsonl; then
  pass "--resume continues at step $((step + 1)) of epoch 1 and finishes; the run log fits the schema"
else
  fail "resume after the stop (exit $rc)"; cat a2.out
fi

# --- (b) SIGTERM to scripts/mpirun_local.sh --------------------------------------------------------------
bash "$root/scripts/mpirun_local.sh" -np 2 "$dtrain" "${cpu[@]}" "${train[@]}" --log-dir logs-b >b.out 2>&1 &
job=$!
wait_training logs-b && kill -TERM "$job"
wait "$job"
rc=$?
leftovers
read -r sig rank epoch step saved checkpoint <<<"$(stopped_record logs-b)"
if [ "$rc" -eq 143 ] && [ "$sig" = SIGUSR2 ] && [ "$saved" = true ] && [ -f "$checkpoint" ] && no_tmp logs-b; then
  pass "SIGTERM to mpirun_local.sh reaches the ranks as SIGUSR2 at once: checkpoint after step $step, exit 143"
else
  fail "SIGTERM to mpirun_local.sh (exit $rc, record '$sig $rank $epoch $step $saved')"; cat b.out
fi

# --- (c) SIGUSR1 to every rank, as Slurm's --signal=USR1@N sends it to every task -------------------------
# (Not through mpirun: Open MPI 4.1.4 relays SIGUSR1 to the ranks, 4.1.6 was seen not to; docs/failures.md.)
usr1_ranks() { kill -USR1 "$(rank_pid "$dtrain" 0)" "$(rank_pid "$dtrain" 1)"; }
"$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${train[@]}" --log-dir logs-c1 >c1.out 2>&1 &
job=$!
wait_training logs-c1 && usr1_ranks
wait "$job"
rc=$?
leftovers
if [ "$rc" -ne 0 ] && [ -z "$(stopped_record logs-c1)" ]; then
  pass "SIGUSR1 without --checkpoint-on-usr1 ends the run as it always did (exit $rc, no stop record)"
else
  fail "SIGUSR1 without the option (exit $rc)"; cat c1.out
fi
"$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${train[@]}" --checkpoint-on-usr1 --log-dir logs-c2 >c2.out 2>&1 &
job=$!
wait_training logs-c2 && usr1_ranks
wait "$job"
rc=$?
leftovers
read -r sig rank epoch step saved checkpoint <<<"$(stopped_record logs-c2)"
if [ "$rc" -eq 138 ] && [ "$sig" = SIGUSR1 ] && [ "$saved" = true ] && [ -f "$checkpoint" ]; then
  pass "SIGUSR1 with --checkpoint-on-usr1: checkpoint after step $step, exit 138"
else
  fail "SIGUSR1 with the option (exit $rc, record '$sig $saved')"; cat c2.out
fi

# --- (d) a stuck peer: the stop timeout -----------------------------------------------------------------
# Epoch-end checkpoints only: the one of epoch 1 must survive a stop that cannot finish in epoch 2.
"$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${train[@]}" --epochs 3 --stop-timeout-s 2 --log-dir logs-d >d.out 2>&1 &
job=$!
for _ in $(seq 1 480); do ls logs-d/*/checkpoints/checkpoint-epoch-000001.safetensors >/dev/null 2>&1 && break; sleep 0.25; done
sleep 2  # into epoch 2
rank0=$(rank_pid "$dtrain" 0)
rank1=$(rank_pid "$dtrain" 1)
kill -STOP "$rank1"
kill -TERM "$rank0"
start=$(date +%s.%N)
for _ in $(seq 1 80); do kill -0 "$rank0" 2>/dev/null || break; sleep 0.1; done
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
kill -CONT "$rank1" 2>/dev/null
wait "$job"
rc=$?
leftovers
# The run log still ends with the stop: a `stopped` record of a stop that could not wait, naming the
# newest complete checkpoint, and what rank 0 was waiting in: the step's gradients (training) or, where
# the signal came before the step's end, the agreement to stop there (checkpointing).
record_d=$(stopped_record logs-d)
if ! kill -0 "$rank0" 2>/dev/null && awk -v t="$took" 'BEGIN { exit !(t < 5) }' &&
   grep -Eq "did not finish within checkpoint.stop_timeout_s \(2 s\) \(the run was (training|checkpointing), epoch 2, step .*\): exiting at once; the newest complete checkpoint is kept" d.out &&
   [ -f logs-d/*/checkpoints/checkpoint-epoch-000001.safetensors ] && no_tmp logs-d &&
   [[ "$record_d" == "SIGTERM 0 2 "*" false "*"/checkpoint-epoch-000001.safetensors" ]] &&
   [[ "$(stopped_at_once logs-d)" =~ ^"the stop after SIGTERM did not finish within checkpoint.stop_timeout_s (2 s) (the run was "(training|checkpointing)", epoch 2, step " ]]; then
  pass "a stop that cannot finish (rank 1 frozen) ends rank 0 after --stop-timeout-s 2 (${took} s); epoch 1's checkpoint kept, the stop recorded"
else
  fail "stop timeout (rank 0 took ${took} s; record '$record_d')"; cat d.out
fi

# --- (e) a second signal --------------------------------------------------------------------------------
"$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${train[@]}" --log-dir logs-e >e.out 2>&1 &
job=$!
wait_training logs-e
rank0=$(rank_pid "$dtrain" 0)
rank1=$(rank_pid "$dtrain" 1)
kill -STOP "$rank1"
kill -TERM "$rank0"
sleep 0.5
kill -TERM "$rank0"  # within 2 s of the first: a launcher's copy, ignored
sleep 2.5
alive_after_copy=$(kill -0 "$rank0" 2>/dev/null && echo yes || echo no)
kill -TERM "$rank0"
for _ in $(seq 1 30); do kill -0 "$rank0" 2>/dev/null || break; sleep 0.1; done
alive_after_second=$(kill -0 "$rank0" 2>/dev/null && echo yes || echo no)
kill -CONT "$rank1" 2>/dev/null
wait "$job"
rc=$?
leftovers
if [ "$alive_after_copy" = yes ] && [ "$alive_after_second" = no ] &&
   grep -q "a second stop signal (the run was .*): exiting at once" e.out && no_tmp logs-e &&
   [[ "$(stopped_at_once logs-e)" == "a second stop signal (the run was "* ]]; then
  pass "a copy of the signal within 2 s is ignored; a second signal 3 s later exits at once"
else
  fail "second signal (alive after the copy: $alive_after_copy, after the second: $alive_after_second)"; cat e.out
fi

# --- (f) SIGTERM to torchrun's agent, (g) to the entrypoint running it --------------------------------------
# Training under torchrun on CPUs needs the gloo backend, which a CUDA build against PyPI's LibTorch lacks.
if [ -x "$torchrun" ] && ! "$dtrain" --version | grep -q gloo; then
  echo "SKIP: this dtrain has no gloo backend ($("$dtrain" --version)); the torchrun cases need it"
elif [ -x "$torchrun" ]; then
  tr_flags=(--standalone --nproc_per_node 2 --redirects 1 --tee 1 --no_python)
  gloo=(--device cpu --backend gloo --progress off)
  "$torchrun" --log_dir tr-f "${tr_flags[@]}" "$dtrain" "${train[@]}" "${gloo[@]}" --log-dir logs-f >f.out 2>&1 &
  job=$!
  wait_training logs-f && kill -TERM "$job"
  wait "$job"
  rc=$?
  leftovers
  read -r sig rank epoch step saved checkpoint <<<"$(stopped_record logs-f)"
  if [ "$sig" = SIGTERM ] && [ "$saved" = true ] && [ -f "$checkpoint" ] && no_tmp logs-f; then
    pass "SIGTERM to torchrun's agent: its workers stopped after step $step with a checkpoint (torchrun exit $rc)"
  else
    fail "SIGTERM to torchrun (exit $rc, record '$sig $saved $checkpoint')"; tail -30 f.out
  fi
  timeout 300 "$torchrun" --log_dir tr-f2 "${tr_flags[@]}" "$dtrain" "${train[@]}" "${gloo[@]}" --log-dir logs-f --resume \
    >f2.out 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "resumed epoch 1 at step $((step + 1)) from .*/$(basename "$checkpoint")" f2.out; then
    pass "a new torchrun with --resume continues at step $((step + 1))"
  else
    fail "torchrun resume after the stop (exit $rc)"; tail -30 f2.out
  fi

  # The image's entrypoint as a PyTorchJob runs it: `bash -c "time torchrun ..."`, signalled as PID 1 is.
  command="time $(printf '%q ' "$torchrun" --log_dir tr-g "${tr_flags[@]}" "$dtrain" "${train[@]}" "${gloo[@]}" --log-dir logs-g)"
  HOME=$work bash "$root/deploy/docker/dtrain-entrypoint.sh" bash -c "$command" >g.out 2>&1 &
  job=$!
  wait_training logs-g && kill -TERM "$job"
  wait "$job"
  rc=$?
  leftovers
  read -r sig rank epoch step saved checkpoint <<<"$(stopped_record logs-g)"
  # torchrun's agent exits 1 after a stop; the entrypoint says what the pod was sent (143).
  if [ "$rc" -eq 143 ] && [ "$sig" = SIGTERM ] && [ "$saved" = true ] && [ -f "$checkpoint" ] && grep -q "^real" g.out; then
    pass "SIGTERM to the entrypoint reaches torchrun and its workers: checkpoint after step $step, \`time\` still reports, exit 143"
  else
    fail "SIGTERM to the entrypoint (exit $rc, record '$sig $saved')"; tail -30 g.out
  fi

  # (m) The agent killed -9: nothing relays a stop; the workers notice their parent is gone.
  "$torchrun" --log_dir tr-m "${tr_flags[@]}" "$dtrain" "${train[@]}" "${gloo[@]}" --log-dir logs-m --max-steps 100000 \
    >m.out 2>&1 &
  job=$!
  wait_training logs-m && kill -9 "$job"
  for _ in $(seq 1 40); do pgrep -f "$work/dtrain .*logs-m" >/dev/null || break; sleep 0.25; done
  left=$(pgrep -f "$work/dtrain .*logs-m" | wc -l)
  leftovers
  last=$(tail -n 1 logs-m/*/events.jsonl)
  if [ "$left" -eq 0 ] && [[ "$last" == *'"event":"error"'*"the torchrun agent that started this worker (pid $job) is gone"*'"rank":0'* ]]; then
    pass "torchrun's agent killed -9: its workers end, and rank 0's run log ends with an error record naming the agent"
  else
    fail "killed agent: $left worker(s) left, last record: $last"; tail -5 m.out
  fi
else
  echo "SKIP: no torchrun at $torchrun (Debian: python3-torch)"
fi

# --- (h) on a GPU: NCCL, the agreement every 10 optimizer steps --------------------------------------------
if "$dtrain" --version | grep -q 'devices:.*cuda' && nvidia-smi -L >/dev/null 2>&1; then
  gpu=(--device cuda --backend nccl)
  # Steps of a millisecond or two: 4000 of them give a few seconds to be signalled in.
  gtrain=(--workload mnist --synthetic --epochs 2 --max-steps 4000 --log-interval 100 --eval-samples 200 --progress off)
  "$dtrain" "${gpu[@]}" "${gtrain[@]}" --log-dir logs-h >h.out 2>&1 &
  job=$!
  wait_training logs-h && kill -TERM "$job"
  wait "$job"
  rc=$?
  leftovers
  read -r sig rank epoch step saved checkpoint <<<"$(stopped_record logs-h)"
  if [ "$rc" -eq 143 ] && [ "$sig" = SIGTERM ] && [ "$saved" = true ] && [ -f "$checkpoint" ] &&
     [ "${step:-1}" -gt 0 ] && [ $((step % 10)) -eq 0 ] && no_tmp logs-h; then
    pass "SIGTERM on the GPU: stopped after step $step (an agreement step: every 10th) with a checkpoint, exit 143"
  else
    fail "SIGTERM on the GPU (exit $rc, record '$sig $rank $epoch $step $saved $checkpoint')"; cat h.out
  fi
  timeout 300 "$dtrain" "${gpu[@]}" "${gtrain[@]}" --log-dir logs-h --resume >h2.out 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "resumed epoch $epoch at step $((step + 1)) from" h2.out; then
    pass "--resume on the GPU continues at step $((step + 1)) and finishes"
  else
    fail "GPU resume after the stop (exit $rc)"; cat h2.out
  fi
else
  echo "SKIP: no GPU (the CUDA case needs a CUDA build and nvidia-smi)"
fi

# --- (i) a stop during a long evaluation ------------------------------------------------------------------
# Evaluation batches of 2 samples over the whole test set: about 10 s here, far longer than the stop timeout.
eval_run=(--workload mnist --synthetic --epochs 2 --max-steps 10 --log-interval 5 --eval-batch-size 2 --progress lines
          --progress-interval-s 0.2)
"$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${eval_run[@]}" --stop-timeout-s 5 --log-dir logs-i >i.out 2>&1 &
job=$!
for _ in $(seq 1 600); do grep -q "progress: evaluation 1/2" i.out 2>/dev/null && break; sleep 0.1; done
kill -TERM "$(rank_pid "$dtrain" 1)"
wait "$job"
rc=$?
leftovers
read -r sig rank epoch step saved checkpoint <<<"$(stopped_record logs-i)"
if [ "$rc" -eq 143 ] && [ "$saved" = true ] && [ "$epoch" = 1 ] && [ "$step" = 10 ] && [ -f "$checkpoint" ] &&
   grep -q "during the evaluation of epoch 1 (its 10 steps trained): checkpoint .* saved; --resume continues there with the epoch's evaluation" i.out; then
  pass "SIGTERM during a long evaluation saved the end of the epoch's training (step 10), exit 143"
else
  fail "stop during the evaluation (exit $rc, record '$sig $rank $epoch $step $saved $checkpoint')"; tail -20 i.out
fi
quick_eval=(--workload mnist --synthetic --epochs 2 --max-steps 10 --log-interval 5 --eval-samples 500 --progress off)
"$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${quick_eval[@]}" --log-dir logs-i --resume >i2.out 2>&1
rc_resumed=$?
"$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${quick_eval[@]}" --log-dir logs-i-whole >i3.out 2>&1
rc_whole=$?
# The resumed epoch 1 trains nothing more (0 samples/s), then evaluates; both runs end with the same
# figures (the evaluation's sample count differs from the stopped run's, so compare the resumed run with
# an uninterrupted run of the same command).
if [ "$rc_resumed" -eq 0 ] && [ "$rc_whole" -eq 0 ] && grep -q "resumed epoch 1 at step 11 from" i2.out &&
   [ "$(grep '^epoch 2/2' i2.out | cut -d'|' -f2-4)" = "$(grep '^epoch 2/2' i3.out | cut -d'|' -f2-4)" ]; then
  pass "--resume evaluates the epoch and ends as the uninterrupted run: $(grep '^epoch 2/2' i2.out | cut -d'|' -f2-4)"
else
  fail "resume after the stop during the evaluation (exit $rc_resumed, uninterrupted $rc_whole)"; tail -5 i2.out i3.out
fi

# --- (j) a stop while joining ------------------------------------------------------------------------------
port=$((30000 + RANDOM % 20000))
env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$dtrain" "${train[@]}" --log-dir logs-j >j.out 2>&1 &
job=$!
sleep 2  # rank 0 waits in the store for rank 1, which never comes
start=$(date +%s.%N)
kill -TERM "$job"
wait "$job"
rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
leftovers
if [ "$rc" -eq 143 ] && awk -v t="$took" 'BEGIN { exit !(t < 2) }' &&
   grep -q "stopped by SIGTERM before the run started (joining the other ranks or reading the configuration): nothing was trained yet, so there is nothing to save: exiting at once" j.out; then
  pass "SIGTERM while joining: exit 143 after ${took} s, nothing to save"
else
  fail "stop while joining (exit $rc after ${took} s)"; cat j.out
fi

# --- (k) a console that goes away ---------------------------------------------------------------------------
"$dtrain" "${cpu[@]}" "${train[@]}" --max-steps 30 --log-interval 1 --log-dir logs-k 2>k.err | head -1 >/dev/null
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 5 ] && grep -q "dtrain: error: cannot write the console output (stdout), where the metric lines go: Broken pipe" k.err &&
   grep -q '"event":"error"' logs-k/*/events.jsonl; then
  pass "a console that goes away (| head -1): exit 5, the error printed and recorded"
else
  fail "console that goes away (exit $rc)"; cat k.err
fi

# --- (l) a rank killed under mpirun ------------------------------------------------------------------------
"$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${train[@]}" --max-steps 100000 --log-dir logs-l >l.out 2>&1 &
job=$!
wait_training logs-l && kill -9 "$(rank_pid "$dtrain" 1)"
wait "$job"
rc=$?
leftovers
if [ "$rc" -ne 0 ] && grep -Eq '"event":"warning".*"message":"SIGTERM from pid [0-9]* \((mpirun|mpiexec), this rank.s launcher\): stopping at the next step boundary with a checkpoint. Open MPI sends it when it ends the job: after a rank died' logs-l/*/events.jsonl; then
  pass "a rank killed -9 under mpirun: rank 0's run log says at once that mpirun is ending the job and why it does (exit $rc)"
else
  fail "rank killed under mpirun (exit $rc): $(tail -n 2 logs-l/*/events.jsonl)"; tail -8 l.out
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
