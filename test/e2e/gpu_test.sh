#!/usr/bin/env bash
# End-to-end runs on a GPU, each run log checked: what only a GPU host can show.
#   telemetry   a 1-GPU run's sample events carry NVML's keys, run_start names the accelerator and its
#               data-sheet peak, the epoch's MFU is a fraction, --profile-steps times operators on the GPU
#   precision   bf16 and fp16 (dynamic loss scale) train on the GPU and the loss falls
#   workloads   every workload beyond mnist takes bf16 steps on the GPU
#   torchrun    NCCL through the c10d store: torchrun --standalone --nproc_per_node 1 trains; two workers
#               on the host's one GPU are refused with dtrain's error, not a hang
# Skips (exit 77, CTest's skip, saying so) where this dtrain sees no GPU.
# Usage: gpu_test.sh DTRAIN [PYTHON]   (PYTHON: an interpreter with torch, for torchrun; default python3)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dtrain=$(realpath "$1")
python=${2:-python3}
if ! "$dtrain" --version 2>/dev/null | grep -q 'devices: cpu, cuda'; then
  echo "SKIP: no CUDA device visible to this dtrain ($("$dtrain" --version 2>&1 | head -n 1))"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# shellcheck source=../support/checks.sh
. "$here/../support/checks.sh"
gpu=(--device cuda --backend nccl --progress off --checkpoint=false)

# --- telemetry, MFU and the profiler on real hardware --------------------------------------------------
if timeout 300 "$dtrain" --workload mnist --synthetic "${gpu[@]}" --epochs 1 --max-steps 400 --eval-samples 2000 \
     --sample-interval-s 0.1 --profile-steps 20:22 --log-dir logs-tel >tel.out 2>&1 &&
   /usr/bin/python3 - logs-tel <<'PY'
import csv, glob, json, math, pathlib, sys
run = pathlib.Path(sorted(glob.glob(sys.argv[1] + "/*/events.jsonl"))[-1]).parent
records = [json.loads(line) for line in open(run / "events.jsonl")]
kind = lambda name: [r for r in records if r["event"] == name]
start, epoch = kind("run_start")[0], kind("epoch_end")[-1]
problems = []
if not start["accelerator"] or start["peak_tflops"] <= 0:
    problems.append(f"run_start names no accelerator or peak: {start['accelerator']!r}, {start['peak_tflops']}")
samples = kind("sample")
keys = ["gpu_util_percent", "gpu_mem_used_bytes", "gpu_mem_bw_util_percent", "gpu_power_w", "gpu_sm_clock_mhz"]
if len(samples) < 3:
    problems.append(f"{len(samples)} sample events (expected several at 0.1 s)")
for key in keys:
    if not all(key in s for s in samples):
        problems.append(f"sample events without {key}")
if samples and max(s.get("gpu_mem_used_bytes", 0) for s in samples) < 100 << 20:
    problems.append("no sample shows 100 MiB of GPU memory in use")
if samples and max(s.get("gpu_util_percent", 0) for s in samples) <= 0:
    problems.append("the GPU never showed any utilisation")
if samples and not all(50 <= s.get("gpu_power_w", 0) <= 1500 and s.get("gpu_sm_clock_mhz", 0) > 100 for s in samples):
    problems.append("implausible power or clock: " + str([(s.get("gpu_power_w"), s.get("gpu_sm_clock_mhz")) for s in samples][:3]))
mfu = epoch.get("mfu")
if mfu is None or not 0 < mfu < 1 or epoch["tflops_achieved"] <= 0:
    problems.append(f"epoch MFU {mfu}, {epoch['tflops_achieved']} TFLOP/s")
profile = kind("profile")
if not profile or not profile[0]["cuda"]:
    problems.append(f"profile record without CUDA: {profile}")
else:
    rows = list(csv.DictReader(open(run / pathlib.Path(profile[0]["table"]).name)))
    timed = [r for r in rows if float(r["self_cuda_us"] or 0) > 0]
    if not any(r["name"].startswith("aten::") for r in timed):
        problems.append(f"no aten:: operator with CUDA time among {len(rows)} rows")
if problems:
    print("\n".join(problems))
    sys.exit(1)
