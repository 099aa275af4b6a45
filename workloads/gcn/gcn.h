// The two-layer graph convolutional network of Kipf & Welling (ICLR 2017) for node classification:
//   log_softmax(Â · dropout(relu(Â · dropout(X) · W1 + b1)) · W2 + b2),  Â = D^-1/2 (A + I) D^-1/2,
// over the whole graph at once; forward(nodes) returns the log-probabilities of the given nodes only.
// Weights are Glorot-uniform and biases zero, as in the paper's code and PyTorch Geometric's GCNConv.
// The graph (features X, sparse Â) is held by the model but is not a parameter or buffer: it is not
// checkpointed or broadcast, and moves with the model (to()).
//
// X is held sparse, and dropout acts on its non-zero entries only, as the paper's code does: dropping a
// zero changes nothing, so the result is that of dense dropout, while a dense X (Cora: 2708 x 1433, 1.3%
// non-zero) spent 90% of each CPU step drawing its 3.9 million dropout masks (measured: 120 ms per epoch
// dense, 14 ms sparse, one core).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <optional>
#include <vector>

#include "runtime/train/workload.h"

namespace dtrain {

class GraphConvImpl : public torch::nn::Module {
 public:
  GraphConvImpl(int64_t in_features, int64_t out_features);
  // Â · (x · weight) + bias (x dense or sparse): the feature transform first, the cheaper order when it
  // narrows.
  at::Tensor forward(const at::Tensor& adjacency, const at::Tensor& x);

  at::Tensor weight;  // [in, out]
  at::Tensor bias;    // [out]
};
TORCH_MODULE(GraphConv);

class Gcn final : public Model {
 public:
  // features [N, F] (row-normalised), adjacency sparse [N, N] (normalized_adjacency()).
  Gcn(at::Tensor features, at::Tensor adjacency, int64_t hidden, int64_t num_classes, double dropout);

  at::Tensor forward(const at::Tensor& nodes) override;

  using Model::to;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

 private:
  // The graph, which is no parameter or buffer, follows the module; indices keep their integer type.
  void move_graph(std::optional<torch::Device> device, std::optional<torch::Dtype> dtype, bool non_blocking);

  at::Tensor feature_indices_;  // [2, nnz] of X, coalesced
  at::Tensor feature_values_;   // [nnz]
  std::vector<int64_t> feature_sizes_;
  at::Tensor adjacency_;
  GraphConv conv1_;
  GraphConv conv2_;
  double dropout_;
};

}  // namespace dtrain
