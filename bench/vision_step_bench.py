#!/usr/bin/python3
"""Training-step time of dtrain's vision models against PyTorch eager on the same model (torchvision's,
or the CIFAR ResNet-18 built from it), batch, optimizer (SGD, momentum 0.9, weight decay), precision and
memory format, one process each, data already in memory (on the GPU with --device cuda). Per-step time
is the difference between a long and a short run divided by the extra steps, so start-up and the first
(slow) steps cancel out; dtrain's figure comes from its run log's train_s, PyTorch's from the same loop
timed in Python. Runs alternate, --reps times; medians are compared (ratio > 1: dtrain is faster), and
each side's spread over the repetitions ((max - min) / median) is printed beside them: a ratio means
something only where both spreads are well under its distance from 1.
Throughput is images/s; achieved TFLOP/s counts the model's analytic FLOPs (2 per multiply-add of every
convolution and linear layer in forward, times 3 for forward and backward).

On the CPU (default) the cases are resnet18 at 64 px and the CIFAR model, batch 32, with --threads
intra-op threads. With --device cuda (a GPU host, the CUDA build's dtrain and PyTorch with CUDA) they
are resnet18, resnet50 and alexnet at 64 and 224 px, batch 128; the peer then runs as its authors would
on a GPU: no host synchronisation inside the loop, channels_last with --channels-last, autocast with
--precision bf16. A GPU step takes milliseconds and two processes differ by more than that, so there each
side is timed inside one run instead: --windows windows of as many steps as take about --window-s
seconds (from the peer's step time, measured first), each ended by one host synchronisation (dtrain's
progress line, which reduces its metrics; the peer's torch.cuda.synchronize()), after one window of
warm-up that is not counted; a repetition's step time is the median of its windows.

Usage: bench/vision_step_bench.py [--dtrain build/dtrain] [--threads 2] [--reps 3] [--workloads resnet18,cifar10]
                                  [--device cpu|cuda] [--precision fp32|bf16] [--channels-last] [--out FILE]
"""
import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

CASES = {  # workload, image size, classes (those of dtrain's --synthetic data), batch
    "cpu": [("resnet18", 64, 200, 32), ("cifar10", 32, 10, 32)],
    "cuda": [(w, size, 200, 128) for w in ("resnet18", "resnet50", "alexnet") for size in (64, 224)],
}


