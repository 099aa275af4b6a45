#!/usr/bin/python3
"""Opens every dtrain checkpoint (*.safetensors) under the given directories with PyPI's safetensors, the
format's reference reader, as any tool would: each file's metadata says it is a dtrain checkpoint of
format 5, every tensor loads, and its CRC-32 is the one the file records. Re-runs itself under
scripts/install_safetensors.sh's Python where this one lacks the package.

Usage: open_checkpoints.py [--min-files N] DIR...
Prints one line per directory; exit status 1 when a file does not open or check, or fewer than N (default 1)
files were found.
"""
import argparse
import glob
import json
import os
import sys
import zlib

import torch

from safetensors_env import require_safetensors

require_safetensors()
from safetensors import safe_open  # noqa: E402


def check(path):
    """What is wrong with one checkpoint, or None; and how many tensors it holds."""
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata() or {}
        if metadata.get("format") != "dtrain-checkpoint" or metadata.get("format_version") != "5":
            return f"metadata format {metadata.get('format')!r} version {metadata.get('format_version')!r}", 0
        crcs = json.loads(metadata["crc32"])
        names = list(f.keys())
        if sorted(names) != sorted(crcs):
            return f"{len(names)} tensors, {len(crcs)} CRCs recorded", len(names)
        for name in names:
            t = f.get_tensor(name)
            crc = zlib.crc32(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            if crc != crcs[name]:
                return f"tensor {name}: CRC-32 {crc}, recorded {crcs[name]}", len(names)
        return None, len(names)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--min-files", type=int, default=1)
    parser.add_argument("dirs", nargs="+")
    args = parser.parse_args()
    failures, files = [], 0
    for directory in args.dirs:
        paths = sorted(glob.glob(os.path.join(directory, "**", "checkpoint-epoch-*.safetensors"), recursive=True))
        tensors = 0
        for path in paths:
            problem, count = check(path)
            tensors += count
            if problem:
                failures.append(f"{path}: {problem}")
        files += len(paths)
        print(f"open_checkpoints: {directory}: {len(paths)} checkpoints, {tensors} tensors opened with safetensors")
    for failure in failures:
        print("FAILED:", failure)
    if files < args.min_files:
        print(f"FAILED: {files} checkpoints found, expected at least {args.min_files}")
    return 1 if failures or files < args.min_files else 0


if __name__ == "__main__":
    sys.exit(main())
