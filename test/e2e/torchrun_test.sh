#!/usr/bin/env bash
# End-to-end tests of dtrain under torchrun (Debian's python3-torch): ranks bootstrapped from RANK,
# WORLD_SIZE and MASTER_ADDR/MASTER_PORT, Gloo collectives, and elastic restarts as users meet them:
#   standalone  torchrun --standalone --nproc_per_node 2 trains as world size 2
#   env errors  a rank whose peers never come, bad variables, an MPI backend under torchrun
#   (c)         a worker killed (not its agent): the group restarts at the same size and resumes inside
#               the epoch, with no step repeated or skipped
#   (a)         2 agents x 1 worker, one agent killed -9 mid-epoch: the job finishes at world size 1
#   (b)         1 agent of --nnodes 1:2, a second one started later: it joins, world size 2 from then on
#   (d)         a worker stopped with SIGSTOP: rank 0 names it within comm.timeout_s + 10 s, the job ends
#   (e)         --deterministic, 2 agents x 2 workers, one agent killed: at world size 2 the job ends with
#               the bits of a 1-rank run
# Every run log is checked. Debian 12's torchrun needs --log_dir, --redirects and --tee (docs/elastic.md).
# Usage: torchrun_test.sh DTRAIN [bootstrap|elastic|all]: the environment cases and standalone training
# (bootstrap), the restarts (c), (d), (a), (e), (b) (elastic), or both (the default).
set -uo pipefail
dtrain=$(realpath "$1")
part=${2:-all}
case "$part" in bootstrap|elastic|all) ;; *) echo "torchrun_test: part must be bootstrap, elastic or all, got '$part'" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
torchrun=${TORCHRUN:-/usr/bin/torchrun}
work=$(mktemp -d)
cleanup() {
  pkill -9 -f "$work" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
# shellcheck source=../support/checks.sh
. "$here/../support/checks.sh"
if [ ! -x "$torchrun" ]; then
  echo "SKIP: no torchrun at $torchrun (Debian: python3-torch)"
  exit 77
fi
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# A copy of the binary under this test's directory, so that cleanup can find every process it started.
cp "$dtrain" "$work/dtrain"
dtrain=$work/dtrain
# Debian 12's torchrun crashes on Python 3.11 without these (docs/elastic.md).
tr_flags=(--redirects 1 --tee 1)
fast=(--workload mnist --synthetic --eval-samples 500 --log-interval 5 --progress off)
# The run_start, resume, checkpoint and epoch_end records of every run log under DIR, oldest first.
records() { cat "$1"/*/events.jsonl | grep -E '"event":"(run_start|resume|epoch_end|run_end|error)"'; }
# Waits up to 120 s for a checkpoint inside an epoch at step >= 20 in directory $1.
wait_for_checkpoint() {
  for _ in $(seq 1 240); do
    if ls "$1" 2>/dev/null | grep -Eq "step-0*([2-9][0-9]|[1-9][0-9]{2,})\.safetensors$"; then return 0; fi
    sleep 0.5
  done
  return 1
}

# Training under torchrun on CPUs needs the gloo backend (a CUDA build against PyPI's LibTorch has none).
need_gloo() {
  if ! "$dtrain" --version | grep -q "gloo"; then
    echo "SKIP: this dtrain has no gloo backend ($("$dtrain" --version)); the training cases need it:" \
      "$([ "$part" = elastic ] && echo "(c), (d), (a), (e) and (b)" || echo "standalone training and a second job in the same --log-dir")"
    echo "$failures failure(s)"
    [ "$failures" -eq 0 ] || exit 1
    exit 77  # the training cases did not run: ctest shows the suite skipped, not passed
  fi
}

# An agent of an elastic job of 1 to 2 nodes with WORKERS workers each, in the background:
#   elastic_agent ID INDEX PORT WORKERS DTRAIN_ARGS...
# (its output in ID<INDEX>.out, torchrun's logs in tl-ID<INDEX>, dtrain's in logs-ID and ck-ID).
elastic_agent() {
  local id=$1 index=$2 port=$3 workers=$4
  shift 4
  timeout 600 "$torchrun" --nnodes 1:2 --nproc_per_node "$workers" --max_restarts 3 --monitor_interval 1 --rdzv_backend c10d \
    --rdzv_endpoint 127.0.0.1:"$port" --rdzv_conf last_call_timeout=3 --rdzv_id "$id" --log_dir "tl-$id$index" \
    "${tr_flags[@]}" --no_python "$dtrain" "${fast[@]}" "$@" --log-dir "logs-$id" --checkpoint-dir "ck-$id" \
    >"$id$index.out" 2>&1 &
}

# bootstrap: torchrun and its environment bring up the ranks, or fail clearly.
bootstrap() {
  # --- the environment without torchrun: a rank never trains alone, bad variables are named -----------
  port=$(free_port)
  env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 120 "$dtrain" "${fast[@]}" --comm-timeout-s 3 \
    --log-dir logs-alone >alone1.out 2>&1
  rc1=$?
  env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 120 "$dtrain" "${fast[@]}" --comm-timeout-s 3 \
    --log-dir logs-alone >alone0.out 2>&1
  rc0=$?
  if [ "$rc1" -eq 6 ] && grep -q "\[rank 1/2\] cannot reach the c10d store at 127.0.0.1:$port (MASTER_ADDR, MASTER_PORT; rank 0 hosts it) within 3 s" alone1.out &&
     [ "$rc0" -eq 6 ] && grep -q "\[rank 0/2\] joining the 2 ranks of WORLD_SIZE did not complete within 3 s (comm.timeout_s): rank 1 of 2 did not arrive (store at 127.0.0.1:$port" alone0.out &&
     ! grep -q "metricName" alone0.out alone1.out; then
    pass "a rank of WORLD_SIZE=2 whose peer never comes fails (exit 6) naming the store and the missing rank"
  else
    fail "lonely ranks: exits $rc0/$rc1"; cat alone0.out alone1.out
  fi
  # MASTER_PORT at a service that takes connections but is no c10d store: bounded by the timeout, named.
  mute_port=$(free_port)
  /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
held = []
end = time.time() + 120
while time.time() < end:
    s.settimeout(1)
    try: held.append(s.accept()[0])
    except OSError: pass
  ' "$mute_port" &
  mute=$!
  sleep 0.5
  start=$(date +%s)
  env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$mute_port" timeout 120 "$dtrain" "${fast[@]}" --comm-timeout-s 3 \
    >mute.out 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  kill "$mute" 2>/dev/null
  if [ "$rc" -eq 6 ] && [ "$took" -le 10 ] &&
     grep -q "cannot reach the c10d store at 127.0.0.1:$mute_port .* within 3 s: something there took the connection but did not answer as a c10d store" mute.out; then
    pass "MASTER_PORT at a service that is no c10d store fails after --comm-timeout-s 3 (${took} s), naming the address"
  else
    fail "a mute service at MASTER_PORT: exit $rc after ${took} s"; cat mute.out
  fi
  # MASTER_ADDR that does not resolve: a line at once, retries within the timeout, then the error.
  env RANK=1 WORLD_SIZE=2 MASTER_ADDR=no-such-host.invalid MASTER_PORT="$port" timeout 120 "$dtrain" "${fast[@]}" \
    --comm-timeout-s 6 >unresolved.out 2>&1 &
  job=$!
  sleep 3
  early=$(grep -c "dtrain: warning: MASTER_ADDR 'no-such-host.invalid' does not resolve to an address here" unresolved.out)
  wait "$job"
  rc=$?
  if [ "$early" -eq 1 ] && [ "$rc" -eq 6 ] &&
     grep -q "cannot reach the c10d store at no-such-host.invalid:$port .* within 6 s: MASTER_ADDR 'no-such-host.invalid' does not resolve" unresolved.out; then
    pass "an unresolvable MASTER_ADDR is said at once and fails after the timeout (exit 6)"
  else
    fail "unresolvable MASTER_ADDR: a line within 3 s: $early, exit $rc"; cat unresolved.out
  fi
  env RANK=2 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$dtrain" "${fast[@]}" >badrank.out 2>&1
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q "RANK='2' is not an integer from 0 to 1" badrank.out; then
    pass "RANK outside WORLD_SIZE is a configuration error naming the variable (exit 2)"
  else
    fail "RANK=2 of 2: exit $rc"; cat badrank.out
  fi
  "$dtrain" --bootstrap env "${fast[@]}" >noenv.out 2>&1
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q "comm.bootstrap 'env' needs RANK and WORLD_SIZE" noenv.out; then
    pass "--bootstrap env without torchrun's variables says which are missing (exit 2)"
  else
    fail "--bootstrap env alone: exit $rc"; cat noenv.out
  fi
  # torchrun exits 1 whatever its workers did; the error file dtrain writes reaches the agent's own
  # TORCHELASTIC_ERROR_FILE with the worker's status, where dtrain-entrypoint reads it (docs/failures.md).
  TORCHELASTIC_ERROR_FILE=$work/agent-error.json timeout 120 "$torchrun" --standalone --nproc_per_node 2 --log_dir tl-mpi \
    "${tr_flags[@]}" --no_python "$dtrain" "${fast[@]}" --backend mpi --log-dir logs-mpi >mpi.out 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$(grep -c "dtrain: error: comm.backend 'mpi' needs ranks that an MPI launcher started" mpi.out)" -eq 1 ]; then
    pass "--backend mpi under torchrun is one clear error, printed once"
  else
    fail "--backend mpi under torchrun: exit $rc"; cat mpi.out
  fi
  if agent=$(/usr/bin/python3 -c '
import json, sys
message = json.load(open(sys.argv[1]))["message"]
print(message["errorCode"], message["message"])' "$work/agent-error.json" 2>&1) &&
     [[ "$agent" == "2 "*"comm.backend 'mpi' needs ranks that an MPI launcher started"* ]] &&
     grep -q "exitcode *: 2 " mpi.out; then
    pass "torchrun (exit $rc) hands on the worker's status and message in its error file: ${agent:0:60}..."
  else
    fail "torchrun's error file: '$agent'"; cat mpi.out
  fi

  need_gloo

  # --- standalone: two workers of one agent train as one job of world size 2 -------------------------
  timeout 300 "$torchrun" --standalone --nproc_per_node 2 --log_dir tl-std "${tr_flags[@]}" --no_python "$dtrain" \
    "${fast[@]}" --max-steps 6 --epochs 2 --log-dir logs-std --checkpoint-dir ck-std >std.out 2>&1
  rc=$?
  rank0_out=$(ls tl-std/*/attempt_0/0/stdout.log 2>/dev/null | head -1)
  if [ "$rc" -eq 0 ] && [ -n "$rank0_out" ] &&
     /usr/bin/python3 "$here/check_run_output.py" "$rank0_out" logs-std 2 katib &&
     grep -q '"world_size":2,.*"backend":"gloo".*"bootstrap":"env","launcher":"torchrun, store at' logs-std/*/events.jsonl; then
    pass "torchrun --standalone --nproc_per_node 2 trains as world size 2 over gloo, bootstrapped from the environment"
  else
    fail "standalone torchrun (exit $rc)"; cat std.out
  fi

  # --- a second job in the same --log-dir (--standalone gives each torchrun a job id of its own): restarts
  # resume unasked, but only their own job's run; the new job trains a run of its own. With the first job's
  # --checkpoint-dir it is refused instead of continuing the earlier job's checkpoints.
  for n in 1 2; do
    timeout 300 "$torchrun" --standalone --nproc_per_node 2 --log_dir "tl-jobs$n" "${tr_flags[@]}" --no_python "$dtrain" \
      "${fast[@]}" --max-steps 6 --epochs 1 --log-dir logs-jobs >"jobs$n.out" 2>&1
  done
  timeout 300 "$torchrun" --standalone --nproc_per_node 2 --log_dir tl-jobs3 "${tr_flags[@]}" --no_python "$dtrain" \
    "${fast[@]}" --max-steps 6 --epochs 2 --log-dir logs-jobs --checkpoint-dir ck-std >jobs3.out 2>&1
  rc3=$?
  runs=$(ls -d logs-jobs/*/ | wc -l)
  trained=$(grep -l '"event":"epoch_end"' logs-jobs/*/events.jsonl | wc -l)
  if [ "$runs" -eq 3 ] && [ "$trained" -eq 2 ] && ! grep -q '"event":"finished_run"' logs-jobs/*/events.jsonl &&
     grep -q "starts a run of its own" jobs2.out && [ "$rc3" -ne 0 ] &&
     grep -q "checkpoint.dir 'ck-std' holds checkpoints of torchrun job '.*' (ck-std/checkpoint-epoch-.*), which this job would continue" jobs3.out; then
    pass "a new torchrun job in the same --log-dir trains a run of its own; another job's --checkpoint-dir is refused"
  else
    fail "a second torchrun job: $runs runs, $trained trained, exit of the third $rc3"; tail -n 5 jobs2.out jobs3.out
  fi
}

