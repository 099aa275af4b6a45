#!/usr/bin/python3
"""Compares the models that dtrain checkpoints hold: every parameter and buffer of the modules ("model.",
"generator.", ...; with --optimizer the optimizer state too, "optimizer.<module>.<parameter>.<key>"),
read with PyPI's safetensors, the format's reference reader (re-run under scripts/install_safetensors.sh's
Python where this one lacks it).

Usage: same_model.py [--differ] [--optimizer] [--tolerance T] [--min-tensors N] REFERENCE OTHER...
       same_model.py --pairs FILE   (each line: "bitwise" or a tolerance, a name, REFERENCE, OTHER, tab-separated;
                                     "bitwise" compares the optimizer state too: one process for many pairs)
Each argument is a checkpoint file, or a checkpoint directory (its newest checkpoint-epoch-*.safetensors).
Prints one "OTHER: k of n tensors differ [first names]" per OTHER, joined by "; ". Exit status 0 when
every OTHER holds the reference's tensor names and values (bit for bit, or floating-point ones within
--tolerance, relative and absolute); with --differ, when every OTHER differs in at least one tensor.
A reference with fewer than --min-tensors tensors (default 1) fails either way: a model that was not
found compares equal to anything.
"""
import argparse
import glob
import os
import sys

import torch

from safetensors_env import require_safetensors

require_safetensors()
from safetensors.torch import load_file  # noqa: E402


def checkpoint(path):
    if not os.path.isdir(path):
        return path
    found = sorted(glob.glob(os.path.join(path, "checkpoint-epoch-*.safetensors")))
    if not found:
        sys.exit(f"same_model.py: no checkpoint-epoch-*.safetensors in {path}")
    return found[-1]


def model_tensors(path, optimizer=False):
    return {name: tensor for name, tensor in load_file(checkpoint(path)).items()
            if optimizer or not name.startswith("optimizer.")}


def compare_pairs(path, min_tensors):
    failed = 0
    with open(path) as f:
        for line in f:
            mode, name, reference, other = line.rstrip("\n").split("\t")
            bitwise = mode == "bitwise"
            a, b = model_tensors(reference, bitwise), model_tensors(other, bitwise)
            tol = 0.0 if bitwise else float(mode)

            def same(x, y):
                return torch.equal(x, y) if tol == 0 or not x.is_floating_point() else \
                    x.shape == y.shape and torch.allclose(x, y, rtol=tol, atol=tol)
            differ = [n for n in a if n not in b or not same(a[n], b[n])] + sorted(set(b) - set(a))
            ok = not differ and len(a) >= min_tensors
            failed += 0 if ok else 1
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {len(differ)} of {len(a)} tensors differ {differ[:3] if differ else ''}".rstrip())
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--differ", action="store_true", help="require every OTHER to differ somewhere")
    parser.add_argument("--tolerance", type=float, default=0.0)
    parser.add_argument("--min-tensors", type=int, default=1)
    parser.add_argument("--optimizer", action="store_true", help="compare the optimizer state too")
    parser.add_argument("--pairs", help="compare the pairs this file lists, one per line")
    parser.add_argument("reference", nargs="?")
    parser.add_argument("others", nargs="*")
    args = parser.parse_args()
    if args.pairs:
        return compare_pairs(args.pairs, args.min_tensors)
    if not args.reference or not args.others:
        parser.error("REFERENCE and at least one OTHER are needed")

    def same(a, b):
        if args.tolerance == 0 or not a.is_floating_point():
            return torch.equal(a, b)
        return a.shape == b.shape and torch.allclose(a, b, rtol=args.tolerance, atol=args.tolerance)

    reference = model_tensors(args.reference, args.optimizer)
    ok = len(reference) >= args.min_tensors
    report = []
    for other_path in args.others:
        other = model_tensors(other_path, args.optimizer)
        differ = [n for n in reference if n not in other or not same(reference[n], other[n])]
        differ += sorted(set(other) - set(reference))
        report.append(f"{other_path}: {len(differ)} of {len(reference)} tensors differ {differ[:3] if differ else ''}".rstrip())
        ok = ok and (bool(differ) if args.differ else not differ)
    print("; ".join(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
