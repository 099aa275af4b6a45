#!/usr/bin/python3
"""Per-epoch training time of dtrain's gcn workload against PyTorch eager on the same graph, CPU.

The GCN trains on the whole graph in every step (one step per epoch), so an epoch takes milliseconds and
any host overhead of the training loop shows. The peer is the model as its authors compute it, in
PyTorch eager: row-normalised features held sparse with dropout on their non-zero values (the paper's
code; dense features spend 90% of a CPU step drawing dropout masks), the normalised adjacency as a
torch.sparse COO tensor multiplied with torch.sparse.mm, dropout 0.5, Adam 0.01 with weight decay 5e-4
on the first layer, the loss over the same 140 labelled nodes; one process and the same intra-op
threads. dtrain's figure is the median train_s of its epochs (from its run log, the first
--warmup epochs left out); the peer's the median of the same loop timed in Python. Runs alternate, --reps
times (ratio > 1: dtrain is faster).

The graph is a generated one of Cora's shape in the LINQS format (test/data/make_graph_dataset.py), or
the real one with --data-dir (scripts/fetch_data.sh cora).

Usage: bench/gcn_step_bench.py [--dtrain build/dtrain] [--data-dir DIR] [--epochs 100] [--reps 3] [--threads 1]
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
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def read_linqs(data_dir):
    content = glob.glob(os.path.join(data_dir, "*.content"))
    if len(content) != 1:
        sys.exit(f"gcn_step_bench: expected one NAME.content in {data_dir}, found {content}")
    ids, features, labels = {}, [], []
    with open(content[0]) as f:
        for line in f:
            fields = line.split()
            if fields:
                ids[fields[0]] = len(ids)
                features.append([float(v) for v in fields[1:-1]])
                labels.append(fields[-1])
    classes = sorted(set(labels))
    edges = []
    with open(content[0][:-len(".content")] + ".cites") as f:
        for line in f:
            fields = line.split()
            if len(fields) == 2 and fields[0] in ids and fields[1] in ids:
                edges.append((ids[fields[0]], ids[fields[1]]))
    x = torch.tensor(features)
    y = torch.tensor([classes.index(label) for label in labels])
    return x, y, torch.tensor(edges).t(), len(classes)


def normalized_adjacency(edges, n):
    loops = torch.arange(n).repeat(2, 1)
    index = torch.cat([edges, edges.flip(0), loops], 1)
    a = torch.sparse_coo_tensor(index, torch.ones(index.size(1)), (n, n)).coalesce()
    ij = a.indices()
    degree = torch.zeros(n).index_add_(0, ij[0], torch.ones(ij.size(1)))
    scale = degree.rsqrt()
    return torch.sparse_coo_tensor(ij, scale[ij[0]] * scale[ij[1]], (n, n)).coalesce()


class GraphConv(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(n_in, n_out))
        self.bias = torch.nn.Parameter(torch.zeros(n_out))
        torch.nn.init.xavier_uniform_(self.weight)

    def forward(self, adjacency, x):
        return torch.sparse.mm(adjacency, torch.mm(x, self.weight)) + self.bias


class Gcn(torch.nn.Module):
    def __init__(self, n_in, hidden, classes):
        super().__init__()
        self.conv1 = GraphConv(n_in, hidden)
        self.conv2 = GraphConv(hidden, classes)

    def forward(self, x, adjacency):
        # The same indices, still sorted: marked coalesced, so that no step sorts them again.
        h = torch._sparse_coo_tensor_unsafe(x.indices(), F.dropout(x.values(), 0.5, self.training), x.shape)._coalesced_(True)
        h = F.relu(self.conv1(adjacency, h))
        h = F.dropout(h, 0.5, self.training)
        return F.log_softmax(self.conv2(adjacency, h), 1)


def peer_epoch_s(graph, epochs, warmup):
    x, y, edges, classes = graph
    torch.manual_seed(1)
    x = (x / x.sum(1, keepdim=True).clamp(min=1e-12)).to_sparse().coalesce()
    adjacency = normalized_adjacency(edges, x.size(0))
    # 20 labelled nodes per class, as the Planetoid split takes (which ones does not change the time).
    train = torch.cat([(y == c).nonzero().flatten()[:20] for c in range(classes)])
    model = Gcn(x.shape[1], 16, classes)
    optimizer = torch.optim.Adam([{"params": [model.conv1.weight], "weight_decay": 5e-4},
                                  {"params": [model.conv1.bias, model.conv2.weight, model.conv2.bias], "weight_decay": 0}],
                                 lr=0.01)
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        model.train()
        optimizer.zero_grad()
        loss = F.nll_loss(model(x, adjacency)[train], y[train])
        loss.backward()
        optimizer.step()
        loss.item()  # the example prints its loss each epoch
        times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:])


def dtrain_epoch_s(args, data_dir, tmp):
    logs = tempfile.mkdtemp(dir=tmp)
    cmd = [args.dtrain, "--workload", "gcn", "--data-dir", data_dir, "--epochs", str(args.epochs), "--threads",
           str(args.threads), "--checkpoint=false", "--log-dir", logs, "--progress", "off", "--device", "cpu"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"gcn_step_bench: {' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
    with open(glob.glob(os.path.join(logs, "*", "events.jsonl"))[0]) as f:
        epochs = [e for e in map(json.loads, f) if e.get("event") == "epoch_end"]
    return statistics.median(e["train_s"] for e in epochs[args.warmup:]), epochs[-1]["test_accuracy"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtrain", default="build/dtrain")
    parser.add_argument("--data-dir", help="a LINQS graph (default: a generated one of Cora's shape)")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="dtrain-gcn-") as tmp:
        data_dir = args.data_dir
        if not data_dir:
            data_dir = os.path.join(tmp, "graph")
            subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "test", "data", "make_graph_dataset.py"), data_dir,
                            "--nodes", "2708", "--words", "1433", "--classes", "7"], check=True)
        graph = read_linqs(data_dir)
        dtrain_s, peer_s, accuracy = [], [], None
        for rep in range(args.reps):
            seconds, accuracy = dtrain_epoch_s(args, data_dir, tmp)
            dtrain_s.append(seconds)
            peer_s.append(peer_epoch_s(graph, args.epochs, args.warmup))
            print(f"rep {rep + 1}/{args.reps}: dtrain {dtrain_s[-1] * 1e3:.2f} ms, pytorch {peer_s[-1] * 1e3:.2f} ms per epoch",
                  file=sys.stderr)
    x, _, edges, classes = graph
    result = {"machine": platform.node(), "cpus": os.cpu_count(), "threads": args.threads, "torch": torch.__version__,
              "nodes": x.size(0), "features": x.size(1), "citations": edges.size(1), "classes": classes,
              "epochs": args.epochs, "dtrain_epoch_ms": statistics.median(dtrain_s) * 1e3,
              "pytorch_epoch_ms": statistics.median(peer_s) * 1e3, "dtrain_final_test_accuracy": accuracy}
    result["ratio_pytorch_over_dtrain"] = result["pytorch_epoch_ms"] / result["dtrain_epoch_ms"]
    print(f"gcn on {x.size(0)} nodes, {x.size(1)} features, {args.threads} thread(s): dtrain "
          f"{result['dtrain_epoch_ms']:.2f} ms, PyTorch eager (torch {torch.__version__}) {result['pytorch_epoch_ms']:.2f} ms "
          f"per training epoch; ratio {result['ratio_pytorch_over_dtrain']:.2f} (> 1: dtrain faster)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
