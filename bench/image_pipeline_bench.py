#!/usr/bin/python3
"""Input pipeline throughput: dtrain's image loader against torchvision's ImageFolder + DataLoader with
the same worker count, the same files and the same transforms (RandomResizedCrop(size), horizontal flip,
ToTensor, Normalize), batches of the same size. The files are a generated tiny-imagenet-style folder of
64x64 JPEGs (or --root). The two are run alternately, --reps times each; medians are compared.

Usage: bench/image_pipeline_bench.py [--bench build/dtrain_image_pipeline_bench] [--images 4000]
                                      [--workers 2] [--size 64] [--reps 3] [--out FILE]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision import transforms


def make_folder(root, images, classes=20, seed=1):
    rng = np.random.default_rng(seed)
    for c in range(classes):
        os.makedirs(os.path.join(root, f"n{c:08d}"), exist_ok=True)
    for i in range(images):
        c = i % classes
        pixels = np.clip(rng.normal(128 + 4 * c, 40, (64, 64, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(os.path.join(root, f"n{c:08d}", f"{i}.JPEG"), quality=90)


def torchvision_pass(root, size, workers, batch):
    transform = transforms.Compose([
        transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    dataset = torchvision.datasets.ImageFolder(root, transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers,
                                         persistent_workers=False)
    start = time.perf_counter()
    for inputs, _ in loader:
        inputs[0, 0, 0, 0].item()
    return len(dataset), time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="build/dtrain_image_pipeline_bench")
    parser.add_argument("--root")
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="dtrain-pipeline-") as tmp:
        root = args.root or os.path.join(tmp, "folder")
        if not args.root:
            make_folder(root, args.images)
        dtrain_rates, peer_rates = [], []
        for _ in range(args.reps):
            out = subprocess.run([args.bench, "--root", root, "--size", str(args.size), "--workers", str(args.workers),
                                  "--batch", str(args.batch), "--passes", "1"], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"image_pipeline_bench: {args.bench} failed:\n{out.stderr}")
            dtrain_rates.append(json.loads(out.stdout)["images_per_s"])
            n, seconds = torchvision_pass(root, args.size, args.workers, args.batch)
            peer_rates.append(n / seconds)
    result = {
        "machine": platform.node(), "cpus": os.cpu_count(), "workers": args.workers, "size": args.size,
        "batch": args.batch, "images": args.images if not args.root else None,
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "dtrain_images_per_s": dtrain_rates, "torchvision_images_per_s": peer_rates,
        "ratio": statistics.median(dtrain_rates) / statistics.median(peer_rates),
    }
    print(f"images/s (median of {args.reps}), {args.workers} workers, {args.size} px: dtrain "
          f"{statistics.median(dtrain_rates):.0f}, torchvision ImageFolder+DataLoader {statistics.median(peer_rates):.0f}, "
          f"ratio {result['ratio']:.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
