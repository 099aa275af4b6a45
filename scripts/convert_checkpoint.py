#!/usr/bin/python3
"""Converts dtrain 0.1's checkpoints (format 4: a LibTorch archive, checkpoint-epoch-*.pt) into format 5,
the safetensors layout dtrain reads since 0.2 (runtime/train/checkpoint_format.h), once, beside each
file: checkpoint-epoch-000003.pt -> checkpoint-epoch-000003.safetensors. A run resumed afterwards
continues at the converted checkpoint's step.

    /usr/bin/python3 scripts/convert_checkpoint.py CHECKPOINT.pt [CHECKPOINT.pt ...]

Convert only files you trust: the old archive is read with torch.jit.load (Debian's python3-torch),
which runs the TorchScript code stored in it. The new file is written by PyPI's safetensors
(scripts/install_safetensors.sh; run under that environment's Python, or this one finds it). An
existing output is never replaced. Exit status 0 when every file converted, 1 otherwise (each failure
named), 2 for bad usage.
"""
import json
import os
import subprocess
import sys
import tempfile
import zlib

# What each optimizer keeps per parameter, and its options, as format 4 and dtrain's optimizers name them.
STATE_KEYS = {
    "sgd": ["momentum_buffer"],
    "adam": ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"],
    "adamw": ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"],
    "adadelta": ["step", "square_avg", "acc_delta"],
}
OPTIONS = {
    "sgd": ["lr", "momentum", "dampening", "weight_decay", "nesterov"],
    "adam": ["lr", "betas", "eps", "weight_decay", "amsgrad"],
    "adamw": ["lr", "betas", "eps", "weight_decay", "amsgrad"],
    "adadelta": ["lr", "rho", "eps", "weight_decay"],
}
# Parameters a workload keeps out of weight decay by name (Workload::no_weight_decay), for the second
# parameter group of its optimizer.
EXEMPT = {"gcn": {"conv2.weight", "conv2.bias", "conv1.bias"}}


class ConvertError(Exception):
    pass


def text_of(t):
    return bytes(t.tolist()).decode()


def child(module, name):
    if not module.hasattr(name):
        raise ConvertError(f"it has no record '{name}' (not a dtrain 0.1 checkpoint?)")
    return module.getattr(name)


def metric_values(archive):
    names = text_of(archive.getattr("names"))
    out = []
    for name in names.split("\n") if names else []:
        value, total, weight = archive.getattr(name).double().tolist()
        out.append([name, value, total, weight])
    return out


def group_split(groups, names, shapes, workload):
    """The parameters of each optimizer group, by name: one group holds them all in the module's order; two
    hold the decayed ones, then the exempt ones (1-d with train.no_decay_norm_bias, or the workload's)."""
    sizes = [len(g) for g in groups]
    if len(groups) == 1:
        candidates = [[names]]
    else:
        rules = [lambda n: len(shapes[n]) <= 1, lambda n: n in EXEMPT.get(workload, set()),
                 lambda n: len(shapes[n]) <= 1 or n in EXEMPT.get(workload, set())]
        candidates = [[[n for n in names if not r(n)], [n for n in names if r(n)]] for r in rules]
    for split in candidates:
        if [len(s) for s in split] == sizes:
            return split
    raise ConvertError(f"its optimizer's parameter groups ({sizes}) do not match any grouping of the model's "
                       f"{len(names)} parameters that dtrain makes")


