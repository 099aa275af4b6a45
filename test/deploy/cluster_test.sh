#!/usr/bin/env bash
# dtrain across the emulated cluster of deploy/local/cluster.sh: network namespaces with their own host
# names, links through a bridge, shaped by tc. Two suites:
#   quick   (CI, about a minute) 4 nodes at 1 Gbit/s and half a core each: mpirun and torchrun runs whose
#           run logs show 4 hosts, TCP over eth0 and the ring's bytes on the links; a node's link cut
#           mid-epoch under mpirun ends every rank within comm.timeout_s + 10 s, naming the rank and host;
#           `down` leaves nothing behind.
#   faults  (label long) the same cut with the gloo backend, and under torchrun --nnodes 2:3, where the
#           survivors name the cut-off rank, resume at world size 2 and finish; 1% packet loss on one node ends with parameters
#           identical to a run without loss; an MTU mismatch between nodes fails with a clear error or
#           finishes, never hangs.
#   comm    (CI, about a minute) 2 nodes at 200 Mbit/s and half a core: the waits for communication block
#           and backward hides it (the CPU during the waits, from the run log), with comm.wait active as
#           the control that must show polling; then node2 at a quarter core is named the straggler; and a
#           2-node study with the PyTorch DDP peer and the emulator's floor, read by dtrain-report.
# Usage: cluster_test.sh DTRAIN quick|faults|comm. Exits 77 (CTest's skip) with the reason where namespaces
# cannot be made (not root, no iproute2).
set -uo pipefail
dtrain=$(readlink -f "$1")
suite=${2:-quick}
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster="$root/deploy/local/cluster.sh"
name=t$$
work=$(mktemp -d /tmp/dtrain-cluster.XXXXXX)
export DTRAIN_CLUSTER=$name
# shellcheck source=../../scripts/mpi_env.sh
. "$root/scripts/mpi_env.sh"

