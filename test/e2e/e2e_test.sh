#!/usr/bin/env bash
# End-to-end tests of the dtrain binary under mpirun: output grammar, run log, config errors that are
# identical on every rank, resume across world sizes and of a finished run, and the failures dtrain must
# survive as users meet them: a frozen rank (named, with its host and phase), a diverging run (stopped,
# good checkpoints kept), a full disk (a clear error, no partial files), unusable paths and checkpoints,
# and a kill while a checkpoint is written behind training (resumed from memory and from disk alike).
# Every run pins --device cpu --backend mpi: on a GPU host `auto` would pick one GPU per rank.
# Usage: e2e_test.sh DTRAIN MPIEXEC [MPIEXEC_FLAGS]
# DTRAIN_TEST_PYTHON: the interpreter with torch that compares checkpoints (default Debian's); the other
# checks need only the standard library and jsonschema.
set -uo pipefail
dtrain=$1
mpiexec=$2
mpi_flags=${3:-}
torch_python=${DTRAIN_TEST_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
full=""
cleanup() {
  [ -n "$full" ] && umount "$full" 2>/dev/null
  rm -rf "$work"
  # The copies in memory of runs killed on purpose here: their checkpoint directories are gone now.
  "$dtrain" --remove-memory-copies >/dev/null 2>&1
}
trap cleanup EXIT
cd "$work"
. "$here/../../scripts/mpi_env.sh"
# shellcheck source=../support/checks.sh
. "$here/../support/checks.sh"
cpu=(--device cpu --backend mpi)
run_np() { local np=$1; shift; timeout 300 "$mpiexec" -np "$np" $mpi_flags "$dtrain" "${cpu[@]}" "$@"; }
# Fast settings: a few steps per epoch, progress lines every 2 steps, a tenth of the test set.
fast=(--workload mnist --synthetic --max-steps 4 --log-interval 2 --eval-samples 1000)
# The lines of FILE that dtrain printed as errors (not mpirun's own notices).
errors_in() { grep -c "dtrain: error:" "$1"; }

# 1. Two ranks, Katib format: grammar, run log with both ranks' resource samples, checkpoints.
if run_np 2 "${fast[@]}" --epochs 2 --sample-interval-s 0.2 --log-dir logs1 --checkpoint-dir ck1 >out1.txt 2>&1 &&
   /usr/bin/python3 "$here/check_run_output.py" out1.txt logs1 2 katib --require-samples; then
  pass "2-rank run prints parseable Katib lines and writes the run log with both ranks' samples"
else
  fail "2-rank Katib run"; cat out1.txt
fi
[ -f ck1/checkpoint-epoch-000002.safetensors ] && pass "checkpoint written per epoch" || fail "no checkpoint for epoch 2"

# 1a. Kubeflow Katib's File collector (fileFormat JSON) finds each epoch's accuracy and loss in the run
#     log, with the console's values and a timestamp.
katib_console=$(grep -o 'metricName: [a-z]*, metricValue: [0-9.]*' out1.txt | sed 's/metricName: //; s/, metricValue: / /')
if katib_file=$(/usr/bin/python3 "$here/katib_file_collector.py" logs1/*/events.jsonl accuracy loss) &&
   [ "$(echo "$katib_file" | cut -d' ' -f2- | sort)" = "$(echo "$katib_console" | sort)" ] &&
   [ "$(echo "$katib_file" | wc -l)" -eq 4 ]; then
  pass "Katib's File collector reads the run log: $(echo "$katib_file" | tr '\n' ';')"
else
  fail "Katib File collector on the run log: '$katib_file', console: '$katib_console'"
fi

# 1b. --profile-steps on rank 1: its trace and operations table reach rank 0's run directory.
if run_np 2 "${fast[@]}" --epochs 1 --profile-steps 2:3 --profile-rank 1 --log-dir logs-prof --checkpoint=false \
     >out-prof.txt 2>&1 &&
   /usr/bin/python3 - logs-prof/*/ <<'PY'
import csv, json, pathlib, sys
run = pathlib.Path(sys.argv[1])
record = [json.loads(l) for l in open(run / "events.jsonl") if '"event":"profile"' in l]
assert len(record) == 1 and record[0]["rank"] == 1 and (record[0]["first_step"], record[0]["last_step"]) == (2, 3), record
trace = json.load(open(run / "profile-rank1.trace.json"))
names = {e.get("name") for e in trace["traceEvents"]}
assert "aten::addmm" in names, sorted(names)[:20]
rows = {r["name"]: r for r in csv.DictReader(open(run / "profile-rank1-ops.csv"))}
# Two steps of the mnist net: 2 convolutions forward and backward per step, fc1 and fc2 by addmm.
assert int(rows["aten::addmm"]["calls"]) == 4, rows["aten::addmm"]
assert int(rows["aten::convolution_backward"]["calls"]) == 4, rows["aten::convolution_backward"]
for r in rows.values():
    assert 0 <= float(r["self_cpu_us"]) <= float(r["total_cpu_us"]) + 1e-3, r
PY
then
  pass "--profile-steps 2:3 --profile-rank 1 writes a trace and an operations table into rank 0's run directory"
else
  fail "profile of rank 1"; cat out-prof.txt
fi

# 2. PyTorch format on one rank, started without mpirun.
if timeout 300 "$dtrain" "${cpu[@]}" "${fast[@]}" --log-format pytorch --log-dir logs2 --checkpoint=false >out2.txt 2>&1 &&
   /usr/bin/python3 "$here/check_run_output.py" out2.txt logs2 1 pytorch; then
  pass "single process without mpirun, pytorch format"
else
  fail "pytorch-format run"; cat out2.txt
fi

# 2b. Threads per rank (--threads 0) from each source, named in the summary line: OMP_NUM_THREADS, the
#     affinity mask (taskset), and a cgroup CPU quota where this machine lets the test make a cgroup.
# The summary line of a one-step run started with "$@" before dtrain (captured whole: a reader that stops
# early would kill dtrain with SIGPIPE, which pipefail reports as a failure).
threads_line() {
  local out
  out=$("$@" "$dtrain" "${cpu[@]}" "${fast[@]}" --epochs 1 --max-steps 1 --checkpoint=false --log-dir logs-threads 2>&1)
  # The header (a warning about more threads than cores may come first).
  grep -m 1 "^dtrain [0-9]" <<<"$out"
}
omp=$(threads_line env OMP_NUM_THREADS=1)
slurm=$(threads_line env -u OMP_NUM_THREADS SLURM_CPUS_PER_TASK=3)
mask=$(threads_line env -u OMP_NUM_THREADS -u SLURM_CPUS_PER_TASK taskset -c 0)
if [[ "$omp" == *"threads per rank 1 (OMP_NUM_THREADS=1)"* && "$slurm" == *"threads per rank 3 (SLURM_CPUS_PER_TASK=3)"* &&
      "$mask" == *"threads per rank 1 (affinity mask of 1 core)"* ]]; then
  pass "threads per rank follow OMP_NUM_THREADS, SLURM_CPUS_PER_TASK and the affinity mask"
else
  fail "threads per rank: '$omp' / '$slurm' / '$mask'"
fi
cgroup=""
if [ -w /sys/fs/cgroup/cpu ] && mkdir "/sys/fs/cgroup/cpu/dtrain-e2e-$$" 2>/dev/null; then
  cgroup=/sys/fs/cgroup/cpu/dtrain-e2e-$$
  echo 100000 >"$cgroup/cpu.cfs_quota_us" 2>/dev/null || cgroup_error="cannot set cpu.cfs_quota_us"
elif [ -w /sys/fs/cgroup ] && grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null &&
     mkdir "/sys/fs/cgroup/dtrain-e2e-$$" 2>/dev/null; then
  cgroup=/sys/fs/cgroup/dtrain-e2e-$$
  echo "100000 100000" >"$cgroup/cpu.max" 2>/dev/null || cgroup_error="cannot set cpu.max"
fi
if [ -z "$cgroup" ]; then
  echo "SKIP: cgroup CPU quota: this machine does not let the test make a cgroup with a cpu controller"
elif [ -n "${cgroup_error:-}" ]; then
  echo "SKIP: cgroup CPU quota: $cgroup_error in $cgroup"
else
  line=$(threads_line env -u OMP_NUM_THREADS -u SLURM_CPUS_PER_TASK sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' \
           _ "$cgroup")
  if [[ "$line" == *"threads per rank 1 (cgroup CPU quota of 1 core)"* ]]; then
    pass "threads per rank follow a cgroup CPU quota"
  else
    fail "cgroup CPU quota: $line"
  fi
fi
if [ -n "$cgroup" ]; then sleep 1; rmdir "$cgroup" 2>/dev/null; fi

# 3. Resume the 2-rank run's checkpoints on one rank: continues at epoch 3.
if run_np 1 "${fast[@]}" --epochs 3 --resume --log-dir logs3 --checkpoint-dir ck1 >out3.txt 2>&1 &&
   grep -q "resumed at epoch 3 from ck1/checkpoint-epoch-000002.safetensors (world size 2 then, 1 now)" out3.txt &&
   [ "$(grep -c 'metricName: accuracy' out3.txt)" -eq 1 ] && [ -f ck1/checkpoint-epoch-000003.safetensors ]; then
  pass "a 2-rank checkpoint resumes on 1 rank"
else
  fail "resume from 2 ranks to 1"; cat out3.txt
fi

# 3b. Resuming a finished run (a restarted pod) reports that run's last Katib line and exits 0.
katib_of_epoch3=$(grep 'metricName: accuracy' out3.txt | sed 's/^[^ ]* //')
if run_np 2 "${fast[@]}" --epochs 3 --resume --log-dir logs3b --checkpoint-dir ck1 >out3b.txt 2>&1 &&
   grep -q "from its checkpoint, nothing left to train" out3b.txt &&
   [ "$(grep 'metricName: accuracy' out3b.txt | sed 's/^[^ ]* //')" = "$katib_of_epoch3" ] &&
   grep -q '"event":"finished_run"' logs3b/*/events.jsonl; then
  pass "resuming a finished run reports its final metrics ($katib_of_epoch3)"
else
  fail "resume of a finished run"; cat out3b.txt
fi

# 3c. Runs side by side in one log directory never touch each other's checkpoints: each keeps them in its
#     own run directory; a run's name is taken again only with --resume, and not while it runs; --resume
#     without a name continues the newest run; a shared --checkpoint-dir with a run's checkpoints in it
#     is not overwritten by a new run.
if run_np 2 "${fast[@]}" --epochs 1 --log-dir logs-pair >pair1.txt 2>&1 &&
   first_ck=$(ls logs-pair/*/checkpoints/checkpoint-epoch-000001.safetensors) && first_sum=$(sha256sum <"$first_ck") &&
   run_np 2 "${fast[@]}" --epochs 1 --seed 2 --log-dir logs-pair >pair2.txt 2>&1 &&
   [ "$(ls -d logs-pair/*/ | wc -l)" -eq 2 ] && [ "$(ls logs-pair/*/checkpoints/*.safetensors | wc -l)" -eq 2 ] &&
   [ "$(sha256sum <"$first_ck")" = "$first_sum" ]; then
  pass "a second run in the same log directory leaves the first run's checkpoint as it was"
else
  fail "two runs in one log directory: $(ls -R logs-pair | tr '\n' ' ')"; cat pair1.txt pair2.txt
fi
run_np 2 "${fast[@]}" --epochs 1 --log-dir logs-named --run-name job-1 >named1.txt 2>&1
run_np 2 "${fast[@]}" --epochs 1 --log-dir logs-named --run-name job-1 >named2.txt 2>&1
named2_rc=$?
if [ "$named2_rc" -eq 2 ] && [ "$(errors_in named2.txt)" -eq 1 ] &&
   grep -q "log.run_name 'job-1': a run of that name is already in 'logs-named'; continue it with --resume" named2.txt &&
   run_np 1 "${fast[@]}" --epochs 2 --log-dir logs-named --run-name job-1 --resume >named3.txt 2>&1 &&
   grep -q "resumed at epoch 2 from logs-named/job-1/checkpoints/checkpoint-epoch-000001.safetensors" named3.txt &&
   [ "$(grep -c '"event":"run_start"' logs-named/job-1/events.jsonl)" -eq 2 ] &&
   run_np 1 "${fast[@]}" --epochs 3 --log-dir logs-named --resume >named4.txt 2>&1 &&
   grep -q "resuming run 'job-1', the run of mnist in 'logs-named' with the newest checkpoint" named4.txt &&
   grep -q "resumed at epoch 3 from logs-named/job-1/checkpoints/checkpoint-epoch-000002.safetensors" named4.txt; then
  pass "a named run continues only with --resume, in its own directory; --resume alone finds the newest run"
else
  fail "named runs (second start exit $named2_rc)"; cat named2.txt named3.txt named4.txt
fi
# A run in progress holds its directory: a second start of it is refused at once, naming the holder.
run_np 2 --workload mnist --synthetic --max-steps 2000 --log-interval 0 --eval-samples 500 --log-dir logs-named \
  --run-name busy >busy1.txt 2>&1 &
busy=$!
for _ in $(seq 1 300); do [ -f logs-named/busy/events.jsonl ] && break; sleep 0.1; done
run_np 2 "${fast[@]}" --epochs 1 --log-dir logs-named --run-name busy --resume >busy2.txt 2>&1
busy2_rc=$?
kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null
run_np 2 "${fast[@]}" --epochs 1 --log-dir logs-ck --checkpoint-dir ck1 >shared.txt 2>&1
shared_rc=$?
if [ "$busy2_rc" -eq 2 ] &&
   grep -q "run 'busy' in 'logs-named' is in use by another dtrain (pid [0-9]* on .* since 20.*); wait for it to end" busy2.txt &&
   [ "$shared_rc" -eq 2 ] &&
   grep -q "checkpoint.dir 'ck1' holds checkpoints of an earlier run (ck1/checkpoint-epoch-000003.safetensors), which this run would overwrite" shared.txt; then
  pass "a run in progress and a directory of earlier checkpoints are refused with what to do instead"
else
  fail "busy run (exit $busy2_rc) or shared checkpoint.dir (exit $shared_rc)"; cat busy2.txt shared.txt
fi

# 3d. A log directory whose name is not UTF-8 (a Latin-1 byte): every line of the run log is still valid
#     UTF-8 JSON, the byte replaced by U+FFFD.
latin1=$'logs-caf\xe9'
if run_np 2 "${fast[@]}" --epochs 1 --log-dir "$latin1" --checkpoint=false >latin1.txt 2>&1 &&
   /usr/bin/python3 - "$latin1" <<'PY'
import glob, json, os, sys
[path] = glob.glob(os.path.join(os.fsencode(sys.argv[1]), b"*", b"events.jsonl"))
records = [json.loads(line) for line in open(path, "rb").read().decode("utf-8").splitlines()]  # strict UTF-8
assert [r["event"] for r in records if r["event"] not in ("sample", "train_progress")] == ["run_start", "epoch_end", "run_end"], records
assert "logs-caf\ufffd" in records[0]["config"], records[0]["config"]
PY
then
  pass "a run log under a non-UTF-8 path is valid UTF-8 JSON"
else
  fail "run log under a non-UTF-8 path"; cat latin1.txt
fi

# 3e. Progress under mpirun with the output captured: a plain line with the rate and time left at most
#     every --progress-interval-s on stderr, for training and evaluation, with the whole run's time left
#     once a step was timed; stdout holds exactly the lines it
#     held before (Katib's grammar); no progress line looks like a Katib name=value or bash time's line.
#     Under a terminal (script(1) gives mpirun one), the same run draws a bar in place instead.
# 30 steps give 10-15 training lines at that interval (120 gave 50 and took 47 s of the suite per run).
progress=(--workload mnist --synthetic --max-steps 30 --log-interval 10 --eval-samples 6000 --eval-batch-size 500
          --checkpoint=false --progress-interval-s 0.3)
line_re='^progress: (epoch|evaluation) 1/1 [0-9]+% \([0-9]+/[0-9]+ samples\) \| [0-9]+ samples/s \| [0-9]+:[0-9]{2} left( \| run [0-9:]+ left)?$'
if run_np 2 "${progress[@]}" --log-dir logs-progress >progress.out 2>progress.err &&
   [ "$(grep -cE "$line_re" progress.err)" -ge 3 ] && grep -qE '^progress: evaluation ' progress.err &&
   grep -qE '^progress: epoch .* \| run [0-9]+:[0-9]{2} left$' progress.err &&
   [ "$(grep -c '^progress:' progress.err)" -eq "$(grep -cE "$line_re" progress.err)" ] &&
   ! grep '^progress:' progress.err | grep -qE '=|real' && ! grep -q '^progress:' progress.out &&
   /usr/bin/python3 "$here/check_run_output.py" progress.out logs-progress 1 katib >/dev/null; then
  pass "progress lines with rate and time left under mpirun: $(grep -m1 '^progress: epoch' progress.err)"
else
  fail "progress lines under mpirun"; cat progress.err progress.out
fi
if command -v script >/dev/null; then
  printf -v mpirun_line '%q ' timeout 300 "$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}" "${progress[@]}" \
    --log-dir logs-bar
  if script -qfec "$mpirun_line" typescript.txt >/dev/null 2>&1 && grep -q $'\repoch 1/1 \[#*\.*\] ' typescript.txt &&
     grep -q ' samples/s | [0-9]*:[0-9][0-9] left' typescript.txt && ! grep -q '^progress:' typescript.txt; then
    pass "under mpirun on a terminal the progress is a bar redrawn in place"
  else
    fail "progress bar under mpirun on a terminal"; cat -v typescript.txt | tail -20
  fi
else
  echo "SKIP: progress bar on a terminal: script(1) is not installed (util-linux)"
fi

# 4. Bad input: one identical message, the exit status of its kind, no hang, at 2 ranks. (Many more
#    cases, mostly on one process: bad_inputs.py.)
expect_error() {  # expect_error STATUS "MESSAGE" ARGS...
  local status=$1 message=$2; shift 2
  run_np 2 "$@" >err.out 2>err.txt
  local rc=$?
  if [ "$rc" -eq "$status" ] && [ "$(errors_in err.txt)" -eq 1 ] && grep -qF -- "$message" err.txt &&
     ! grep -q "MPI_ABORT" err.txt && ! grep -q "Train Epoch" err.out; then
    pass "error: $message"
  else
    fail "expected exit $status and one '$message' before training, got exit $rc:"; cat err.txt err.out
  fi
}
expect_error 2 "--batch-size (train.batch_size) must be an integer in [1, 1073741824], got '-4'" --batch-size -4
expect_error 2 "unknown workload 'mnsit'; available: alexnet, biggan, cifar10, gcn, image-classifier, mnist, resnet18, resnet50" --workload mnsit
expect_error 2 "bogus" --bogus 1
expect_error 2 "log.profile_rank is 2, but the run has ranks 0 to 1" "${fast[@]}" --profile-steps 1:2 --profile-rank 2
expect_error 2 "--profile-steps (log.profile_steps) must be FIRST:LAST with 1 <= FIRST <= LAST" --profile-steps 5:3
expect_error 2 "train.precision (from --precision) 'fp16' needs comm.device 'cuda'" --precision fp16
printf 'train:\n  bach_size: 3\n' >bad.yaml
expect_error 2 "bad.yaml: unknown key 'train.bach_size'" --config bad.yaml
expect_error 3 "MNIST-format train files not found in data.dir '$work/nodata'" --data-dir "$work/nodata"
mkdir -p broken && printf 'not idx' | gzip >broken/train-images-idx3-ubyte.gz && printf 'x' >broken/train-labels-idx1-ubyte
expect_error 3 "is not an IDX file" --data-dir "$work/broken"
# Paths are checked before any data is loaded or any step is trained.
touch a-file
expect_error 2 "checkpoint.dir (from --checkpoint-dir) 'a-file' exists but is not a directory" "${fast[@]}" \
  --checkpoint-dir a-file --resume
expect_error 2 "cannot create log.dir (from --log-dir) 'a-file/logs'" "${fast[@]}" --log-dir a-file/logs
# A checkpoint the ranks all read (rank 0 broadcasts it) fails them all at once: printed once, no abort.
mkdir -p ck-corrupt && echo "not a checkpoint" >ck-corrupt/checkpoint-epoch-000004.safetensors
expect_error 3 "every checkpoint in checkpoint.dir 'ck-corrupt' is damaged" "${fast[@]}" --checkpoint-dir ck-corrupt --resume \
  --log-dir logs-corrupt
grep -q '"event":"error".*every checkpoint in checkpoint.dir' logs-corrupt/*/events.jsonl &&
  pass "the agreed error is recorded in the run log" || fail "no error record in logs-corrupt"
# The newest checkpoint damaged (one bit flipped in a tensor) beside a whole one: both ranks pass over it,
# named in a warning, and continue from the older one.
if run_np 2 "${fast[@]}" --epochs 2 --checkpoint-dir ck-flip --log-dir logs-flip >flip1.out 2>&1 &&
   /usr/bin/python3 -c "
import sys
path = sys.argv[1]
data = bytearray(open(path, 'rb').read())
data[len(data) // 2] ^= 0x10
open(path, 'wb').write(data)" ck-flip/checkpoint-epoch-000002.safetensors &&
   run_np 2 "${fast[@]}" --epochs 3 --checkpoint-dir ck-flip --log-dir logs-flip --resume >flip2.out 2>&1 &&
   grep -q "dtrain: warning: passed over a damaged checkpoint, ck-flip/checkpoint-epoch-000002.safetensors: tensor '.*' fails its CRC-32 check" flip2.out &&
   grep -q "resumed at epoch 2 from ck-flip/checkpoint-epoch-000001.safetensors" flip2.out &&
   grep -q '"event":"warning".*passed over a damaged checkpoint' logs-flip/*/events.jsonl; then
  pass "a bit flipped in the newest checkpoint: named, passed over, resumed from the one before"
else
  fail "resume past a damaged checkpoint"; cat flip2.out
fi
version=$("$dtrain" --version)
if grep -q "backends: mpi, nccl" <<<"$version"; then
  expect_error 2 "comm.backend 'nccl' needs comm.device 'cuda', but the device is 'cpu'" --backend nccl
elif grep -q "CPU only" <<<"$version"; then
  # NCCL may be compiled in, but with a CPU-only LibTorch it is not offered.
  expect_error 2 "comm.backend 'nccl' needs a CUDA LibTorch, but this dtrain was built with a CPU-only LibTorch" --backend nccl
else
  expect_error 2 "comm.backend 'nccl' is not built into this dtrain; available backends: mpi" --backend nccl
fi
if grep -q "devices: cpu)" <<<"$version"; then
  expect_error 2 "comm.device 'cuda' requested" --device cuda
fi

# 4b. Processes started as torchrun starts them (RANK, WORLD_SIZE, MASTER_*; no MPI launcher) but told to
#     bootstrap through MPI stop with one clear error each instead of training alone (torchrun_test.sh has
#     them bootstrapping from the environment); under mpirun those variables are ignored, with a warning.
torch_env=(env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 LOCAL_RANK=0)
"${torch_env[@]}" timeout 120 "$dtrain" --bootstrap mpi "${cpu[@]}" "${fast[@]}" --log-dir logs-tr0 >tr0.out 2>tr0.err &
tr0=$!
env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 LOCAL_RANK=1 timeout 120 "$dtrain" --bootstrap mpi "${cpu[@]}" \
  "${fast[@]}" --log-dir logs-tr1 >tr1.out 2>tr1.err
tr1_rc=$?
wait "$tr0"
tr0_rc=$?
if [ "$tr0_rc" -eq 2 ] && [ "$tr1_rc" -eq 2 ] && grep -q "a job of 2 processes (RANK=0 WORLD_SIZE=2" tr0.err &&
   grep -q "it would train alone" tr1.err && ! grep -q "Train Epoch\|metricName" tr0.out tr1.out; then
  pass "torchrun-style processes without an MPI launcher stop (exit 2) instead of training alone"
else
  fail "torchrun-style start: exits $tr0_rc/$tr1_rc"; cat tr0.err tr1.err
fi
if WORLD_SIZE=7 RANK=0 run_np 2 "${fast[@]}" --epochs 1 --log-dir logs-both --checkpoint=false >both.out 2>&1 &&
   grep -q "the MPI launcher (OMPI_COMM_WORLD_SIZE) decides, world size 2" both.out &&
   grep -q '"event":"warning".*torchrun' logs-both/*/events.jsonl; then
  pass "under mpirun, torchrun's variables are ignored with a warning"
else
  fail "mpirun with torchrun's variables"; cat both.out
fi

# 4b'. Ranks started with different configurations (or dtrain builds) stop before training, naming the
#      first difference, instead of training different models into the same collectives.
timeout 300 "$mpiexec" $mpi_flags -np 1 "$dtrain" "${cpu[@]}" "${fast[@]}" --batch-size 32 --log-dir logs-mix : \
  -np 1 "$dtrain" "${cpu[@]}" "${fast[@]}" --batch-size 64 --log-dir logs-mix >mix.out 2>&1
rc=$?
if [ "$rc" -eq 2 ] && [ "$(errors_in mix.out)" -eq 1 ] &&
   grep -q "\[rank 1/2\] this rank's dtrain or configuration differs from rank 0's: 'train.batch_size: 64' here, 'train.batch_size: 32' on rank 0" mix.out &&
   ! grep -q "Train Epoch" mix.out; then
  pass "ranks with different configurations stop (exit 2) naming the first difference"
else
  fail "mixed configurations: exit $rc"; cat mix.out
fi
# Node-local paths (/scratch/$HOSTNAME/...) may differ: only rank 0 writes the run log and checkpoints,
# and a resume reads them there.
node_local() {
  timeout 300 "$mpiexec" $mpi_flags -np 1 "$dtrain" "${cpu[@]}" "${fast[@]}" --log-dir node-a/logs --checkpoint-dir node-a/ck "$@" : \
    -np 1 "$dtrain" "${cpu[@]}" "${fast[@]}" --log-dir node-b/logs --checkpoint-dir node-b/ck "$@"
}
if node_local --epochs 1 >nodelocal.out 2>&1 && node_local --epochs 2 --resume >nodelocal2.out 2>&1 &&
   [ "$(cat node-a/logs/*/events.jsonl | grep -c '"event":"epoch_end"')" -eq 2 ] &&
   [ -f node-a/ck/checkpoint-epoch-000002.safetensors ] && [ ! -e node-b ] &&
   grep -q "resumed at epoch 2 from node-a/ck/checkpoint-epoch-000001.safetensors" nodelocal2.out; then
  pass "ranks with different log and checkpoint directories train and resume; rank 0's hold everything"
else
  fail "node-local directories"; cat nodelocal.out nodelocal2.out
fi

# 4c. --backend gloo (MPI bootstraps, Gloo carries the gradients) trains as --backend mpi does.
if grep -q "gloo" <<<"$("$dtrain" --version)"; then
  if timeout 300 "$mpiexec" -np 2 $mpi_flags "$dtrain" --device cpu --backend gloo "${fast[@]}" --epochs 1 --log-dir logs-gloo \
       --checkpoint=false >gloo.out 2>&1 &&
     run_np 2 "${fast[@]}" --epochs 1 --log-dir logs-mpi --checkpoint=false >mpi.out 2>&1 &&
     grep -q "backend gloo" gloo.out &&
     /usr/bin/python3 - logs-gloo logs-mpi <<'PY'
import glob, json, sys
def final(d):
    return [json.loads(l) for l in open(glob.glob(d + "/*/events.jsonl")[0]) if '"event":"run_end"' in l][0]
g, m = final(sys.argv[1]), final(sys.argv[2])
assert abs(g["final_test_loss"] - m["final_test_loss"]) <= 1e-5 * abs(m["final_test_loss"]) + 1e-7, (g, m)
PY
  then
    pass "--backend gloo trains 2 ranks to the mpi backend's test loss"
  else
    fail "--backend gloo"; cat gloo.out
  fi
  expect_error 2 "comm.compress (from --compress) 'bf16' needs comm.backend 'mpi' or 'nccl'" --backend gloo --compress bf16
fi

# An address-space limit (ulimit -v) under which OpenBLAS would spin for ever: refused at once, by dtrain
# and before it by the launcher script.
started=$SECONDS
small_vm=$(ulimit -v 1048576 && "$dtrain" --version 2>&1; echo "exit $?")
launcher_vm=$(ulimit -v 1048576 && bash "$here/../../scripts/mpirun_local.sh" -np 1 "$dtrain" --version 2>&1; echo "exit $?")
if [[ "$small_vm" == *"dtrain: error: the address-space limit (ulimit -v) is 1048576 KiB (1.00 GiB), below the 2.00 GiB dtrain needs"*"exit 2" ]] &&
   [[ "$launcher_vm" == "mpirun_local: the address-space limit (ulimit -v) is 1048576 KiB; dtrain needs at least"*"exit 2" ]] &&
   [ $((SECONDS - started)) -lt 10 ]; then
  pass "an address-space limit of 1 GiB is refused at once (exit 2), by dtrain and by its launcher script"
else
  fail "small address space: '$small_vm' / '$launcher_vm'"
fi

# 5. --print-config emits YAML that --config accepts unchanged.
if "$dtrain" --batch-size 32 --optimizer sgd --print-config >cfg.yaml && "$dtrain" --config cfg.yaml --print-config >cfg2.yaml &&
   cmp -s cfg.yaml cfg2.yaml && grep -q "batch_size: 32" cfg.yaml; then
  pass "--print-config round-trips through --config"
else
  fail "--print-config round trip"
fi
"$dtrain" --list-workloads | grep -q "^mnist" && pass "--list-workloads" || fail "--list-workloads"

# 6. A frozen rank: SIGSTOP rank 1 mid-training. A warning names it within seconds, and the collective
#    timeout fails the job with a message that names it, its host and what it last reported.
run_np 2 --workload mnist --synthetic --log-interval 1 --comm-timeout-s 10 --log-dir logs6 --checkpoint=false \
  >stuck.out 2>stuck.err &
job=$!
# A few steps in, and a second for rank 1's heartbeat (every comm.timeout_s / 30) to report them, so that
# its last report is training whatever the machine's speed.
for _ in $(seq 1 120); do [ "$(grep -c "Train Epoch" stuck.out 2>/dev/null)" -ge 3 ] && break; sleep 0.5; done
sleep 1
rank1=$(pgrep -f -- "--comm-timeout-s 10" | while read -r pid; do
  [ "$(tr '\0' '\n' </proc/"$pid"/environ 2>/dev/null | grep -x 'OMPI_COMM_WORLD_RANK=1')" ] && echo "$pid"; done | head -1)
if [ -n "$rank1" ]; then
  host=$(hostname)
  kill -STOP "$rank1"
  start=$SECONDS
  wait "$job"; rc=$?
  elapsed=$((SECONDS - start))
  kill -KILL "$rank1" 2>/dev/null
  named="rank 1/2 (host "
  if [ "$rc" -eq 6 ] && [ "$elapsed" -lt 120 ] && grep -q "did not complete within 10 s" stuck.err &&
     grep "dtrain: error:" stuck.err | grep -qF "$named" &&
     grep "dtrain: error:" stuck.err | grep -q "has sent no heartbeat for .* s (stopped, dead or cut off from the network); it last reported training, epoch 1, step [0-9]" &&
     grep "dtrain: warning:" stuck.err | grep -qF "$named" &&
     grep -q '"event":"error".*"rank":0.*"phase":"training"' logs6/*/events.jsonl; then
    pass "a frozen rank is named with its host and phase, and fails the job after the timeout (${elapsed} s, exit 6)"
  else
    fail "stuck rank: exit $rc after ${elapsed} s"; cat stuck.err; cat logs6/*/events.jsonl
  fi
else
  fail "could not find rank 1 of the stuck-rank job"; kill "$job" 2>/dev/null
fi

# 7. bf16 gradient compression trains normally at 2 ranks, with buckets sized by the start-up probe: its
#    figures in run_start and on the console, the caps within their bounds. (bf16 autocast is covered by
#    the unit tests: on CPUs without native bf16 its convolutions are ~15x slower, too slow for mnist here.)
if run_np 2 "${fast[@]}" --epochs 2 --compress bf16 --bucket-sizing network --log-dir logs7 --checkpoint=false \
     >out7.txt 2>&1 &&
   /usr/bin/python3 "$here/check_run_output.py" out7.txt logs7 2 katib &&
   grep -q 'compress: bf16' logs7/*/config.yaml &&
   grep -q '^buckets from the network: allreduce latency [0-9.]* ms, [0-9.]* MB/s, .*; model: 4.8 MB in [0-9]* buckets\{0,1\} of up to ' out7.txt &&
   /usr/bin/python3 - logs7 "$here/../../report" <<'PY'
import glob, json, sys
start = next(json.loads(l) for l in open(glob.glob(sys.argv[1] + "/*/events.jsonl")[0]) if '"event":"run_start"' in l)
p = start["bucket_probe"]
assert p["large_s"] > 0 and p["small_s"] > 0 and p["bytes_per_s"] > 0 and 0 < p["probe_s"] < 30, p
assert p["compute_cores"] > 0 and p["per_bucket_s"] >= p["latency_s"], p
(layout,) = start["gradient_buckets"]
assert layout["module"] == "model" and sum(layout["bucket_bytes"]) == 4 * start["parameters"], (layout, start["parameters"])
# dtrain-report's scaling model sends this run's own buckets.
sys.path.insert(0, sys.argv[2])
from dtrain_report.runs import discover
from dtrain_report.tables import run_config
comm = run_config(discover(sys.argv[1])[0])["comm"]
assert comm["bucket_layout"] == layout["bucket_bytes"], comm
PY
then
  pass "bf16 gradient compression, buckets sized by the network probe"
else
  fail "bf16 compression run with --bucket-sizing network"; cat out7.txt
fi

# 8. A diverging run (--lr 1e30 after two good epochs): every rank stops at the same step with exit 4,
#    one message, an error record, and the good checkpoints are all still there.
run_np 2 "${fast[@]}" --epochs 2 --log-dir logs8a --checkpoint-dir ck8 --checkpoint-keep 2 >out8a.txt 2>&1
run_np 2 "${fast[@]}" --epochs 4 --lr 1e30 --resume --log-dir logs8 --checkpoint-dir ck8 --checkpoint-keep 2 \
  >out8.txt 2>err8.txt
rc=$?
if [ "$rc" -eq 4 ] && [ "$(errors_in err8.txt)" -eq 1 ] && ! grep -q "MPI_ABORT" err8.txt &&
   grep -q "epoch 3, step [0-9]*: the loss or the averaged gradients are NaN or infinite" err8.txt &&
   ! grep -q "metricValue: -\?nan" out8.txt && [ "$(ls ck8 | grep -vx run_id)" = "$(printf 'checkpoint-epoch-000001.safetensors\ncheckpoint-epoch-000002.safetensors')" ] &&
   [ "$(tail -n 1 logs8/*/events.jsonl | grep -c '"event":"error"')" -eq 1 ]; then
  pass "a NaN loss stops every rank at one step (exit 4) and keeps the good checkpoints"
else
  fail "NaN run: exit $rc, checkpoints: $(ls ck8 | tr '\n' ' ')"; cat err8.txt out8.txt
fi

# 9. A full disk: the run log's directory on a full 64 KiB tmpfs, then checkpoints (about 14 MB each)
#    on an empty one. Each is one clear error naming the file and ENOSPC, exit 5, and no partial file; the
#    checkpoint's copy in memory, then the only whole one, is kept and said so once.
full="$work/full"
mkdir -p "$full"
if mount -t tmpfs -o size=64k tmpfs "$full" 2>mount.err; then
  mkdir -p "$full/logs"
  head -c 100000 /dev/zero >"$full/filler" 2>/dev/null  # stops at ENOSPC: the disk is full
  run_np 2 "${fast[@]}" --epochs 1 --log-dir "$full/logs" --checkpoint=false >out9a.txt 2>err9a.txt
  rc_log=$?
  leftover_log=$(find "$full/logs" -name '*.tmp')
  rm -rf "$full/filler" "$full/logs"
  run_np 2 "${fast[@]}" --epochs 1 --log-dir logs9 --checkpoint-dir "$full/ck" >out9b.txt 2>err9b.txt
  rc_ck=$?
  if [ "$rc_log" -eq 5 ] && grep -q "cannot write '$full/logs/.*': No space left on device" err9a.txt &&
     [ -z "$leftover_log" ] && ! grep -q "Train Epoch" out9a.txt &&
     [ "$rc_ck" -eq 5 ] && grep -q "cannot write '$full/ck/checkpoint-epoch-000001.safetensors': No space left on device" err9b.txt &&
     [ -z "$(ls -A "$full/ck" | grep -vxe '.dtrain.lock' -e run_id)" ] &&
     [ "$(grep -c "is only in this node's memory" err9b.txt)" -eq 1 ] &&
     grep -q '"event":"error".*No space left on device' logs9/*/events.jsonl; then
    pass "a full disk is one clear error (exit 5) before training, or at the checkpoint, with no partial file"
  else
    fail "full disk: run log exit $rc_log (left: $leftover_log), checkpoint exit $rc_ck, left: $(ls -A "$full/ck" 2>/dev/null)"
    cat err9a.txt out9a.txt err9b.txt
  fi
  umount "$full"
  full=""
else
  echo "SKIP: full-disk test: cannot mount a tmpfs here ($(cat mount.err)); it needs root or CAP_SYS_ADMIN"
  full=""
fi

# 10. A kill while a checkpoint is being written behind training (ResNet-18: 90 MB, written for about half
#     a second while the next epoch trains). Rank 0 wrote the checkpoint's copy in memory first
#     (checkpoint.memory_dir, /dev/shm), so a restart on the node resumes from it, one epoch later than
#     the disk's newest whole file; a restart that finds only the disk (its directory copied elsewhere)
#     resumes from that file. Both end exactly as the uninterrupted run: 1 rank bitwise, 2 ranks within
#     float tolerance. The copy in memory is gone once the run is done.
resnet=(--workload resnet18 --synthetic --image-size 32 --batch-size 8 --max-steps 3 --epochs 3 --eval-samples 16
        --log-interval 0 --checkpoint-keep 0)
# kill_mid_write DIR LAUNCH...: runs LAUNCH and kills rank 0's dtrain -9 the moment the checkpoint of epoch 2
# exists in DIR only as its temporary (checkpoint-epoch-000002.safetensors.<random>.tmp).
kill_mid_write() {
  /usr/bin/python3 - "$@" <<'PY'
import glob, os, signal, subprocess, sys, time
ck, launch = sys.argv[1], sys.argv[2:]
run = subprocess.Popen(launch, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
tmp = os.path.join(ck, "checkpoint-epoch-000002.safetensors.*.tmp")
def rank0():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd[0].endswith(b"/dtrain") and ck.encode() in b" ".join(cmd) and b"OMPI_COMM_WORLD_RANK=1" not in env:
            return int(pid)
deadline = time.time() + 240
while run.poll() is None and time.time() < deadline:
    if glob.glob(tmp):
        os.kill(rank0(), signal.SIGKILL)
        run.wait()
        print("killed while", tmp, "was being written; whole:", sorted(f for f in os.listdir(ck) if f.endswith(".safetensors")))
        sys.exit(0)
    time.sleep(0.002)
print("the run ended (exit", run.poll(), ") before the watcher saw", tmp)
sys.exit(1)
PY
}
# same_model A B TOLERANCE: the models of two checkpoints are equal, bitwise for tolerance 0, and hold at
# least ResNet-18's 100 tensors (test/support/same_model.py).
same_model() { "$torch_python" "$here/../support/same_model.py" --tolerance "$3" --min-tensors 100 "$1" "$2"; }
for np in 1 2; do
  if [ "$np" -eq 1 ]; then launch=("$dtrain" "${cpu[@]}"); tol=0; else launch=("$mpiexec" -np 2 $mpi_flags "$dtrain" "${cpu[@]}"); tol=1e-5; fi
  d=ck10-$np
  timeout 300 "${launch[@]}" "${resnet[@]}" --log-dir logs10 --checkpoint-dir "$d-whole" >out10w-$np.txt 2>&1
  rc_whole=$?
  kill_mid_write "$d" "${launch[@]}" "${resnet[@]}" --log-dir logs10 --checkpoint-dir "$d" >out10k-$np.txt 2>&1
  rc_kill=$?
  cp -r "$d" "$d-disk"
  timeout 300 "${launch[@]}" "${resnet[@]}" --log-dir logs10 --checkpoint-dir "$d" --resume >out10m-$np.txt 2>&1
  rc_memory=$?
  memory_copy=$(sed -n 's/^resumed at epoch 3 from \(.*\)\/checkpoint-epoch-000002.safetensors, the copy in memory .*/\1/p' out10m-$np.txt)
  timeout 300 "${launch[@]}" "${resnet[@]}" --log-dir logs10 --checkpoint-dir "$d-disk" --resume >out10d-$np.txt 2>&1
  rc_disk=$?
  if [ "$rc_whole" -eq 0 ] && [ "$rc_kill" -eq 0 ] && grep -q "whole: \['checkpoint-epoch-000001.safetensors'\]" out10k-$np.txt &&
     [ "$rc_memory" -eq 0 ] && [ -n "$memory_copy" ] && [ ! -e "$memory_copy" ] &&
     same_model "$d-whole/checkpoint-epoch-000003.safetensors" "$d/checkpoint-epoch-000003.safetensors" "$tol" >same10m.txt 2>&1 &&
     [ "$rc_disk" -eq 0 ] && grep -q "resumed at epoch 2 from .*$d-disk/checkpoint-epoch-000001.safetensors (world" out10d-$np.txt &&
     same_model "$d-whole/checkpoint-epoch-000003.safetensors" "$d-disk/checkpoint-epoch-000003.safetensors" "$tol" >same10d.txt 2>&1; then
    pass "$np rank(s) killed during a background checkpoint write: the resume from the copy in memory (epoch 3: $(cat same10m.txt)) and the one from disk (epoch 2: $(cat same10d.txt)) end as the uninterrupted run"
  else
    fail "$np rank(s) killed during a background write: uninterrupted exit $rc_whole, watcher $rc_kill, memory resume exit $rc_memory ('$memory_copy'), disk resume exit $rc_disk"
    cat out10k-$np.txt out10m-$np.txt out10d-$np.txt same10m.txt same10d.txt 2>/dev/null | grep -v '^\s*$' | tail -40
  fi
done

# Every run log the runs above wrote (errors, warnings, resumes, a finished run, profiles, non-UTF-8 paths)
# matches the run log's schema.
if /usr/bin/python3 "$here/../support/check_run_logs.py" --min-logs 20 \
     --expect run_start,epoch_end,run_end,sample,profile,resume,finished_run,warning,error "$work" >schema.txt; then
  pass "$(tail -n 1 schema.txt)"
else
  fail "run logs that do not match runtime/log/run_log.schema.json"; cat schema.txt
fi

echo "e2e: $failures failure(s)"
[ "$failures" -eq 0 ]
