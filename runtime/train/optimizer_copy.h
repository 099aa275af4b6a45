// A copy of an optimizer whose state tensors are copies too, for a checkpoint written behind training:
// the copy serialises exactly as the original would at the moment it was taken, while the original
// goes on updating its state in place.
#pragma once

#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

namespace dtrain {

using TensorCopy = std::function<at::Tensor(const at::Tensor&)>;

// The copy of `optimizer` (SGD, Adam, AdamW or dtrain's Adadelta): the same parameter groups and
// options, over the same parameters (which its serialisation names, never reads), with every state
// tensor replaced by `copy` of it. Null for another optimizer type.
std::unique_ptr<torch::optim::Optimizer> copy_optimizer(const torch::optim::Optimizer& optimizer,
                                                        const TensorCopy& copy);

// How many state tensors of its parameter's shape `optimizer` keeps per parameter once it has stepped
// (SGD with momentum 1, Adam and AdamW 2 or 3 with amsgrad, Adadelta 2; 0 for another type).
int optimizer_state_tensors(const torch::optim::Optimizer& optimizer);

}  // namespace dtrain
