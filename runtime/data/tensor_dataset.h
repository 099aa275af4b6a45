// An in-memory dataset: inputs and integer targets as two tensors with the same first dimension.
// Batches are gathered with index_select, so there is no per-sample work on the hot path. Image data
// can stay in its compact stored form (uint8) and be normalised per batch as it is gathered.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace dtrain {

struct TensorDataset {
  at::Tensor inputs;   // [N, ...]: model-ready floats, or raw values normalised by `mean` and `std`
  at::Tensor targets;  // [N], int64 class indices
  // Optional. When set, a batch is (inputs / value_scale - mean) / std as float; mean and std broadcast
  // against one sample (e.g. [1, 1, 1], or [3, 1, 1] for per-channel image statistics).
  at::Tensor mean;
  at::Tensor std;
  double value_scale = 1.0;  // 255 for uint8 pixels

  int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }

  // The same dataset with every tensor on `device`, stored in its compact form: uploading once lets
  // batches be gathered on a GPU with no per-batch host copy.
  TensorDataset to(const at::Device& device) const;

  // Model-ready inputs of the samples at `index` (int64, on the inputs' device).
  at::Tensor gather_inputs(const at::Tensor& index) const;
  // Model-ready inputs of samples [begin, begin + count).
  at::Tensor slice_inputs(int64_t begin, int64_t count) const;
};

}  // namespace dtrain
