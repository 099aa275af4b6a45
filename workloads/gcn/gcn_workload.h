// The gcn workload: Kipf & Welling's two-layer GCN (workloads/gcn/gcn.h) classifying the papers of a
// citation graph (Cora, CiteSeer in the LINQS format) under the Planetoid split, data parallel over the
// labelled training nodes: every rank holds the whole graph, each takes its shard of the training nodes.
#pragma once

#include <memory>

#include "runtime/data/citation_graph.h"
#include "runtime/train/workload.h"

namespace dtrain {

// The paper's settings by default; tests change them (dropout 0 for the equivalence test, small graphs).
struct GcnOptions {
  int64_t hidden = 16;
  double dropout = 0.5;
  int64_t train_per_class = 20;  // the Planetoid split
  int64_t val_nodes = 500;
  int64_t test_nodes = 1000;
  GraphSpec synthetic;  // the graph --synthetic generates (Cora's shape)
};

std::unique_ptr<Workload> make_gcn_workload(GcnOptions options = {});

}  // namespace dtrain