def dtrain_records(dtrain, workload, size, batch, steps, log_interval, args, tmp):
    """One dtrain run of `steps` steps on --synthetic data; the records of its run log."""
    logs = tempfile.mkdtemp(dir=tmp)
    cmd = [dtrain, "--workload", workload, "--synthetic", "--image-size", str(size), "--batch-size", str(batch),
           "--max-steps", str(steps), "--epochs", "1", "--threads", str(args.threads), "--checkpoint=false",
           "--log-dir", logs, "--log-interval", str(log_interval), "--progress", "off", "--eval-samples", str(batch),
           "--weight-decay", "1e-4", "--lr-schedule", "constant", "--device", args.device,
           "--precision", args.precision, f"--channels-last={'true' if args.channels_last else 'false'}"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"vision_step_bench: {' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
    with open(glob.glob(os.path.join(logs, "*", "events.jsonl"))[0]) as f:
        return [json.loads(line) for line in f]


def dtrain_train_s(dtrain, workload, size, batch, steps, args, tmp):
    records = dtrain_records(dtrain, workload, size, batch, steps, 0, args, tmp)
    return next(r for r in records if r["event"] == "epoch_end")["train_s"]


def peer_model(workload, classes):
    if workload == "cifar10":
        model = torchvision.models.resnet18(num_classes=classes)
        model.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        model.maxpool = torch.nn.Identity()
        return model
    return getattr(torchvision.models, workload)(num_classes=classes)


def forward_flops(workload, size, classes):
    """2 x multiply-adds of every convolution and linear layer for one image, counted from the shapes."""
    model = peer_model(workload, classes)
    total = [0]

    def count(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            kh, kw = module.kernel_size
            total[0] += 2 * output.numel() * (module.in_channels // module.groups) * kh * kw
        elif isinstance(module, torch.nn.Linear):
            total[0] += 2 * output.numel() * module.in_features

    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            m.register_forward_hook(count)
    with torch.no_grad():
        model(torch.zeros(1, 3, size, size))
    return total[0]


def peer_loop(workload, size, classes, batch, args):
    """The peer's model, data and optimizer on the device: returns step(i), one training step."""
    torch.manual_seed(1)
    device = torch.device(args.device)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = peer_model(workload, classes).to(device, memory_format=memory_format)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(4, batch, 3, size, size, device=device)
    inputs = [inputs[i].contiguous(memory_format=memory_format) for i in range(4)]
    targets = torch.randint(classes, (4, batch), device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16")

    def step(i):
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(model(inputs[i % 4]), targets[i % 4])
        loss.backward()
        optimizer.step()
        return loss

    return step


def peer_train_s(workload, size, classes, batch, steps, args):
    step = peer_loop(workload, size, classes, batch, args)
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(steps):
        loss = step(i)
        if not cuda:
            loss.item()  # the CPU loop reads its loss, as the examples do; on a GPU that would stall the queue
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def dtrain_window_steps_s(dtrain, workload, size, batch, window, args, tmp):
    """Per-step times of dtrain's windows of `window` steps after a first, uncounted one, from the
    samples/s of its run log's progress records (one per window)."""
    records = dtrain_records(dtrain, workload, size, batch, window * (args.windows + 1), window, args, tmp)
    rates = [r["samples_per_s"] for r in records if r["event"] == "train_progress"]
    if len(rates) != args.windows + 1:
        sys.exit(f"vision_step_bench: {len(rates)} progress records from a run of {workload}, expected {args.windows + 1}")
    return [batch / rate for rate in rates[1:]]


def peer_window_steps_s(workload, size, classes, batch, window, args):
    """The peer's loop timed as dtrain's: windows of `window` steps, each ended by one synchronisation."""
    step = peer_loop(workload, size, classes, batch, args)
    times = []
    for _ in range(args.windows + 1):
        start = time.perf_counter()
        for i in range(window):
            loss = step(i)
        if args.device == "cuda":
            torch.cuda.synchronize()
        else:
            loss.item()
        times.append((time.perf_counter() - start) / window)
    return times[1:]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtrain", default="build/dtrain")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--short", type=int, help="steps of the short run on the CPU (default 3; on a GPU, of the "
                        "peer's step-time estimate, default 10)")
    parser.add_argument("--long", type=int, help="steps of the long run on the CPU (default 13)")
    parser.add_argument("--window-s", type=float, default=0.5, help="on a GPU: a timed window lasts about this long")
    parser.add_argument("--windows", type=int, default=5, help="on a GPU: timed windows per run")
    parser.add_argument("--method", choices=["windows", "difference"],
                        help="how a step is timed (default: windows on a GPU, difference on the CPU)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--workloads", help="comma-separated subset of the device's cases")
    parser.add_argument("--sizes", help="comma-separated subset of the image sizes")
    parser.add_argument("--batch", type=int, help="override every case's batch (smoke runs)")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("vision_step_bench: --device cuda, but this PyTorch sees no GPU")
    torch.set_num_threads(args.threads)
    # A GPU step of these models takes milliseconds: the difference of two dtrain processes measured
    # noise (10 extra steps: alexnet at 64 px slower than at 224 px; 58 to 447 extra steps: 7-30% spread
    # over 3 repetitions on an H100), so GPU runs are timed in windows inside one process instead.
    args.short = args.short or (10 if args.device == "cuda" else 3)
    if args.device == "cpu" and args.method == "windows":
        args.window_s = max(args.window_s, 1.0)
    results = {"machine": platform.node(), "cpus": os.cpu_count(), "threads": args.threads, "torch": torch.__version__,
               "torchvision": torchvision.__version__, "device": args.device, "precision": args.precision,
               "channels_last": args.channels_last, "cases": []}
    if args.device == "cuda":
        results["gpu"] = torch.cuda.get_device_name()
    where = results.get("gpu", f"{args.threads} threads")
    with tempfile.TemporaryDirectory(prefix="dtrain-step-") as tmp:
        for workload, size, classes, batch in CASES[args.device]:
            if args.workloads and workload not in args.workloads.split(","):
                continue
            if args.sizes and str(size) not in args.sizes.split(","):
                continue
            batch = args.batch or batch
            dtrain_steps, peer_steps = [], []
            # The peer runs in this process: its first run of a model pays cuDNN/cuBLAS set-up and lazy
            # kernel loading, which would land in one repetition's long run only. One untimed run first.
            # (Every dtrain run is a new process and pays them in the short and the long run alike.)
            peer_train_s(workload, size, classes, batch, args.short, args)
            if (args.method or ("windows" if args.device == "cuda" else "difference")) == "windows":
                step_s = (peer_train_s(workload, size, classes, batch, 2 * args.short, args) -
                          peer_train_s(workload, size, classes, batch, args.short, args)) / args.short
                window = max(10, int(args.window_s / max(step_s, 1e-4)))
                how = f"windows of {window} steps, {args.windows} per run"
                windows = {"dtrain": [], "pytorch": []}
                for _ in range(args.reps):
                    windows["dtrain"].append(dtrain_window_steps_s(args.dtrain, workload, size, batch, window, args, tmp))
                    windows["pytorch"].append(peer_window_steps_s(workload, size, classes, batch, window, args))
                dtrain_steps = [statistics.median(w) for w in windows["dtrain"]]
                peer_steps = [statistics.median(w) for w in windows["pytorch"]]
            else:
                long_steps = args.long or 13
                extra = long_steps - args.short
                how = f"{extra} extra steps"
                windows = None
                for _ in range(args.reps):
                    dtrain_steps.append((dtrain_train_s(args.dtrain, workload, size, batch, long_steps, args, tmp) -
                                         dtrain_train_s(args.dtrain, workload, size, batch, args.short, args, tmp)) / extra)
                    peer_steps.append((peer_train_s(workload, size, classes, batch, long_steps, args) -
                                       peer_train_s(workload, size, classes, batch, args.short, args)) / extra)
            d, p = statistics.median(dtrain_steps), statistics.median(peer_steps)
            spread = {side: (max(v) - min(v)) / statistics.median(v) for side, v in
                      (("dtrain", dtrain_steps), ("pytorch", peer_steps))}
            step_flops = 3 * forward_flops(workload, size, classes) * batch
            print(f"{workload} at {size} px, batch {batch}, {args.precision}"
                  f"{', channels_last' if args.channels_last else ''}, {where}: "
                  f"dtrain {d * 1000:.1f} ms/step ({batch / d:,.0f} img/s, {step_flops / d / 1e12:.2f} TFLOP/s), "
                  f"PyTorch eager {p * 1000:.1f} ms/step ({batch / p:,.0f} img/s, {step_flops / p / 1e12:.2f} TFLOP/s), "
                  f"ratio (PyTorch / dtrain) {p / d:.2f}; {how}, spread over {args.reps} reps: "
                  f"dtrain {spread['dtrain']:.1%}, PyTorch {spread['pytorch']:.1%}", flush=True)
            results["cases"].append({"workload": workload, "image_size": size, "batch": batch,
                                     "training_flops_per_step": step_flops, "dtrain_step_s": dtrain_steps,
                                     "pytorch_step_s": peer_steps, "ratio": p / d, "method": how,
                                     "window_step_s": windows,
                                     "dtrain_spread": spread["dtrain"], "pytorch_spread": spread["pytorch"]})
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
