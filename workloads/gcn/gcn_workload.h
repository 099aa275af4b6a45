// The gcn workload: Kipf & Welling's two-layer GCN (workloads/gcn/gcn.h) classifying the papers of a
// citation graph (Cora, CiteSeer in the LINQS format) under the Planetoid split, data parallel over the
// labelled training nodes: every rank holds the whole graph, each takes its shard of the training nodes.
#pragma once

#include <memory>
#include <vector>

#include "runtime/config/config_fields.h"
#include "runtime/data/citation_graph.h"
#include "runtime/train/workload.h"
#include "workloads/registry.h"

namespace dtrain {

// The paper's network by default; tests change it (dropout 0 for the equivalence test, small graphs).
struct GcnOptions {
  int64_t hidden = 16;
  double dropout = 0.5;
  GraphSpec synthetic;  // the graph --synthetic generates (Cora's shape)
};

// The Planetoid split, the "gcn" section of the configuration (gcn.train_per_class, ...).
struct GcnSplitOptions {
  static constexpr const char* kSection = "gcn";
  int64_t train_per_class = 20;  // labelled training nodes of each class
  int64_t val_nodes = 500;       // held out (not trained on, not evaluated)
  int64_t test_nodes = 1000;
};

// The configuration fields of GcnSplitOptions.
std::vector<ConfigField> gcn_config_fields();

std::unique_ptr<Workload> make_gcn_workload(GcnOptions options = {});

// Adds "gcn".
void register_gcn_workloads(WorkloadRegistry& registry);

}  // namespace dtrain