# elastic: restarts, departures and arrivals, as an elastic job meets them.
elastic() {
  need_gloo

  # --- (c) a worker dies: the agent restarts the group, which resumes inside the epoch ----------------
  # Global batch 128 (2 x 64), a checkpoint every 10 steps, 60 steps per epoch (check_elastic_runs.py reads
  # the logs).
  timeout 600 "$torchrun" --standalone --nproc_per_node 2 --max_restarts 1 --monitor_interval 1 --log_dir tl-c \
    "${tr_flags[@]}" --no_python "$dtrain" "${fast[@]}" --epochs 2 --max-steps 60 --checkpoint-every-steps 10 \
    --log-dir logs-c --checkpoint-dir ck-c >c.out 2>&1 &
  job=$!
  if wait_for_checkpoint ck-c; then
    pkill -9 -f "$dtrain.*logs-c" --newest
  fi
  wait "$job"
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "{metricName: accuracy" c.out &&
     /usr/bin/python3 "$here/check_elastic_runs.py" logs-c 2 2 1 60 128 64; then
    pass "(c) a killed worker: torchrun restarts the group at world size 2, which resumes inside the epoch, no step repeated or skipped"
  else
    fail "(c) killed worker: exit $rc"; tail -30 c.out; records logs-c
  fi

  # --- (d) a stopped (not dead) worker: its Gloo connections stay open, so only the heartbeat over the
  # c10d store can tell the others which rank it is. SIGSTOP rank 1 mid-epoch; rank 0's timeout must name
  # it within comm.timeout_s + 10 s, and the job must end.
  timeout_s=10
  timeout 300 "$torchrun" --standalone --nproc_per_node 2 --max_restarts 0 --monitor_interval 1 --log_dir tl-d \
    "${tr_flags[@]}" --no_python "$dtrain" "${fast[@]}" --epochs 1 --max-steps 100000 --comm-timeout-s "$timeout_s" \
    --log-dir logs-d --checkpoint=false >d.out 2>&1 &
  job=$!
  stopped=""
  for _ in $(seq 1 240); do  # rank 1, once it trains (its first progress line is out)
    if grep -q "Train Epoch" d.out; then
      for pid in $(pgrep -f "^$dtrain .*logs-d"); do
        if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=1"; then stopped=$pid; fi
      done
    fi
    [ -n "$stopped" ] && break
    sleep 0.5
  done
  if [ -n "$stopped" ]; then
    kill -STOP "$stopped"
    stopped_at=$(date +%s.%N)
    named_s=""
    for _ in $(seq 1 120); do
      if grep -q "rank 1/2 (host [^)]*) has stopped reporting to the store" d.out; then
        named_s=$(awk -v a="$stopped_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        break
      fi
      sleep 0.5
    done
    kill -CONT "$stopped" 2>/dev/null
  fi
  wait "$job"
  rc=$?
  if [ -n "$stopped" ] && [ -n "$named_s" ] && awk -v s="$named_s" -v t="$timeout_s" 'BEGIN { exit !(s <= t + 10) }' &&
     [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then
    pass "(d) a SIGSTOPped worker under torchrun is named by rank 0 ${named_s} s after it stopped (limit $((timeout_s + 10)) s); the job ended with exit $rc"
  else
    fail "(d) stopped worker: pid '${stopped}', named after '${named_s:-never}' s, exit $rc"; grep -v "^\s*$" d.out | tail -25
  fi

  # --- (a) two agents, one killed -9 mid-epoch: the job finishes at world size 1 ----------------------
  # --- (e) --deterministic through a shrink: 2 agents x 2 workers, one agent killed -9 inside the epoch.
  # The job goes on at world size 2 from the newest checkpoint, with the global batch, its 8 shards and
  # the dropout draws of the 4-rank run, and ends with the bits of a 1-rank run that never shrank.
  # Both jobs run side by side: each then waits about 15 s for torchrun's rendezvous to give up the killed
  # agent (its keep-alive: 3 x 5 s in torch 1.13, not configurable), and the 1-rank run fits in that wait.
  local det=(--deterministic --global-batch-size 64 --epochs 1 --max-steps 60 --checkpoint-every-steps 10)
  local port_a port_e a0 a1 e0 e1 killer_a killer_e rc_a rc_e rc_alone same=""
  port_a=$(free_port)
  elastic_agent a 0 "$port_a" 1 --epochs 2 --max-steps 60 --checkpoint-every-steps 10
  a0=$!
  port_e=$(free_port)
  elastic_agent e 0 "$port_e" 2 "${det[@]}"
  e0=$!
  sleep 1  # agent 0 hosts the rendezvous store: it must be up first
  elastic_agent a 1 "$port_a" 1 --epochs 2 --max-steps 60 --checkpoint-every-steps 10
  a1=$!
  elastic_agent e 1 "$port_e" 2 "${det[@]}"
  e1=$!
  # Kills agent 1 of job $1 once the job has a checkpoint inside its epoch at step 20 or later.
  kill_second_agent() { wait_for_checkpoint "ck-$1" && kill -9 "$(pgrep -f "torchrun.*tl-${1}1" -n)"; }
  kill_second_agent a & killer_a=$!
  kill_second_agent e & killer_e=$!
  wait "$killer_e"
  timeout 300 "$torchrun" --standalone --nproc_per_node 1 --log_dir tl-e-alone "${tr_flags[@]}" --no_python "$dtrain" \
    "${fast[@]}" "${det[@]}" --log-dir logs-e-alone --checkpoint-dir ck-e-alone >e-alone.out 2>&1
  rc_alone=$?
  wait "$killer_a"
  wait "$a0"; rc_a=$?
  wait "$e0"; rc_e=$?
  wait "$a1" "$e1" 2>/dev/null
  if [ "$rc_a" -eq 0 ] && grep -q "{metricName: accuracy" a0.out &&
     grep -q "the torchrun agent that started this worker (pid [0-9]*) is gone" a1.out &&
     /usr/bin/python3 "$here/check_elastic_runs.py" logs-a 2 1 1 60 128 64; then
    pass "(a) an agent killed -9 mid-epoch: its orphaned worker stops, the other restarts at world size 1 and finishes (exit 0)"
  else
    fail "(a) killed agent: exit $rc_a"; tail -20 a0.out a1.out; records logs-a
  fi
  # Under the mode an optimizer step is one pass of each rank's 32 samples (its 4 shards inside it).
  if [ "$rc_e" -eq 0 ] && [ "$rc_alone" -eq 0 ] && grep -q "resumed epoch 1 at step [0-9]* .*(world size 4 then, 2 now" e0.out &&
     grep -q "the torchrun agent that started this worker (pid [0-9]*) is gone" e1.out &&
     /usr/bin/python3 "$here/check_elastic_runs.py" logs-e 4 2 1 60 64 32 &&
     same=$(/usr/bin/python3 "$here/../support/same_model.py" ck-e-alone ck-e); then
    pass "(e) --deterministic, an agent of 2 x 2 workers killed -9: $(grep -o "resumed epoch 1 at step [0-9]*" e0.out | head -1) at world size 2, the 1-rank run's bits at the end ($same)"
  else
    fail "(e) --deterministic shrink from 4 to 2: exits $rc_e (job) and $rc_alone (1 rank); ${same:-the runs did not finish or resume as expected}"
    tail -20 e0.out e1.out e-alone.out; records logs-e
  fi

  # --- (b) a second agent joins later: the group restarts at world size 2 and uses it -----------------
  port=$(free_port)
  elastic_agent b 0 "$port" 1 --epochs 1 --max-steps 400 --checkpoint-every-steps 10
  agent0=$!
  wait_for_checkpoint ck-b
  elastic_agent b 1 "$port" 1 --epochs 1 --max-steps 400 --checkpoint-every-steps 10
  agent1=$!
  wait "$agent0"
  rc=$?
  wait "$agent1"
  rc1=$?
  if [ "$rc" -eq 0 ] && [ "$rc1" -eq 0 ] && grep -q "{metricName: accuracy" b0.out &&
     /usr/bin/python3 "$here/check_elastic_runs.py" logs-b 1 2 0 400 64 64; then
    pass "(b) an agent that joins later is admitted at the next rendezvous: world size 2 from then on"
  else
    fail "(b) late join: exits $rc/$rc1"; tail -20 b0.out b1.out; records logs-b
  fi
}

case "$part" in
  bootstrap) bootstrap; expect=run_start,epoch_end,run_end ;;
  elastic) elastic; expect=run_start,resume,checkpoint,epoch_end,run_end ;;
  all) bootstrap; elastic; expect=run_start,resume,checkpoint,epoch_end,run_end ;;
esac

# Every run log written under torchrun (restarts, resumes at other world sizes) matches the run log's schema.
if /usr/bin/python3 "$here/../support/check_run_logs.py" --min-logs 3 --expect "$expect" \
     "$work" >schema.txt; then
  pass "$(tail -n 1 schema.txt)"
else
  fail "run logs that do not match runtime/log/run_log.schema.json"; cat schema.txt
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
