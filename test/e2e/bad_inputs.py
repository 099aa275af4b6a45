#!/usr/bin/python3
"""Runs dtrain on a corpus of bad inputs: flags, YAML files, dataset files and checkpoint files. Every case
states the exit status it must end with and a piece of the message it must print; none may crash (signal,
`terminate called`, a LibTorch backtrace), hang (60 s limit) or print a library's internal wording
(`stoll`, `bad conversion`, `basic_string`). A few cases run on 2 ranks, where the message must appear
exactly once and the job must not be aborted.

Usage: bad_inputs.py DTRAIN MPIEXEC [MPIEXEC_FLAGS]
"""
import concurrent.futures
import gzip
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from mpi_env import allow_root_mpi  # noqa: E402

CONFIG, DATA = 2, 3  # dtrain's exit statuses for configuration and data errors (docs/failures.md)
CPU = ["--device", "cpu", "--backend", "mpi"]
FAST = ["--synthetic", "--max-steps", "1", "--epochs", "1", "--eval-samples", "100", "--progress", "off"]
FORBIDDEN = ["terminate called", "Segmentation fault", "Aborted", "stoll", "stoi", "bad conversion",
             "basic_string", "Exception raised from", "std::", "what():"]


def idx(dims, payload=None, kind=0x08, magic=b"\x00\x00"):
    header = magic + bytes([kind, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    size = 1
    for d in dims:
        size *= d
    return header + (bytes(i % 10 for i in range(size)) if payload is None else payload)


def mnist_dir(root, name, images=None, labels=None, test_images=None, test_labels=None):
    """A data directory in torchvision's raw layout; defaults are valid 2-sample splits."""
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=True)
    files = {
        "train-images-idx3-ubyte": idx([2, 28, 28]) if images is None else images,
        "train-labels-idx1-ubyte": idx([2]) if labels is None else labels,
        "t10k-images-idx3-ubyte": idx([2, 28, 28]) if test_images is None else test_images,
        "t10k-labels-idx1-ubyte": idx([2]) if test_labels is None else test_labels,
    }
    for name_, data in files.items():
        if data is not False:
            with open(os.path.join(path, name_), "wb") as f:
                f.write(data)
    return path


def split_safetensors(raw):
    """A safetensors file's header (JSON) and data."""
    (n,) = struct.unpack_from("<Q", raw)
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def tensors_of(header, data):
    return {name: (e["dtype"], e["shape"], data[e["data_offsets"][0]:e["data_offsets"][1]])
            for name, e in header.items() if name != "__metadata__"}


def raw_file(header_json, data_bytes):
    """A file of the layout with this header text and `data_bytes` zero bytes of data."""
    return struct.pack("<Q", len(header_json)) + header_json + b"\0" * data_bytes


def crafted(header, tensors, shape=None, dtype=None, reshape=None):
    """A checkpoint rewritten from `tensors` with every offset and CRC-32 valid: `shape` and `dtype` change
    what the header says of a tensor (its bytes unchanged), `reshape` cuts a tensor to that many elements
    (bytes and shape alike)."""
    metadata = dict(header["__metadata__"])
    out, blob, crcs = {}, b"", {}
    for name, (kind, dims, payload) in tensors.items():
        if reshape and name in reshape:
            dims, payload = [reshape[name]], payload[:4 * reshape[name]]
        out[name] = {"dtype": (dtype or {}).get(name, kind), "shape": (shape or {}).get(name, dims),
                     "data_offsets": [len(blob), len(blob) + len(payload)]}
        crcs[name] = zlib.crc32(payload)
        blob += payload
    metadata["crc32"] = json.dumps(crcs)
    text = json.dumps({"__metadata__": metadata, **out}).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def write(root, name, content, mode="w"):
    path = os.path.join(root, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(content)
    return path


def cases(root, checkpoint):
    """(name, dtrain arguments, exit status, message piece, ranks)."""
    c = []

    def add(name, args, status, message, ranks=1, env=None):
        c.append((name, args, status, message, ranks, env or {}))

    # --- flags: every kind of value, wrong -------------------------------------------------------
    for flag, key in [("epochs", "train.epochs"), ("batch-size", "train.batch_size"),
                      ("eval-batch-size", "train.eval_batch_size"), ("lr-step-epochs", "train.lr_step_epochs")]:
        add(f"--{flag} zero", [f"--{flag}", "0"], CONFIG,
            f"--{flag} ({key}) must be an integer in [1, 1073741824], got '0'")
        add(f"--{flag} not a number", [f"--{flag}", "two"], CONFIG, f"--{flag} ({key}) must be an integer")
        add(f"--{flag} beyond int64", [f"--{flag}", "99999999999999999999"], CONFIG, "got '99999999999999999999'")
        add(f"--{flag} fraction", [f"--{flag}", "2.5"], CONFIG, "got '2.5'")
    add("--batch-size that overflows with the world size", ["--batch-size", "4611686018427387904"], CONFIG,
        "must be an integer in [1, 1073741824], got '4611686018427387904'")
    add("--batch-size empty", ["--batch-size="], CONFIG, "--batch-size (train.batch_size) must be an integer")
    add("--batch-size hex", ["--batch-size", "0x40"], CONFIG, "got '0x40'")
    add("--batch-size with spaces", ["--batch-size", " 64"], CONFIG, "got ' 64'")
    add("--seed negative", ["--seed", "-1"], CONFIG, "--seed (train.seed) must be an integer >= 0, got '-1'")
    add("--max-steps negative", ["--max-steps", "-3"], CONFIG, "--max-steps (train.max_steps) must be an integer")
    add("--eval-samples negative", ["--eval-samples", "-1"], CONFIG,
        "--eval-samples (train.eval_samples) must be an integer in [0, 1073741824], got '-1'")
    add("--accumulate zero", ["--accumulate", "0"], CONFIG, "must be an integer in [1, 1024], got '0'")
    add("--accumulate too many", ["--accumulate", "1025"], CONFIG, "must be an integer in [1, 1024], got '1025'")
    add("--threads negative", ["--threads", "-1"], CONFIG, "--threads (train.threads) must be an integer in [0, 1024]")
    add("--log-interval negative", ["--log-interval", "-10"], CONFIG, "--log-interval (log.interval)")
    add("--checkpoint-keep negative", ["--checkpoint-keep", "-1"], CONFIG, "--checkpoint-keep (checkpoint.keep)")
    for value in ["0", "-0.1", "nan", "inf", "-inf", "1e400", "fast", ""]:
        add(f"--lr {value!r}", [f"--lr={value}"], CONFIG, f"--lr (train.lr) must be a number > 0, got '{value}'")
    add("--momentum above 1", ["--momentum", "1.5"], CONFIG, "--momentum (train.momentum) must be a number >= 0 and <= 1")
    add("--momentum negative", ["--momentum", "-0.1"], CONFIG, "got '-0.1'")
    add("--lr-gamma zero", ["--lr-gamma", "0"], CONFIG, "--lr-gamma (train.lr_gamma) must be a number > 0 and <= 1")
    add("--bucket-mb zero", ["--bucket-mb", "0"], CONFIG, "--bucket-mb (comm.bucket_mb) must be a number > 0")
    add("--bucket-mb too large", ["--bucket-mb", "5000"], CONFIG, "<= 4096, got '5000'")
    add("--first-bucket-mb zero", ["--first-bucket-mb", "0"], CONFIG, "--first-bucket-mb (comm.first_bucket_mb)")
    add("--comm-timeout-s zero", ["--comm-timeout-s", "0"], CONFIG, "--comm-timeout-s (comm.timeout_s) must be a number >= 1")
    for value in ["0.001", "1e-300"]:
        add(f"--comm-timeout-s {value} (no collective could keep to it)", ["--comm-timeout-s", value], CONFIG,
            f"--comm-timeout-s (comm.timeout_s) must be a number >= 1 and <= 1000000, got '{value}'")
    add("--comm-timeout-s beyond any run", ["--comm-timeout-s", "1e7"], CONFIG, "<= 1000000, got '1e7'")
    # --- the launcher's thread count: bounded as --threads is, garbage said ----------------------------
    for value in ["999999", "5000"]:
        add(f"OMP_NUM_THREADS={value}", FAST, CONFIG, f"OMP_NUM_THREADS={value} asks for more intra-op threads per "
            "rank than dtrain takes (1 to 1024)", ranks=2, env={"OMP_NUM_THREADS": value})
    add("OMP_NUM_THREADS 1024 on this machine's cores: refused before any thread starts", FAST, CONFIG,
        f"OMP_NUM_THREADS=1024 asks for 1024 intra-op threads per rank", ranks=2, env={"OMP_NUM_THREADS": "1024"})
    add("OMP_NUM_THREADS garbage", FAST, 0, "dtrain: warning: ignoring OMP_NUM_THREADS='many', which is not a positive "
        "number of threads", env={"OMP_NUM_THREADS": "many"})
    for flag, choices in [("optimizer", "adadelta|sgd|adam|adamw"), ("precision", "fp32|bf16|fp16"), ("backend", "auto|mpi|nccl|gloo"),
                          ("device", "auto|cpu|cuda"), ("compress", "none|bf16"), ("log-format", "katib|pytorch"),
                          ("on-nonfinite", "stop|skip-step"), ("progress", "auto|bar|lines|off")]:
        add(f"--{flag} unknown", [f"--{flag}", "bogus"], CONFIG, f"must be one of {choices}, got 'bogus'")
    add("--optimizer wrong case", ["--optimizer", "SGD"], CONFIG, "must be one of adadelta|sgd|adam|adamw, got 'SGD'")
    for flag in ["synthetic", "resume", "nesterov", "checkpoint"]:
        add(f"--{flag}=maybe", [f"--{flag}=maybe"], CONFIG, "must be true or false, got 'maybe'")
    add("--workload empty", ["--workload="], CONFIG, "--workload (workload) must be a non-empty string, got ''")
    add("--workload unknown", ["--workload", "mnsit"], CONFIG, "unknown workload 'mnsit'; available: alexnet, biggan, cifar10, gcn, image-classifier, mnist, resnet18, resnet50")
    add("--log-dir empty", ["--log-dir="], CONFIG, "--log-dir (log.dir) must be a non-empty string")
    add("--run-name with a slash", ["--run-name", "a/b"], CONFIG,
        "log.run_name (from --run-name) must name a directory inside log.dir (no '/', not '.' or '..'), got 'a/b'")
    add("--run-name ..", ["--run-name", ".."], CONFIG, "must name a directory inside log.dir")
    add("unknown flag", ["--bach-size", "3"], CONFIG, "bach-size")
    add("stray argument", ["mnist"], CONFIG, "unexpected argument 'mnist'; dtrain takes only --flags")
    add("flag without its value", ["--epochs"], CONFIG, "epochs")
    add("--config missing", ["--config", os.path.join(root, "nope.yaml")], CONFIG,
        f"cannot read config file '{root}/nope.yaml': No such file or directory")
    add("--config a directory", ["--config", root], CONFIG, f"--config '{root}' is a directory; expected a YAML file")
    add("--synthetic with --data-dir", ["--synthetic", "--data-dir", root], CONFIG,
        "data.synthetic (from --synthetic) and data.dir (from --data-dir) are both set")
    add("first bucket above bucket", ["--bucket-mb", "1", "--first-bucket-mb", "2"], CONFIG,
        "comm.first_bucket_mb (from --first-bucket-mb) must not exceed comm.bucket_mb")
    add("--resume without checkpoints", ["--resume", "--checkpoint=false"], CONFIG,
        "checkpoint.resume (from --resume) needs checkpoints, but checkpoint.enabled (from --checkpoint) is false")
    add("fp16 on the CPU", ["--precision", "fp16"], CONFIG, "'fp16' needs comm.device 'cuda'")
    add("another workload's option", ["--synthetic", "--sample-every", "1"], CONFIG,
        "--sample-every (biggan.sample_every) is an option of the biggan workload; this run trains mnist")
    add("biggan with --accumulate", ["--workload", "biggan", "--synthetic", "--accumulate", "2"], CONFIG,
        "train.accumulate 2: the biggan step updates the discriminator, then the generator, on every batch")
    add("biggan at an image size without a layout", ["--workload", "biggan", "--synthetic", "--image-size", "48"], CONFIG,
        "data.image_size 48: the biggan workload has layouts for 32x32 and 64x64 images; use 32 or 64")
    add("biggan --deterministic", ["--workload", "biggan", "--synthetic", "--deterministic"], CONFIG,
        "train.deterministic: the biggan step updates the discriminator, then the generator, on every batch")
    add("--deterministic with 6 shards", FAST + ["--deterministic", "--shards", "6"], CONFIG,
        "train.shards (from --shards) must be a power of two")
    add("--remove-memory-copies where the memory directory does not exist", ["--remove-memory-copies",
        "--checkpoint-memory-dir", "/nonexistent-dtrain-memory"], CONFIG,
        "checkpoint.memory_dir '/nonexistent-dtrain-memory' does not exist on this node, so it holds no copies to remove")
    add("--deterministic on 3 ranks: advice a user can follow", FAST + ["--deterministic"], CONFIG,
        "run on 1, 2, 4 or 8 ranks, or without --deterministic", ranks=3)
    add("--deterministic, more ranks than shards", FAST + ["--deterministic", "--shards", "1"], CONFIG,
        "train.deterministic: 2 ranks cannot share the 1 shards of train.shards", ranks=2)
    add("--deterministic, a global batch the shards do not divide", FAST + ["--deterministic", "--global-batch-size", "100"],
        CONFIG, "the global batch of 100 samples (train.global_batch_size) is not a multiple of train.shards (8)")
    add("--profile-rank beyond the world", ["--synthetic", "--profile-steps", "1:2", "--profile-rank", "5"], CONFIG,
        "log.profile_rank is 5, but the run has ranks 0 to 1", ranks=2)
    add("--sync-batchnorm for a model without BatchNorm", ["--synthetic", "--sync-batchnorm"], CONFIG,
        "train.sync_batchnorm is set, but the mnist workload's model has no BatchNorm layers to sync", ranks=2)
    for value in ["60,30", "30,", "x", "0,5"]:
        add(f"--lr-milestones {value!r}", ["--lr-milestones", value], CONFIG,
            f"--lr-milestones (train.lr_milestones) must be a comma-separated list of increasing integers >= 1, "
            f"such as 30,60,80, got '{value}'")
    add("multistep without milestones", ["--lr-schedule", "multistep"], CONFIG,
        "train.lr_schedule (from --lr-schedule) 'multistep' needs the epochs to decay at in train.lr_milestones")
    add("nesterov without momentum", ["--optimizer", "sgd", "--nesterov", "--momentum", "0"], CONFIG,
        "train.nesterov (from --nesterov) needs a momentum")
    add("--label-smoothing 1", ["--label-smoothing", "1"], CONFIG,
        "--label-smoothing (train.label_smoothing) must be a number >= 0 and <= 0.99, got '1'")
    add("--image-size negative", ["--image-size", "-3"], CONFIG, "--image-size (data.image_size) must be an integer in [0, 4096]")

    # --- YAML -------------------------------------------------------------------------------------
    def yaml(name, text, message, status=CONFIG, mode="w"):
        path = write(root, f"yaml/{name}.yaml", text, mode)
        add(f"YAML: {name}", ["--config", path] + FAST, status, message.replace("PATH", path))

    yaml("invalid syntax", "train: {epochs: 3\n", "PATH: not valid YAML")
    yaml("top-level list", "- train\n- comm\n", "PATH: expected a mapping of keys at the top level")
    yaml("top-level scalar", "42\n", "expected a mapping of keys at the top level (such as 'train: {epochs: 3}'), got a value")
    yaml("unknown section", "trian:\n  epochs: 3\n", "PATH: unknown key 'trian'")
    yaml("unknown key", "train:\n  bach_size: 3\n", "PATH: unknown key 'train.bach_size'; known keys in 'train':")
    yaml("unknown nested key", "comm:\n  nccl:\n    rings: 2\n", "PATH: unknown key 'comm.nccl'")
    yaml("list for a value", "train:\n  epochs: [1, 2]\n", "PATH: train.epochs must be a single value (INT), got a list")
    yaml("null value", "train:\n  epochs:\n", "train.epochs must be a single value (INT), got a null")
    yaml("mapping for a value", "train:\n  lr: {value: 1}\n", "train.lr must be a single value (FLOAT), got a mapping")
    yaml("section given a value", "train: 3\n", "PATH: unknown key 'train'")
    yaml("list as a key", "? [a, b]\n: 1\n", "PATH: a list is used as a key; keys are plain names")
    yaml("mapping as a key", "train:\n  ? {x: 1}\n  : 2\n", "a mapping is used as a key in 'train'")
    yaml("key set twice", "train:\n  epochs: 2\n  epochs: 3\n", "PATH: train.epochs is set twice")
    yaml("word for a number", "train:\n  epochs: two\n", "PATH: train.epochs must be an integer in [1, 1073741824], got 'two'")
    yaml("negative batch", "train:\n  batch_size: -4\n", "PATH: train.batch_size must be an integer in [1, 1073741824], got '-4'")
    yaml("yes for a boolean", "data:\n  synthetic: yes\n", "PATH: data.synthetic must be true or false, got 'yes'")
    yaml("unknown enum", "train:\n  optimizer: adagrad\n", "must be one of adadelta|sgd|adam|adamw, got 'adagrad'")
    yaml("bad milestone list", "train:\n  lr_milestones: [30, x]\n", "PATH: train.lr_milestones must be a comma-separated list")
    yaml("tab indentation", "train:\n\tepochs: 2\n", "PATH: not valid YAML")
    yaml("binary garbage", b"\x00\xff\xfe\x01\x02garbage\x9c", "PATH:", mode="wb")
    yaml("cross-field conflict", "data:\n  synthetic: true\n  dir: /data\n",
         "and data.dir (from PATH) are both set")

    # --- dataset files (the mnist workload reads MNIST-format IDX files) ---------------------------
    def data(name, message, **files):
        path = mnist_dir(root, "data/" + name, **files)
        add(f"data: {name}", ["--data-dir", path, "--max-steps", "1", "--checkpoint=false"], DATA,
            message.replace("DIR", path))

    add("data: directory missing", ["--data-dir", os.path.join(root, "absent")], DATA,
        f"MNIST-format train files not found in data.dir '{root}/absent'")
    add("data: a file, not a directory", ["--data-dir", write(root, "data/plain-file", "x")], DATA,
        "MNIST-format train files not found in data.dir")
    data("labels missing", "MNIST-format train files not found", labels=False)
    data("test split missing", "MNIST-format t10k files not found", test_images=False)
    data("not IDX", "is not an IDX file: magic number 0x6e6f7420, expected 0x00000803", images=b"not an idx file")
    data("wrong element type", "has element type 0x0d, expected 0x08 (unsigned byte)", images=idx([2, 28, 28], kind=0x0D))
    data("float elements", "has element type 0x0e, expected 0x08", labels=idx([2], kind=0x0E))
    data("wrong dimensions", "has 2 dimensions, expected 3", images=idx([56, 28]))
    data("empty file", "is truncated: 0 bytes, shorter than the 4-byte magic number", images=b"")
    data("header cut short", "is truncated: header needs 16 bytes, file has 10", images=idx([2, 28, 28])[:10])
    data("payload cut short", "is truncated: header promises 1568 data bytes, file has 1000", images=idx([2, 28, 28])[:1016])
    data("payload too long", "is longer than its header says", labels=idx([2]) + b"\x01")
    data("dimensions overflow", "dimensions multiply beyond any file size", images=idx([4294967295] * 3, payload=b""))
    data("counts disagree", "holds 2 images but", labels=idx([3]))
    data("wrong image size", "holds 32x32 images, the mnist workload expects 28x28", images=idx([2, 32, 32]))
    data("label out of range", "holds label 12, expected classes 0..9", labels=idx([2], payload=bytes([3, 12])))
    data("no images", "loaded an empty dataset (0 train", images=idx([0, 28, 28]), labels=idx([0]))
    gz_dir = mnist_dir(root, "data/corrupt gzip", images=False)
    write(gz_dir, "train-images-idx3-ubyte.gz", b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"garbage", "wb")
    add("data: corrupt gzip", ["--data-dir", gz_dir, "--max-steps", "1"], DATA, "train-images-idx3-ubyte.gz")
    cut_dir = mnist_dir(root, "data/truncated gzip", images=False)
    write(cut_dir, "train-images-idx3-ubyte.gz", gzip.compress(idx([2, 28, 28]))[:40], "wb")
    add("data: truncated gzip", ["--data-dir", cut_dir, "--max-steps", "1"], DATA, "truncated")
    add("data: not IDX, on 2 ranks", ["--data-dir", os.path.join(root, "data/not IDX")], DATA,
        "is not an IDX file", ranks=2)

    # --- citation graphs (the gcn workload reads LINQS .content and .cites files) ------------------
    def graph(name, content, cites, message):
        path = os.path.join(root, "graphs", name)
        write(path, "g.content", content)
        write(path, "g.cites", cites)
        add(f"graph: {name}", ["--workload", "gcn", "--data-dir", path, "--epochs", "1", "--checkpoint=false"], DATA,
            message.replace("DIR", path))

    papers = "".join(f"p{i}\t{i % 2}\t{(i + 1) % 2}\t{'AI' if i % 2 else 'ML'}\n" for i in range(6))
    graph("dangling citation", papers, "p0\tp1\np1\tp77\n", "DIR/g.cites line 2: paper 'p77' is not in DIR/g.content")
    graph("label missing", papers + "p9\t1\t0\n", "p0\tp1\n",
          "DIR/g.content line 7: paper 'p9' has 1 features, expected 2 (as on line 1); its last field, '0', is read as its class label")
    graph("row too wide", papers.replace("p3\t1\t0", "p3\t1\t0\t1"), "p0\tp1\n",
          "DIR/g.content line 4: paper 'p3' has 3 features, expected 2")
    graph("too few nodes for the split", papers, "p0\tp1\n", "has 3 nodes, fewer than the 20 labelled training nodes per class")
    one_class = "".join(f"p{i}\t{i % 2}\t{(i + 1) % 2}\tML\n" for i in range(6))
    graph("one class", one_class, "p0\tp1\n", "DIR/g.content' labels all its 6 papers with one class, 'ML'; a classifier needs at least two")
    # A byte order mark is stripped, so this graph gets as far as the split (the next check), not a bad id.
    graph("byte order mark", "\ufeff" + papers, "p0\tp1\n", "has 3 nodes, fewer than the 20 labelled training nodes per class")
    add("alexnet below its smallest image", ["--workload", "alexnet", "--synthetic", "--image-size", "62", "--epochs", "1"],
        CONFIG, "data.image_size 62 is too small for the alexnet model, whose pooling layers need images of at least 63 px")
    # 4 px shrink to 1x1 maps after the stem: with one image per rank a BatchNorm sees one value per channel,
    # whose variance ATen would turn into a NaN running variance (and a NaN test loss blamed on the lr). It is
    # found in the first forward, on every rank alike (their batches have the same sizes), so on one rank here.
    add("resnet50 at 4 px, one image per rank", ["--workload", "resnet50", "--synthetic", "--image-size", "4",
                                                 "--batch-size", "1", "--epochs", "1", "--max-steps", "2",
                                                 "--checkpoint=false"],
        CONFIG, "BatchNorm(64) in training got input [1, 64, 1, 1]: one value per channel")
    add("graph: no such folder", ["--workload", "gcn", "--data-dir", f"{root}/no-graph"], DATA,
        f"the citation graph directory '{root}/no-graph' does not exist")
    # A CIFAR-10 folder whose first batch file is a directory (an archive unpacked one level too deep).
    os.makedirs(os.path.join(root, "cifar-nested", "data_batch_1.bin"), exist_ok=True)
    add("cifar10: a batch name that is a directory", ["--workload", "cifar10", "--data-dir",
                                                      os.path.join(root, "cifar-nested")], DATA,
        f"CIFAR-10 batch file '{os.path.join(root, 'cifar-nested', 'data_batch_1.bin')}' is a directory, not one of "
        "the dataset's binary files")
    os.makedirs(os.path.join(root, "images", "cat"), exist_ok=True)
    os.makedirs(os.path.join(root, "images", "dog"), exist_ok=True)
    add("image folder without images", ["--workload", "image-classifier", "--data-dir", os.path.join(root, "images"),
                                         "--epochs", "1", "--checkpoint=false"], DATA,
        f"class folder '{os.path.join(root, 'images', 'cat')}' of the train split holds no .jpg, .jpeg or .png files")

    # An image folder with bad files among good ones: the start-up check names each before training.
    from PIL import Image  # noqa: PLC0415 - Debian's python3-pil, as make_vision_datasets.py uses
    folder = os.path.join(root, "bad-images")
    for cls in ("cat", "dog"):
        os.makedirs(os.path.join(folder, cls), exist_ok=True)
        for i in range(6):
            Image.new("RGB", (40, 30), (40 * i, 100 if cls == "cat" else 200, 50)).save(os.path.join(folder, cls, f"{i}.jpg"))
    write(folder, "cat/empty.jpg", "")
    write(folder, "dog/notes.png", "a text file with an image's name")
    huge = bytearray(open(os.path.join(folder, "cat", "0.jpg"), "rb").read())
    sof = huge.index(b"\xff\xc0")  # the frame header: height and width, 16 bits each, 5 bytes in
    huge[sof + 5:sof + 9] = (60000).to_bytes(2, "big") * 2
    write(folder, "dog/huge.jpg", bytes(huge), "wb")
    image_args = ["--workload", "image-classifier", "--data-dir", folder, "--epochs", "1", "--checkpoint=false",
                  "--image-size", "32", "--val-fraction", "0.3"]
    add("image folder with bad files", image_args, DATA, f"3 of the 15 image files of image folder {folder} (")
    add("image folder with bad files, the empty one", image_args, DATA,
        f"'{folder}/cat/empty.jpg' is neither a JPEG nor a PNG image (the file is empty)")
    add("image folder with bad files, named", image_args, DATA,
        f"JPEG image '{folder}/dog/huge.jpg' claims 60000x60000 pixels; expected a positive size of at most 2^28 pixels")
    # An interrupted copy: a whole header, no end. Found at start-up, not when a step reads it.
    cut_folder = os.path.join(root, "cut-images")
    shutil.copytree(folder, cut_folder, ignore=shutil.ignore_patterns("empty.jpg", "notes.png", "huge.jpg"))
    whole = open(os.path.join(cut_folder, "dog", "1.jpg"), "rb").read()
    write(cut_folder, "dog/1.jpg", whole[:len(whole) // 2], "wb")
    add("image folder with a copy cut short", image_args[:3] + [cut_folder] + image_args[4:], DATA,
        f"image '{cut_folder}/dog/1.jpg' is cut short: it ends without its end-of-image marker (FF D9) (an interrupted copy?)")
    # A link in a class folder back to the folder of all classes: dog's images would be labelled cat.
    link_folder = os.path.join(root, "linked-images")
    shutil.copytree(cut_folder, link_folder)
    write(link_folder, "dog/1.jpg", whole, "wb")
    os.symlink("..", os.path.join(link_folder, "cat", "all"))
    add("image folder with a link to all the classes", image_args[:3] + [link_folder] + image_args[4:], DATA,
        f"'{link_folder}/cat/all' in class folder '{link_folder}/cat' leads to '{link_folder}', the folder of all the "
        "classes (or above it): its images would be labelled with this class too")

    # --- checkpoint files (`checkpoint` is a real one, of an sgd run) -------------------------------
    def ckpt(name, files, message, extra=(), status=DATA, ranks=1):
        path = os.path.join(root, "ck", name)
        os.makedirs(path, exist_ok=True)
        for file_name, content in files.items():
            if isinstance(content, str) and os.path.isfile(content):
                shutil.copy(content, os.path.join(path, file_name))
            else:
                write(path, file_name, content, "wb" if isinstance(content, bytes) else "w")
        add(f"checkpoint: {name}", FAST + ["--resume", "--checkpoint-dir", path, "--optimizer", "sgd"] + list(extra),
            status, message.replace("DIR", path), ranks)

    good = {"checkpoint-epoch-000001.safetensors": checkpoint}
    with open(checkpoint, "rb") as f:
        real = f.read()
    header, data = split_safetensors(real)
    damaged = "every checkpoint in checkpoint.dir 'DIR' is damaged:\n  DIR/checkpoint-epoch-000001.safetensors: "
    one = "checkpoint-epoch-000001.safetensors"
    ckpt("text file", {one: "not a checkpoint"}, damaged + "its header would be ")
    ckpt("empty file", {one: b""}, damaged + "it is 0 bytes, shorter than a checkpoint's 8-byte header length")
    ckpt("cut in half", {one: real[:len(real) // 2]}, damaged + "tensor '")
    ckpt("gzip file", {one: gzip.compress(b"x" * 100)}, damaged + "its header would be ")
    flipped = bytearray(real)
    flipped[len(real) // 2] ^= 0x10  # inside the data: one tensor's bytes
    ckpt("one bit flipped", {one: bytes(flipped)}, "' fails its CRC-32 check (damaged)")
    # Crafted with every CRC valid: what a hostile or buggy writer could make.
    largest = max((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"][1] - header[n]["data_offsets"][0])
    tensors = tensors_of(header, data)
    ckpt("a tensor's shape that its bytes do not fill", {one: crafted(header, tensors, shape={largest: [3]})},
         damaged + f"tensor '{largest}' of shape [3] and dtype F32 takes ")
    deep = b'{"a":' + b"[" * 450_000 + b"]" * 450_000 + b"}"
    ckpt("a header 900 kB deep", {one: struct.pack("<Q", len(deep)) + deep},
         damaged + "its header nests deeper than 3 levels")
    ckpt("a header naming a tensor twice", {one: raw_file(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                                          b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', 8)},
         damaged + "its header names 'a' twice")
    ckpt("an unknown dtype", {one: crafted(header, tensors, dtype={largest: "F8_E4M3"})},
         f"tensor '{largest}' has dtype \"F8_E4M3\", which dtrain does not read")
    state = next(n for n in header if n.startswith("optimizer.") and n.endswith(".momentum_buffer"))
    ckpt("optimizer state of another shape", {one: crafted(header, tensors, reshape={state: 1})},
         damaged + f"optimizer state {state} is ")
    stray = dict(tensors)
    stray["optimizer.model.nothing.momentum_buffer"] = stray.pop(state)
    ckpt("optimizer state for no parameter", {one: crafted(header, stray)},
         damaged + "it holds optimizer.model.nothing.momentum_buffer, which no parameter's optimizer has")
    ckpt("a zero-size tensor with an offset past the data", {one: raw_file(
        b'{"a":{"dtype":"F32","shape":[0],"data_offsets":[99,99]}}', 0)},
         "tensor 'a' has data_offsets [99,99], outside the 0 bytes of data")
    ckpt("safetensors from PyTorch, not a checkpoint", {one: raw_file(
        b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', 4)},
         damaged + "it is a safetensors file but not a dtrain checkpoint")
    ckpt("crafted newer file beside a whole one: the whole one resumes", {
        one: checkpoint, "checkpoint-epoch-000002.safetensors": crafted(header, tensors, reshape={state: 1})},
         "passed over a damaged checkpoint, DIR/checkpoint-epoch-000002.safetensors: ", ["--epochs", "2"], status=0)
    # dtrain 0.1's checkpoints (a LibTorch zip) are named, with the one-time converter, and not passed over.
    ckpt("format 4, newest", {one: checkpoint, "checkpoint-epoch-000002.pt": b"PK\x03\x04" + b"\0" * 60},
         "checkpoint 'DIR/checkpoint-epoch-000002.pt' is of format 4 (a LibTorch archive of dtrain 0.1), which this "
         "dtrain does not read. Convert it once", ["--epochs", "3"])
    ckpt("named for another position than it records", {"checkpoint-epoch-000099.safetensors": checkpoint},
         damaged.replace("000001", "000099") + "its name says epoch 99 (its end) but it records epoch 1 (its end)")
    ckpt("other optimizer", good, "holds sgd optimizer state, this run uses adadelta", ["--optimizer", "adadelta"])
    ckpt("epoch number overflows", {"checkpoint-epoch-99999999999999999999.safetensors": "x"},
         "has an epoch number too large for any run")
    ckpt("corrupt, on 2 ranks", {"checkpoint-epoch-000001.safetensors": "not a checkpoint"}, damaged + "its header would be", ranks=2)
    ckpt("other optimizer, on 2 ranks", good, "holds sgd optimizer state, this run uses adadelta",
         ["--optimizer", "adadelta"], ranks=2)
    add("checkpoint: directory is a file", FAST + ["--resume", "--checkpoint-dir", write(root, "ck/a-file", "x")], CONFIG,
        "checkpoint.dir (from --checkpoint-dir) '" + root + "/ck/a-file' exists but is not a directory")
    add("checkpoint: directory under a file", FAST + ["--checkpoint-dir", root + "/ck/a-file/sub"], CONFIG,
        "cannot create checkpoint.dir (from --checkpoint-dir) '" + root + "/ck/a-file/sub'")
    # A file named like a checkpoint that is far larger than this model's checkpoint can be (a 3 GB sparse
    # file once took 31 s and 4.6 GB to pass over): refused from its size, without being read.
    os.makedirs(root + "/ck-huge", exist_ok=True)
    with open(root + "/ck-huge/checkpoint-epoch-000001.safetensors", "wb") as f:
        f.truncate(3 << 30)
    add("checkpoint: a 3 GB sparse file", FAST + ["--resume", "--checkpoint-dir", root + "/ck-huge"], DATA,
        "checkpoint-epoch-000001.safetensors: it holds 3221225472 bytes, more than the ")
    add("log: directory is a file", FAST + ["--log-dir", root + "/ck/a-file"], CONFIG,
        "log.dir (from --log-dir) '" + root + "/ck/a-file' exists but is not a directory")
    add("log: directory in /proc", FAST + ["--log-dir", "/proc/dtrain-logs"], CONFIG,
        "cannot create log.dir (from --log-dir) '/proc/dtrain-logs' in '/proc'")
    return c


def run_case(case, dtrain, mpiexec, mpi_flags, workdir):
    name, args, status, message, ranks, env = case
    command = [dtrain] + CPU + args
    if ranks > 1:
        command = [mpiexec, "-np", str(ranks)] + mpi_flags + command
    try:
        done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, errors="replace", timeout=60,
                              env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        return f"{name}: no exit within 60 s (hang)"
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if "dtrain: error:" in line]
    problems = []
    if done.returncode != status:
        problems.append(f"exit {done.returncode}, expected {status}")
    if message not in output:
        problems.append(f"no {message!r} in the output")
    expected_errors = 0 if status == 0 else 1  # a bad input dtrain gets past (exit 0) warns, and trains on
    if len(errors) != expected_errors:
        problems.append(f"{len(errors)} 'dtrain: error:' lines, expected {expected_errors}")
    for word in FORBIDDEN:
        if word in output:
            problems.append(f"the output contains {word!r}")
    if ranks > 1 and "MPI_ABORT" in output:
        problems.append("the job was aborted although every rank met the same error")
    if problems:
        return f"{name}: " + "; ".join(problems) + "\n    " + "\n    ".join(output.strip().splitlines()[-6:])
    return None


def main():
    dtrain, mpiexec = sys.argv[1], sys.argv[2]
    mpi_flags = sys.argv[3].split() if len(sys.argv) > 3 else []
    allow_root_mpi()
    with tempfile.TemporaryDirectory() as root:
        workdir = os.path.join(root, "cwd")
        os.makedirs(workdir)
        # One real checkpoint to derive the broken ones from.
        made = subprocess.run([dtrain] + CPU + FAST + ["--optimizer", "sgd",
                                                       "--checkpoint-dir", os.path.join(root, "made"), "--log-dir",
                                                       os.path.join(root, "made-logs")],
                              capture_output=True, text=True, timeout=300)
        checkpoint = os.path.join(root, "made", "checkpoint-epoch-000001.safetensors")
        if made.returncode != 0 or not os.path.isfile(checkpoint):
            print("bad_inputs: could not make the reference checkpoint:\n" + made.stdout + made.stderr)
            return 1
        corpus = cases(root, checkpoint)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda case: run_case(case, dtrain, mpiexec, mpi_flags, workdir), corpus))
        failures = [r for r in results if r]
        for case, result in zip(corpus, results):
            print(("FAIL " + result) if result else f"ok   {case[0]} (exit {case[2]})")
        # The run logs of the cases that got as far as writing one (their error records) match the schema.
        schema = subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                                  "support", "check_run_logs.py"),
                                 "--expect", "error", root], capture_output=True, text=True)
        print(schema.stdout.strip())
        if schema.returncode != 0:
            failures.append("run logs that do not match runtime/log/run_log.schema.json")
        print(f"bad_inputs: {len(corpus)} cases, {len(failures)} failed")
        return 1 if failures else 0


sys.exit(main())
