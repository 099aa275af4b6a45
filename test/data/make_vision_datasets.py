#!/usr/bin/python3
"""Writes small learnable datasets in the exact published formats the vision workloads read.

  cifar10/cifar-10-batches-bin/  data_batch_1..5.bin, test_batch.bin (label byte + 3072 CHW bytes)
  tiny-imagenet-200/             wnids.txt, train/<wnid>/images/*.JPEG, val/images/*.JPEG,
                                 val/val_annotations.txt
  photos/<class>/                JPEG and PNG files of mixed sizes (an image folder)

Classes differ by colour and stripe direction, so a model learns them in a few epochs; every image adds
noise. Usage: make_vision_datasets.py OUT_DIR [--seed N]
"""
import argparse
import os

import numpy as np
from PIL import Image


def class_image(rng, label, classes, height, width):
    hue = np.array([np.cos(2 * np.pi * label / classes), np.cos(2 * np.pi * (label / classes + 1 / 3)),
                    np.cos(2 * np.pi * (label / classes + 2 / 3))])
    base = 128 + 70 * hue
    y, x = np.mgrid[0:height, 0:width]
    stripes = np.sin((x if label % 2 else y) * 2 * np.pi / 6.0)[..., None] * 30
    image = base[None, None, :] + stripes + rng.normal(0, 20, (height, width, 3))
    return np.clip(image, 0, 255).astype(np.uint8)


def write_cifar(out, rng, per_batch, test_count):
    root = os.path.join(out, "cifar10", "cifar-10-batches-bin")
    os.makedirs(root, exist_ok=True)
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    for name in names:
        count = test_count if name == "test_batch.bin" else per_batch
        records = bytearray()
        for _ in range(count):
            label = int(rng.integers(10))
            image = class_image(rng, label, 10, 32, 32)
            records.append(label)
            records += image.transpose(2, 0, 1).tobytes()  # CHW: red, green, blue planes
        with open(os.path.join(root, name), "wb") as f:
            f.write(records)


def write_tiny_imagenet(out, rng, classes, train_per_class, val_per_class):
    root = os.path.join(out, "tiny-imagenet-200")
    wnids = [f"n{10000000 + 7919 * i:08d}" for i in range(classes)]
    os.makedirs(os.path.join(root, "val", "images"), exist_ok=True)
    with open(os.path.join(root, "wnids.txt"), "w") as f:
        f.write("\n".join(wnids) + "\n")
    annotations = []
    serial = 0
    for label, wnid in enumerate(wnids):
        images = os.path.join(root, "train", wnid, "images")
        os.makedirs(images, exist_ok=True)
        with open(os.path.join(root, "train", wnid, f"{wnid}_boxes.txt"), "w") as boxes:
            for i in range(train_per_class):
                Image.fromarray(class_image(rng, label, classes, 64, 64)).save(
                    os.path.join(images, f"{wnid}_{i}.JPEG"), quality=90)
                boxes.write(f"{wnid}_{i}.JPEG\t0\t0\t63\t63\n")
        for _ in range(val_per_class):
            name = f"val_{serial}.JPEG"
            serial += 1
            Image.fromarray(class_image(rng, label, classes, 64, 64)).save(
                os.path.join(root, "val", "images", name), quality=90)
            annotations.append(f"{name}\t{wnid}\t0\t0\t63\t63")
    rng.shuffle(annotations)
    with open(os.path.join(root, "val", "val_annotations.txt"), "w") as f:
        f.write("\n".join(annotations) + "\n")


def write_photos(out, rng, per_class):
    for label, name in enumerate(["good", "bad"]):
        folder = os.path.join(out, "photos", name)
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            h, w = int(rng.integers(60, 140)), int(rng.integers(60, 140))
            image = Image.fromarray(class_image(rng, label, 2, h, w))
            if i % 3 == 0:
                image.convert("L" if i % 2 else "RGB").save(os.path.join(folder, f"{i}.png"))
            else:
                image.save(os.path.join(folder, f"{i}.jpg"), quality=85)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    write_cifar(args.out, rng, per_batch=40, test_count=160)
    write_tiny_imagenet(args.out, rng, classes=4, train_per_class=48, val_per_class=16)
    write_photos(args.out, rng, per_class=48)


if __name__ == "__main__":
    main()