def convert(path, save_file, torch):
    archive = torch.jit.load(path, map_location="cpu")._c
    version = int(child(archive, "format_version").item())
    if version != 4:
        raise ConvertError(f"it is of format {version}; this converts format 4 (dtrain 0.1) only")
    workload = text_of(child(archive, "workload"))
    optimizer = text_of(child(archive, "optimizer_name"))
    if optimizer not in STATE_KEYS:
        raise ConvertError(f"its optimizer '{optimizer}' is not one dtrain writes")
    meta = {"format": "dtrain-checkpoint", "format_version": "5", "dtrain_version": "0.1 (converted)",
            "workload": workload, "optimizer": optimizer}
    for key in ["epoch", "seed", "world_size", "epoch_samples", "epoch_steps", "global_batch", "partial_samples"]:
        meta[key] = str(int(child(archive, key).item()))
    meta["saved_unix_s"] = json.dumps(float(child(archive, "saved_unix_s").item()))
    meta["partial_train"] = json.dumps(metric_values(child(archive, "partial_train")))
    if archive.hasattr("data_labels"):
        meta["data_labels"] = text_of(archive.getattr("data_labels"))
    if archive.hasattr("metrics"):
        m = archive.getattr("metrics")
        meta["metrics"] = json.dumps({
            "epoch": int(m.getattr("epoch").item()), "epochs": int(m.getattr("epochs").item()),
            "lr": float(m.getattr("lr").item()), "train_samples": int(m.getattr("train_samples").item()),
            "test_samples": int(m.getattr("test_samples").item()),
            "train": metric_values(m.getattr("train")), "test": metric_values(m.getattr("test"))})

    tensors, options, module_names = {}, {}, []
    modules = torch.jit._recursive.wrap_cpp_module(child(archive, "modules"))
    optimizers = child(archive, "optimizers")
    for module_name, module in modules.named_children():
        module_names.append(module_name)
        params = dict(module.named_parameters())
        for name, t in list(params.items()) + list(module.named_buffers()):
            tensors[f"{module_name}.{name}"] = t.detach().contiguous()
        if not optimizers.hasattr(module_name):
            continue  # a module the step updates itself
        opt = optimizers.getattr(module_name)
        groups_archive = child(opt, "param_groups")
        groups, group_options = [], []
        for i in range(int(child(groups_archive, "param_groups/size").item())):
            g = child(groups_archive, f"param_groups/{i}")
            groups.append([g.getattr(f"params/{j}") for j in range(int(g.getattr("params/size").item()))])
            o = g.getattr("options")
            group_options.append({k: (list(o.getattr(k)) if k == "betas" else o.getattr(k)) for k in OPTIONS[optimizer]})
        options[module_name] = {"type": optimizer, "groups": group_options}
        shapes = {n: list(p.shape) for n, p in params.items()}
        split = group_split(groups, list(params), shapes, workload)
        state = child(opt, "state")
        for keys, names in zip(groups, split):
            for key, name in zip(keys, names):
                if not state.hasattr(key):
                    continue  # never stepped
                s = state.getattr(key)
                for k in STATE_KEYS[optimizer]:
                    if not s.hasattr(k):
                        continue
                    value = s.getattr(k)
                    if value is None:
                        continue
                    if isinstance(value, int):
                        value = torch.tensor(value, dtype=torch.int64)
                    else:
                        if list(value.shape) != shapes[name]:
                            raise ConvertError(f"the optimizer state {k} it maps to {name} is {list(value.shape)}, "
                                               f"the parameter {shapes[name]}")
                        value = value.detach().contiguous()
                    tensors[f"optimizer.{module_name}.{name}.{k}"] = value
    meta["modules"] = json.dumps(module_names)
    meta["optimizer_options"] = json.dumps(options)
    meta["crc32"] = json.dumps({n: zlib.crc32(t.reshape(-1).view(torch.uint8).numpy().tobytes()) for n, t in tensors.items()})
    out = os.path.splitext(path)[0] + ".safetensors"
    if os.path.lexists(out):
        raise ConvertError(f"'{out}' exists; it is not replaced (move it away to convert again)")
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".convert-", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        save_file(tensors, temporary, metadata=meta)
        os.link(temporary, out)  # fails, replacing nothing, where the name was taken meanwhile
    finally:
        os.unlink(temporary)
    return out, len(tensors)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError:
        # Debian's python3-torch plus PyPI's safetensors, in scripts/install_safetensors.sh's environment.
        here = os.path.dirname(os.path.abspath(__file__))
        python = subprocess.run(["bash", os.path.join(here, "install_safetensors.sh")], check=True,
                                capture_output=True, text=True).stdout.strip()
        if os.environ.get("DTRAIN_CONVERT_REEXEC"):
            raise
        os.environ["DTRAIN_CONVERT_REEXEC"] = "1"
        os.execv(python, [python, os.path.abspath(__file__)] + argv)
    print("convert_checkpoint: converting with torch.jit.load, which runs the code stored in the archive: "
          "convert only files you trust", file=sys.stderr)
    status = 0
    for path in argv:
        try:
            out, count = convert(path, save_file, torch)
            print(f"convert_checkpoint: {path} -> {out} ({count} tensors)")
        except (ConvertError, RuntimeError, OSError, ValueError) as e:
            print(f"convert_checkpoint: {path}: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
