#!/usr/bin/python3
"""dtrain's checkpoints and PyTorch, both ways, on the real Fashion-MNIST (Debian's dataset-fashion-mnist):

1. dtrain trains mnist on 2 ranks; its checkpoint, opened with PyPI's safetensors and loaded into the
   PyTorch module of the pytorch/examples MNIST recipe (the same layers under the same names), gives
   dtrain's own reported test accuracy to 0.1% and its loss to 1e-3 (relative).
2. PyTorch builds that module, writes its state_dict with safetensors.torch.save_file, and
   `dtrain --init-from` starts a run from it at a learning rate of 1e-30 (no float32 weight moves): dtrain's evaluation of those weights
   equals PyTorch's, to the same bounds.
3. A file whose names do not match the model is refused with exit status 3, naming the entries.

Runs under scripts/install_safetensors.sh's Python (Debian's torch and torchvision, PyPI's safetensors),
re-running itself there when started under another.

Usage: checkpoint_interop_test.py DTRAIN MPIEXEC [MPIEXEC_PREFLAGS]
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "support"), os.path.join(HERE, "..", "..", "bench", "peer")]
from safetensors_env import require_safetensors  # noqa: E402

require_safetensors()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from mnist_ddp import Net  # noqa: E402  pytorch/examples' MNIST model, as the benchmark's peer has it
from safetensors.torch import load_file, save_file  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
KATIB = re.compile(r"\{metricName: accuracy, metricValue: ([0-9.]+)\};\{metricName: loss, metricValue: ([0-9.]+)\}")
EXPECTED_SKIP = 77


def test_set():
    """The real test split, normalised as the recipe (and dtrain's mnist) does."""
    import gzip
    import numpy as np

    def idx(name):
        path = os.path.join(DATA, name)
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            raw = f.read()
        dims = raw[3]
        shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
        return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)

    names = sorted(os.listdir(DATA))
    images = idx(next(n for n in names if n.startswith("t10k-images")))
    labels = idx(next(n for n in names if n.startswith("t10k-labels")))
    x = (torch.from_numpy(images.copy()).float().div(255).unsqueeze(1) - 0.1307) / 0.3081
    return x, torch.from_numpy(labels.copy()).long()


def evaluate(model, x, y):
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(y), 1000):
            out = model(x[i:i + 1000])
            loss += F.nll_loss(out, y[i:i + 1000], reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + 1000]).sum().item()
    return correct / len(y), loss / len(y)


def dtrain_run(dtrain, mpiexec, preflags, root, name, extra):
    cmd = [mpiexec, "-np", "2", *preflags, dtrain, "--workload", "mnist", "--device", "cpu", "--backend", "mpi",
           "--data-dir", DATA, "--epochs", "1", "--checkpoint-dir", os.path.join(root, name),
           "--log-dir", os.path.join(root, "logs"), "--progress", "off", "--log-interval", "0", *extra]
    result = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
    found = KATIB.findall(result.stdout + result.stderr)
    return result, [(float(a), float(b)) for a, b in found]


def close(what, dtrain_figures, torch_figures, failures):
    (acc_d, loss_d), (acc_t, loss_t) = dtrain_figures, torch_figures
    print(f"{what}: dtrain accuracy {acc_d:.4f} loss {loss_d:.4f}; PyTorch accuracy {acc_t:.4f} loss {loss_t:.4f}")
    # dtrain prints 4 decimals: its figures are within 0.00005 of its own.
    if abs(acc_d - acc_t) > 0.001 or abs(loss_d - loss_t) > max(1e-3 * loss_t, 0.0001):
        failures.append(f"{what}: dtrain {dtrain_figures} vs PyTorch {torch_figures}")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    dtrain, mpiexec = sys.argv[1], sys.argv[2]
    preflags = sys.argv[3].split() if len(sys.argv) > 3 else []
    if not os.path.isdir(DATA):
        print(f"SKIP: {DATA} is missing (Debian's dataset-fashion-mnist)")
        return EXPECTED_SKIP
    x, y = test_set()
    failures = []
    with tempfile.TemporaryDirectory(prefix="dtrain-interop-") as root:
        # 1. dtrain writes, PyTorch reads.
        result, figures = dtrain_run(dtrain, mpiexec, preflags, root, "trained", ["--max-steps", "150"])
        if result.returncode != 0 or len(figures) != 1:
            return print(f"FAILED: dtrain training exit {result.returncode}\n{(result.stdout + result.stderr)[-3000:]}") or 1
        checkpoint = os.path.join(root, "trained", "checkpoint-epoch-000001.safetensors")
        state = {k[len("model."):]: v for k, v in load_file(checkpoint).items() if k.startswith("model.")}
        model = Net()
        model.load_state_dict(state)  # strict: every name and shape
        close("dtrain's checkpoint in PyTorch", figures[0], evaluate(model, x, y), failures)

        # 2. PyTorch writes, dtrain starts from it (at lr 1e-30 no weight moves: its evaluation is of these weights).
        torch.manual_seed(3)
        fresh = Net()
        weights = os.path.join(root, "pytorch.safetensors")
        save_file(fresh.state_dict(), weights)
        result, figures = dtrain_run(dtrain, mpiexec, preflags, root, "from-pytorch",
                                     ["--init-from", weights, "--lr", "1e-30", "--max-steps", "2"])
        output = result.stdout + result.stderr
        if result.returncode != 0 or len(figures) != 1 or "starting from the weights in " + weights not in output:
            failures.append(f"--init-from: exit {result.returncode}\n{output[-3000:]}")
        else:
            close("PyTorch's weights in dtrain", figures[0], evaluate(fresh, x, y), failures)

        # 3. A file of another model: refused, naming what differs.
        other = dict(fresh.state_dict())
        other["fc3.weight"] = other.pop("fc2.weight")
        other["fc1.bias"] = torch.zeros(64)
        save_file(other, os.path.join(root, "other.safetensors"))
        result, _ = dtrain_run(dtrain, mpiexec, preflags, root, "other",
                               ["--init-from", os.path.join(root, "other.safetensors"), "--max-steps", "1"])
        output = result.stdout + result.stderr
        wanted = ["not in the file (1): model.fc2.weight", "in the file but not in the model (1): fc3.weight",
                  "of another shape or type (1): fc1.bias is [64] Float, model.fc1.bias [128] Float"]
        print(f"a file of another model: exit {result.returncode}")
        if result.returncode != 3 or not all(w in output for w in wanted):
            failures.append(f"a file of another model: exit {result.returncode}, wanted {wanted}\n{output[-3000:]}")
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