cleanup() { bash "$cluster" down >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT
# shellcheck source=../support/checks.sh
. "$root/test/support/checks.sh"
show() { echo "--- $1"; grep -v '^\S*:\?  ' "$1" | tail -n "${2:-25}"; }

if [ "$(id -u)" -ne 0 ]; then echo "SKIP: the emulated cluster needs root (network namespaces)"; exit 77; fi
for tool in ip tc nsenter unshare iptables; do
  command -v "$tool" >/dev/null || { echo "SKIP: '$tool' not found (Debian: iproute2, util-linux, iptables)"; exit 77; }
done
if ! ip netns add "$name-probe" 2>"$work/probe.err"; then
  echo "SKIP: cannot make a network namespace here: $(cat "$work/probe.err")"; exit 77
fi
ip netns del "$name-probe"

fast=(--workload mnist --synthetic --epochs 1 --eval-samples 200 --progress off --log-interval 1000)

# up N OPTIONS...: a fresh cluster, or the test fails.
up() {
  bash "$cluster" up "$@" >"$work/up.log" 2>&1 || { fail "cluster.sh up $*"; cat "$work/up.log"; exit 1; }
}

# cut NODE AFTER_S TIMEOUT_S OUT LAUNCH...: runs LAUNCH, sets NODE's link down AFTER_S seconds in, and
# records in $cut_s how long after the cut the last of the cluster's dtrain processes ended.
cut() {
  local node=$1 after=$2 limit=$3 out=$4
  shift 4
  timeout "$limit" "$@" >"$out" 2>&1 &
  local launch=$! cut_at now
  sleep "$after"
  bash "$cluster" link "$node" down
  cut_at=$(date +%s.%N)
  while pgrep -f "^$dtrain " >/dev/null; do sleep 0.5; done
  now=$(date +%s.%N)
  cut_s=$(awk -v a="$cut_at" -v b="$now" 'BEGIN { printf "%.1f", b - a }')
  wait "$launch"
  cut_status=$?
}

check_logs() {  # DIR: every run log matches the schema
  /usr/bin/python3 "$root/test/support/check_run_logs.py" "$1" >"$work/schema.out" 2>&1 ||
    { fail "run logs under $1 do not match the schema"; cat "$work/schema.out"; }
}

quick() {
  up 4 --rate 1gbit --cpu 0.5
  # 1. mpirun across the 4 nodes, one rank each.
  if timeout 180 bash "$cluster" mpirun -- "$dtrain" "${fast[@]}" --max-steps 6 --log-dir "$work/mpi" \
       --checkpoint=false >"$work/mpi.out" 2>&1 &&
     /usr/bin/python3 "$root/test/deploy/check_cluster_run.py" "$work/mpi" 4 eth0 >"$work/check.out"; then
    pass "mpirun on 4 nodes: $(cat "$work/check.out")"
  else
    fail "mpirun on 4 nodes"; show "$work/mpi.out"; cat "$work/check.out"
  fi
  check_logs "$work/mpi"
  # 2. torchrun, one agent per node, c10d rendezvous at node1: Gloo over the links.
  if timeout 180 bash "$cluster" torchrun -- "$dtrain" "${fast[@]}" --max-steps 6 --log-dir "$work/tr" \
       --checkpoint=false >"$work/tr.out" 2>&1 &&
     /usr/bin/python3 "$root/test/deploy/check_cluster_run.py" "$work/tr" 4 eth0 >"$work/check.out"; then
    pass "torchrun on 4 nodes: $(cat "$work/check.out")"
  else
    fail "torchrun on 4 nodes"; show "$work/tr.out"; cat "$work/check.out"
  fi
  # 3. node4's link cut mid-epoch under mpirun: the heartbeat names rank 3 on node4, every rank ends.
  local timeout_s=15
  cut node4 12 120 "$work/cut.out" bash "$cluster" mpirun -- "$dtrain" "${fast[@]}" --max-steps 100000 \
    --comm-timeout-s "$timeout_s" --log-dir "$work/cut" --checkpoint=false
  if [ "$cut_status" -ne 0 ] && [ "$cut_status" -ne 124 ] &&
     awk -v s="$cut_s" -v t="$timeout_s" 'BEGIN { exit !(s <= t + 10) }' &&
     grep -q "rank 3/4 (host node4)" "$work/cut.out"; then
    pass "link cut under mpirun (mpi): every rank ended ${cut_s} s after the cut (limit $((timeout_s + 10)) s), exit $cut_status, rank 3 on node4 named"
  else
    fail "link cut under mpirun (mpi): exit $cut_status, last rank ended ${cut_s} s after the cut (limit $((timeout_s + 10)) s)"
    show "$work/cut.out"
  fi
  # 4. down removes everything up made.
  bash "$cluster" down >/dev/null 2>&1
  local left
  left=$(ip netns list | grep -c "^$name-"; ls -d "/run/dtrain-cluster/$name" /etc/netns/"$name"-* /sys/fs/cgroup/cpu/dtrain-cluster-"$name" 2>/dev/null)
  if [ "$left" = 0 ]; then pass "cluster.sh down left no namespace, state, hosts file or cgroup"; else fail "left behind: $left"; fi
}

# Two checkpoints hold the same model, bit for bit (test/support/same_model.py).
same_model() { /usr/bin/python3 "$root/test/support/same_model.py" "$1" "$2"; }

faults() {
  local timeout_s=15
  # 1. The cut with the gloo backend (mpirun starts, Gloo carries the gradients).
  up 3 --cpu 0.5
  cut node3 12 120 "$work/gloo.out" bash "$cluster" mpirun -- "$dtrain" "${fast[@]}" --max-steps 100000 \
    --backend gloo --comm-timeout-s "$timeout_s" --log-dir "$work/gloo" --checkpoint=false
  if [ "$cut_status" -ne 0 ] && [ "$cut_status" -ne 124 ] &&
     awk -v s="$cut_s" -v t="$timeout_s" 'BEGIN { exit !(s <= t + 10) }' &&
     grep -q "rank 2/3 (host node3)" "$work/gloo.out"; then
    pass "link cut under mpirun (gloo): every rank ended ${cut_s} s after the cut, exit $cut_status, rank 2 on node3 named"
  else
    fail "link cut under mpirun (gloo): exit $cut_status, last rank ended ${cut_s} s after the cut"; show "$work/gloo.out"
  fi

  # 2. The cut under torchrun --nnodes 2:3: the survivors restart at world size 2 from the newest
  # checkpoint and finish the epoch. The cut-off node's own agent cannot reach the rendezvous store and
  # torchrun 1.13 does not end it (docs/failures.md); the test stops it once the survivors are done.
  up 3 --cpu 0.5
  timeout 300 bash "$cluster" torchrun --nnodes 2:3 --max_restarts 3 --monitor_interval 1 \
    --rdzv_conf last_call_timeout=3 -- "$dtrain" "${fast[@]}" --max-steps 60 --comm-timeout-s "$timeout_s" \
    --log-dir "$work/el" --checkpoint-dir "$work/el-ck" --checkpoint-every-steps 10 >"$work/el.out" 2>&1 &
  local launch=$!
  # The cut comes once a checkpoint is on disk (a fixed delay raced the start-up on a loaded machine).
  local deadline=$((SECONDS + 120))
  while [ $SECONDS -lt $deadline ] && ! compgen -G "$work/el-ck/checkpoint-epoch-*.safetensors" >/dev/null; do sleep 0.5; done
  bash "$cluster" link node3 down
  deadline=$((SECONDS + 200))
  while [ $SECONDS -lt $deadline ] && ! grep -q "done: 1 epoch" "$work/el.out"; do sleep 1; done
  if grep -q "done: 1 epoch" "$work/el.out" &&
     grep -q '"event":"resume".*"from_world_size":3,"world_size":2' "$work"/el/*/events.jsonl &&
     grep -q "rank 2/3 (host node3) has stopped reporting" "$work/el.out"; then
    pass "link cut under torchrun --nnodes 2:3: rank 2 on node3 named, $(grep -o 'resumed epoch 1 at step [0-9]*' "$work/el.out" | head -1) at world size 2 and finished"
  else
    fail "link cut under torchrun --nnodes 2:3: the survivors did not finish at world size 2"; show "$work/el.out" 40
  fi
  bash "$cluster" down >/dev/null 2>&1
  kill "$launch" 2>/dev/null; wait "$launch" 2>/dev/null
  check_logs "$work/el"

  # 3. 1% loss on node2's link, each direction: TCP retransmits, the parameters end identical.
  local steps=30
  up 3 --rate 1gbit --cpu 0.5
  timeout 300 bash "$cluster" mpirun -- "$dtrain" "${fast[@]}" --max-steps "$steps" --log-dir "$work/clean" \
    --checkpoint-dir "$work/clean-ck" >"$work/clean.out" 2>&1 || { fail "run without loss"; show "$work/clean.out"; }
  bash "$cluster" loss node2 0.01
  timeout 300 bash "$cluster" mpirun -- "$dtrain" "${fast[@]}" --max-steps "$steps" --log-dir "$work/lossy" \
    --checkpoint-dir "$work/lossy-ck" >"$work/lossy.out" 2>&1 || { fail "run with 1% loss"; show "$work/lossy.out"; }
  if same_model "$work/clean-ck/checkpoint-epoch-000001.safetensors" "$work/lossy-ck/checkpoint-epoch-000001.safetensors" >"$work/same.out"; then
    pass "1% loss on node2: identical models ($(cat "$work/same.out")); communication s/step $(
      /usr/bin/python3 -c 'import json,sys
for p in sys.argv[1:]:
  e=[json.loads(l) for l in open(p) if "\"epoch_end\"" in l][-1]; print("%.3f" % (e["comm_s"]/e["steps"]), end=" ")' \
      "$work"/clean/*/events.jsonl "$work"/lossy/*/events.jsonl)(without, with)"
  else
    fail "1% loss on node2: parameters differ: $(cat "$work/same.out")"
  fi

  # 4. node3 at MTU 9000, the others at 1500: large frames from node3 are dropped at the others' smaller
  # MTU, so its TCP segments shrink (path MTU discovery does not apply on one link: the peers' MSS, set
  # from their MTU, bounds what node3 sends). Either it trains, or it fails naming the problem; it never
  # hangs past the comm timeout.
  up 3 --cpu 0.5
  bash "$cluster" mtu node3 9000
  local started=$SECONDS
  timeout 240 bash "$cluster" mpirun -- "$dtrain" "${fast[@]}" --max-steps 20 --comm-timeout-s "$timeout_s" \
    --log-dir "$work/mtu" --checkpoint=false >"$work/mtu.out" 2>&1
  local status=$?
  if [ "$status" -eq 0 ]; then
    pass "MTU mismatch (node3 9000, others 1500): trained in $((SECONDS - started)) s"
  elif [ "$status" -ne 124 ] && grep -q "dtrain: error" "$work/mtu.out"; then
    pass "MTU mismatch: failed in $((SECONDS - started)) s with: $(grep -m1 'dtrain: error' "$work/mtu.out")"
  else
    fail "MTU mismatch: exit $status after $((SECONDS - started)) s"; show "$work/mtu.out"
  fi
}

# What communication costs the nodes, from the run logs: waits that block (CPU during the exposed waits
# a small share of them and of the step), buckets that overlap backward, the control that polls and is
# seen polling, and a node with half the CPU named as the straggler.
comm() {
  local steps=20 check="$root/test/deploy/check_comm_cost.py" data=/usr/share/datasets/fashion-mnist
  [ -d "$data" ] || { echo "SKIP: the PyTorch peer reads the real Fashion-MNIST (Debian: dataset-fashion-mnist)"; exit 77; }
  local -a run=(--workload mnist --synthetic --epochs 1 --max-steps "$steps" --eval-samples 64 --progress off
                --log-interval 1000 --checkpoint=false)
  # A slow link, so that communication is a large part of the step and its overlap shows.
  up 2 --rate 200mbit --cpu 0.5
  # 1. The default: passive waits, overlapped buckets.
  if timeout 100 bash "$cluster" mpirun -- "$dtrain" "${run[@]}" --log-dir "$work/passive" >"$work/passive.out" 2>&1 &&
     /usr/bin/python3 "$check" "$work/passive" passive >"$work/check.out"; then
    pass "passive waits and overlap: $(cat "$work/check.out")"
  else
    fail "passive waits and overlap"; show "$work/passive.out"; cat "$work/check.out"
  fi
  # 2. The control: comm.wait active polls through the waits, and the same measure must see it.
  if timeout 100 bash "$cluster" mpirun -- "$dtrain" "${run[@]}" --comm-wait active --log-dir "$work/active" \
       >"$work/active.out" 2>&1 && /usr/bin/python3 "$check" "$work/active" active >"$work/check.out"; then
    pass "control, comm.wait active: $(cat "$work/check.out")"
  else
    fail "control, comm.wait active"; show "$work/active.out"; cat "$work/check.out"
  fi
  # 3. node2 with half node1's CPU: rank 1 is the straggler, named in the run log and on the console.
  bash "$cluster" cpu node2 0.25
  if timeout 100 bash "$cluster" mpirun -- "$dtrain" "${run[@]}" --log-dir "$work/slow" >"$work/slow.out" 2>&1 &&
     /usr/bin/python3 "$check" "$work/slow" slow 1 >"$work/check.out" &&
     grep -q "rank 1 (node2) made the others wait" "$work/slow.out"; then
    pass "node2 at half the CPU: $(cat "$work/check.out"); console: $(grep -o 'rank 1 (node2) made the others wait [0-9]*%' "$work/slow.out")"
  else
    fail "node2 at half the CPU is not named the straggler"; show "$work/slow.out"; cat "$work/check.out"
  fi
  check_logs "$work/slow"
  # 4. A study with the PyTorch DDP peer and the emulator's floor, as docs/benchmarks.md runs it, read by
  # dtrain-report: the reader of what the peer, the floor and the solo runs really write.
  local study="$work/study"
  # Every step of the study has its own limit (--timeout), inside this one, inside CTest's.
  if timeout 300 bash "$root/deploy/local/run_cluster_study.sh" --sizes 2 --reps 1 --rate 1gbit --cpu 0.5 \
       --calibrate --floor --peer ddp --platform q --timeout 90 --dtrain "$dtrain" --out "$study" -- --workload mnist \
       --data-dir "$data" --epochs 1 --max-steps 4 --eval-samples 64 --checkpoint=false --progress off \
       >"$work/study.out" 2>&1 &&
     "$root/report/dtrain-report" "$study" --out "$work/report" >"$work/report.out" 2>&1 &&
     /usr/bin/python3 - "$work/report" >"$work/check.out" <<'PY'
import csv, sys
out = sys.argv[1]
rows = lambda name: list(csv.DictReader(open(f"{out}/{name}.csv")))  # noqa: E731
peer, ranks, floor, model = rows("peer"), rows("ranks"), rows("floor"), rows("model")
problems = []
if not (len(peer) == 1 and peer[0]["peer"] == "pytorch-ddp" and float(peer[0]["speedup"]) > 0 and
        float(peer[0]["dtrain_step_s"]) > 0 and float(peer[0]["peer_step_s"]) > 0):
    problems.append(f"peer.csv: {peer}")
if sorted((r["runtime"], r["rank"], r["host"]) for r in ranks) != [
        ("dtrain", "0", "node1"), ("dtrain", "1", "node2"), ("pytorch-ddp", "0", "node1"), ("pytorch-ddp", "1", "node2")]:
    problems.append(f"ranks.csv: {ranks}")
if not (len(floor) == 1 and float(floor[0]["link_gbps"]) > 0.1 and float(floor[0]["host_stack_cpu_s_per_gb"]) > 0):
    problems.append(f"floor.csv: {floor}")
if sorted(r["runtime"] for r in model) != ["dtrain", "pytorch-ddp"] or any(float(r["contention"]) != 1.0 for r in model):
    problems.append(f"model.csv: {model}")
print("; ".join(problems) or
      f"dtrain / DDP {float(peer[0]['speedup']):.2f} at 2 nodes, floor {float(floor[0]['floor_node_cpu_s_per_gb']):.2f} "
      f"node CPU s per GB, model rows for both runtimes")
sys.exit(1 if problems else 0)
PY
  then
    pass "a study with the DDP peer and the emulator's floor, reported: $(cat "$work/check.out")"
  else
    fail "a study with the DDP peer and the emulator's floor"; show "$work/study.out" 40; cat "$work/report.out" "$work/check.out"
  fi
}

case "$suite" in
  quick) quick ;;
  faults) faults ;;
  comm) comm ;;
  *) echo "cluster_test: unknown suite '$suite' (expected quick, faults or comm)"; exit 2 ;;
esac
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all cluster checks passed"
