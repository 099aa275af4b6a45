#include "runtime/data/tensor_dataset.h"

#include <ATen/ATen.h>

namespace dtrain {
namespace {

at::Tensor normalise(const TensorDataset& data, at::Tensor raw) {
  if (!data.mean.defined()) return raw;
  at::Tensor x = raw.to(at::kFloat);
  if (data.value_scale != 1.0) x.div_(data.value_scale);
  return x.sub_(data.mean).div_(data.std);
}

}  // namespace

TensorDataset TensorDataset::to(const at::Device& device) const {
  TensorDataset moved = *this;
  for (at::Tensor* t : {&moved.inputs, &moved.targets, &moved.mean, &moved.std}) {
    if (t->defined()) *t = t->to(device);
  }
  return moved;
}

at::Tensor TensorDataset::gather_inputs(const at::Tensor& index) const {
  return normalise(*this, inputs.index_select(0, index));
}

at::Tensor TensorDataset::slice_inputs(int64_t begin, int64_t count) const {
  return normalise(*this, inputs.narrow(0, begin, count));
}

}  // namespace dtrain
