#include "workloads/gcn/gcn.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/nn/init.h>

#include <utility>

namespace dtrain {

GraphConvImpl::GraphConvImpl(int64_t in_features, int64_t out_features) {
  weight = register_parameter("weight", at::empty({in_features, out_features}));
  bias = register_parameter("bias", at::zeros({out_features}));
  torch::nn::init::xavier_uniform_(weight);
}

at::Tensor GraphConvImpl::forward(const at::Tensor& adjacency, const at::Tensor& x) {
  // Products with a sparse operand run in fp32 whatever the run's precision: LibTorch has no bf16 or fp16
  // sparse-dense product on CUDA ("addmm_sparse_cuda" not implemented for 'BFloat16', seen on an H100),
  // and the sparse products are this model's whole cost, so 16-bit arithmetic would gain nothing here.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return at::mm(adjacency, at::mm(x, weight)) + bias;
}

Gcn::Gcn(at::Tensor features, at::Tensor adjacency, int64_t hidden, int64_t num_classes, double dropout)
    : feature_sizes_(features.sizes().vec()),
      adjacency_(std::move(adjacency)),
      conv1_(register_module("conv1", GraphConv(features.size(1), hidden))),
      conv2_(register_module("conv2", GraphConv(hidden, num_classes))),
      dropout_(dropout) {
  const at::Tensor sparse = (features.is_sparse() ? features : features.to_sparse()).coalesce();
  feature_indices_ = sparse.indices();
  feature_values_ = sparse.values();
}

at::Tensor Gcn::forward(const at::Tensor& nodes) {
  // The indices stay coalesced whatever dropout does to the values: no re-sorting per step.
  const at::Tensor x = at::_sparse_coo_tensor_unsafe(feature_indices_, at::dropout(feature_values_, dropout_, is_training()),
                                                     feature_sizes_)
                           ._coalesced_(true);
  at::Tensor h = at::relu(conv1_->forward(adjacency_, x));
  h = at::dropout(h, dropout_, is_training());
  h = conv2_->forward(adjacency_, h);
  return at::log_softmax(h.index_select(0, nodes), 1);
}

void Gcn::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  Model::to(device, dtype, non_blocking);
  move_graph(device, dtype, non_blocking);
}

void Gcn::to(torch::Dtype dtype, bool non_blocking) {
  Model::to(dtype, non_blocking);
  move_graph(std::nullopt, dtype, non_blocking);
}

void Gcn::to(torch::Device device, bool non_blocking) {
  Model::to(device, non_blocking);
  move_graph(device, std::nullopt, non_blocking);
}

void Gcn::move_graph(std::optional<torch::Device> device, std::optional<torch::Dtype> dtype, bool non_blocking) {
  auto move = [&](const at::Tensor& t, bool floating) {
    return t.to(device.value_or(t.device()), floating ? dtype.value_or(t.scalar_type()) : t.scalar_type(),
                non_blocking);
  };
  feature_indices_ = move(feature_indices_, false);
  feature_values_ = move(feature_values_, true);
  adjacency_ = move(adjacency_, true);
}

}  // namespace dtrain
