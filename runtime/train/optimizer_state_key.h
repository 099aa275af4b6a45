// The key under which torch::optim keeps a parameter's state: the TensorImpl's printed address (a
// string) up to LibTorch 1.x, the pointer itself from 2.0. Both are what the optimizers' save/load expect.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace dtrain {

template <typename Key>
Key optimizer_state_key(const at::Tensor& param) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << param.unsafeGetTensorImpl();
    return os.str();
  } else {
    return param.unsafeGetTensorImpl();
  }
}

// The key type of torch::optim::Optimizer's state map in this LibTorch.
using OptimizerStateKey =
    typename std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

}  // namespace dtrain
