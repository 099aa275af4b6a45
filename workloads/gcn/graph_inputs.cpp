#include "workloads/gcn/graph_inputs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/data/distributed_sampler.h"
#include "runtime/util/error.h"

namespace dtrain {

NodeSplit planetoid_split(const at::Tensor& labels, int64_t num_classes, int64_t per_class, int64_t val, int64_t test,
                          uint64_t seed) {
  const int64_t n = labels.size(0);
  const at::Tensor cpu_labels = labels.to(at::kCPU, at::kLong).contiguous();
  const int64_t* label = cpu_labels.data_ptr<int64_t>();
  // dtrain's own permutation (the samplers'), the same on every build: torch's randperm has changed
  // between versions.
  const std::vector<int64_t> order = seeded_permutation(n, seed ^ 0x6a09e667f3bcc909ULL);
  std::vector<int64_t> taken(static_cast<size_t>(num_classes), 0);
  std::vector<int64_t> train, rest;
  for (int64_t node : order) {
    const int64_t c = label[node];
    if (taken[static_cast<size_t>(c)] < per_class) {
      ++taken[static_cast<size_t>(c)];
      train.push_back(node);
    } else {
      rest.push_back(node);
    }
  }
  for (int64_t c = 0; c < num_classes; ++c) {
    if (taken[static_cast<size_t>(c)] < per_class) {
      throw DataError("class " + std::to_string(c) + " has " + std::to_string(taken[static_cast<size_t>(c)]) +
                      " nodes, fewer than the " + std::to_string(per_class) + " labelled training nodes per class the split takes");
    }
  }
  if (static_cast<int64_t>(rest.size()) < val + test) {
    throw DataError("the graph has " + std::to_string(n) + " nodes: after " + std::to_string(train.size()) +
                    " training nodes, too few for " + std::to_string(val) + " validation and " + std::to_string(test) +
                    " test nodes");
  }
  auto sorted_tensor = [](std::vector<int64_t> nodes) {
    std::sort(nodes.begin(), nodes.end());
    return at::from_blob(nodes.data(), {static_cast<int64_t>(nodes.size())}, at::kLong).clone();
  };
  NodeSplit split;
  split.train = sorted_tensor(train);
  split.val = sorted_tensor({rest.begin(), rest.begin() + val});
  split.test = sorted_tensor({rest.begin() + val, rest.begin() + val + test});
  return split;
}

at::Tensor normalized_adjacency(const at::Tensor& edges, int64_t num_nodes) {
  const at::Tensor e = edges.to(at::kCPU, at::kLong);
  const at::Tensor loops = at::arange(num_nodes, at::kLong).unsqueeze(0).expand({2, num_nodes});
  // Both directions and the self-loops; coalescing merges duplicates, whose summed values are reset to 1.
  const at::Tensor index = at::cat({e, e.flip({0}), loops}, 1);
  at::Tensor a = at::sparse_coo_tensor(index, at::ones({index.size(1)}, at::kFloat), {num_nodes, num_nodes}).coalesce();
  const at::Tensor ij = a.indices();
  const at::Tensor degree = at::zeros({num_nodes}, at::kFloat).index_add_(0, ij[0], at::ones({ij.size(1)}, at::kFloat));
  const at::Tensor scale = degree.rsqrt();
  const at::Tensor values = scale.index_select(0, ij[0]) * scale.index_select(0, ij[1]);
  return at::sparse_coo_tensor(ij, values, {num_nodes, num_nodes}).coalesce();
}

at::Tensor row_normalized(const at::Tensor& features) {
  const at::Tensor sums = features.sum(1, /*keepdim=*/true);
  return features / at::where(sums == 0, at::ones_like(sums), sums);
}

}  // namespace dtrain