s = samples[len(samples) // 2]
print(f"{start['accelerator']}: peak {start['peak_tflops']} TFLOP/s, {epoch['samples_per_s']:.0f} samples/s, "
      f"{epoch['tflops_achieved']:.2f} TFLOP/s, MFU {mfu:.4f}; a sample: util {s['gpu_util_percent']}%, "
      f"{s['gpu_mem_used_bytes'] >> 20} MiB, mem bw {s['gpu_mem_bw_util_percent']}%, {s['gpu_power_w']} W, "
      f"{s['gpu_sm_clock_mhz']} MHz; CUDA-timed operators: {len(timed)}, e.g. "
      + ", ".join(f"{r['name']} {r['self_cuda_us']} us" for r in timed[:3]))
PY
then
  pass "telemetry: NVML keys in every sample, the accelerator and its peak, MFU, CUDA times per operator"
else
  fail "telemetry"; tail -n 20 tel.out
fi

# --- bf16 and fp16 train: the last logged loss is finite and below the first ---------------------------
for precision in bf16 fp16; do
  if timeout 300 "$dtrain" --workload mnist --synthetic "${gpu[@]}" --precision "$precision" --epochs 2 --max-steps 150 \
       --eval-samples 2000 --log-dir "logs-$precision" >"$precision.out" 2>&1 &&
     /usr/bin/python3 - "logs-$precision" <<'PY'
import glob, json, math, sys
run = sorted(glob.glob(sys.argv[1] + "/*/events.jsonl"))[-1]
losses = [r["train_loss"] for r in map(json.loads, open(run)) if r["event"] == "epoch_end"]
print("train loss per epoch:", losses)
sys.exit(0 if len(losses) == 2 and all(map(math.isfinite, losses)) and losses[1] < losses[0] else 1)
PY
  then
    pass "$precision trains on the GPU"
  else
    fail "$precision"; tail -n 20 "$precision.out"
  fi
done

# --- every other workload takes bf16 steps on the GPU ----------------------------------------------------
for workload in cifar10 resnet18 resnet50 alexnet gcn biggan; do
  if timeout 300 "$dtrain" --workload "$workload" --synthetic "${gpu[@]}" --precision bf16 --epochs 1 --max-steps 6 \
       --eval-samples 256 --log-dir "logs-$workload" >"$workload.out" 2>&1 &&
     grep -q '"event":"run_end"' "logs-$workload"/*/events.jsonl; then
    pass "$workload: bf16 steps on the GPU ($(grep -o '"samples_per_s":[0-9.]*' "logs-$workload"/*/events.jsonl | tail -n 1))"
  else
    fail "$workload on the GPU"; tail -n 20 "$workload.out"
  fi
done

# --- NCCL through the c10d store under torchrun ------------------------------------------------------------
if ! "$python" -c 'import torch.distributed.run' 2>/dev/null; then
  fail "no torchrun: $python cannot import torch.distributed.run"
else
  torchrun=("$python" -m torch.distributed.run --standalone --log_dir tr-logs --redirects 1 --tee 1 --no_python)
  if timeout 300 "${torchrun[@]}" --nproc_per_node 1 "$dtrain" --workload mnist --synthetic --device cuda --epochs 1 \
       --max-steps 100 --eval-samples 1000 --progress off --log-dir logs-tr1 >tr1.out 2>&1 &&
     grep -q '"bootstrap":"env"' logs-tr1/*/events.jsonl && grep -q '"backend":"nccl"' logs-tr1/*/events.jsonl &&
     grep -q metricName tr1.out; then
    pass "torchrun --nproc_per_node 1: NCCL bootstrapped through the store trains"
  else
    fail "torchrun with NCCL"; tail -n 20 tr1.out
  fi
  start=$(date +%s)
  timeout 300 "${torchrun[@]}" --nproc_per_node 2 "$dtrain" --workload mnist --synthetic --device cuda --backend nccl \
    --epochs 1 --max-steps 20 --progress off --comm-timeout-s 30 --log-dir logs-tr2 >tr2.out 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q 'runs 2 ranks but has only 1 visible GPU' tr2.out && [ $(($(date +%s) - start)) -lt 120 ]; then
    pass "two NCCL workers on one GPU end with dtrain's error, not a hang: $(grep -m1 -o 'host .* visible GPU' tr2.out | cut -c1-200)"
  else
    fail "two NCCL workers on one GPU (exit $rc)"; tail -n 20 tr2.out
  fi
fi

if [ "$failures" -gt 0 ]; then
  echo "gpu_test: $failures failure(s)"
  exit 1
fi
echo "gpu_test: all passed"
