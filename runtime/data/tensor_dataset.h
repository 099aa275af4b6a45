// An in-memory dataset: inputs and integer targets as two tensors with the same first dimension.
// Batches are gathered with index_select, so there is no per-sample work on the hot path.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace dtrain {

struct TensorDataset {
  at::Tensor inputs;   // [N, ...], ready for the model (normalised, float)
  at::Tensor targets;  // [N], int64 class indices

  int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

}  // namespace dtrain
