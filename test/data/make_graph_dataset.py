#!/usr/bin/python3
"""Writes a citation graph with communities in the LINQS text format the gcn workload reads (Cora's and
CiteSeer's published format):

  NAME.content   <paper id>\t<word 0/1>...\t<class label>    one paper per line
  NAME.cites     <cited paper id>\t<citing paper id>         one citation per line

Papers cite mostly within their class (homophily 0.8, as Cora) and favour their class's words, so a GCN
learns the classes from a few labelled nodes. Ids are strings, as CiteSeer's are.
Usage: make_graph_dataset.py OUT_DIR [--name cora] [--nodes 1800] [--words 300] [--classes 4] [--seed 1]
"""
import argparse
import os
import random

CLASS_NAMES = ["Case_Based", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods",
               "Reinforcement_Learning", "Rule_Learning", "Theory"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--name", default="cora")
    parser.add_argument("--nodes", type=int, default=1800)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    ids = [f"paper{rng.randrange(10**6):06d}-{i}" for i in range(args.nodes)]
    labels = [i % args.classes for i in range(args.nodes)]
    rng.shuffle(labels)
    members = [[i for i in range(args.nodes) if labels[i] == c] for c in range(args.classes)]
    vocabulary = args.words // args.classes
    with open(os.path.join(args.out, args.name + ".content"), "w") as f:
        for i in range(args.nodes):
            words = [0] * args.words
            for _ in range(12):
                own = rng.random() < 0.5
                words[labels[i] * vocabulary + rng.randrange(vocabulary) if own else rng.randrange(args.words)] = 1
            f.write("\t".join([ids[i]] + [str(w) for w in words] + [CLASS_NAMES[labels[i]]]) + "\n")
    with open(os.path.join(args.out, args.name + ".cites"), "w") as f:
        for i in range(args.nodes):
            for _ in range(2):
                j = rng.choice(members[labels[i]]) if rng.random() < 0.8 else rng.randrange(args.nodes)
                if j != i:
                    f.write(f"{ids[j]}\t{ids[i]}\n")


if __name__ == "__main__":
    main()
