#include "runtime/train/optimizer_copy.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <vector>

#include "runtime/train/adadelta.h"

namespace dtrain {
namespace {

// An undefined tensor (Adam's max_exp_avg_sq without amsgrad) stays undefined.
at::Tensor copy_defined(const at::Tensor& t, const TensorCopy& copy) { return t.defined() ? copy(t) : t; }

void copy_tensors(torch::optim::SGDParamState& s, const TensorCopy& copy) {
  s.momentum_buffer(copy_defined(s.momentum_buffer(), copy));
}

template <class AdamState>
void copy_adam_tensors(AdamState& s, const TensorCopy& copy) {
  s.exp_avg(copy_defined(s.exp_avg(), copy));
  s.exp_avg_sq(copy_defined(s.exp_avg_sq(), copy));
  s.max_exp_avg_sq(copy_defined(s.max_exp_avg_sq(), copy));
}
void copy_tensors(torch::optim::AdamParamState& s, const TensorCopy& copy) { copy_adam_tensors(s, copy); }
void copy_tensors(torch::optim::AdamWParamState& s, const TensorCopy& copy) { copy_adam_tensors(s, copy); }

void copy_tensors(AdadeltaParamState& s, const TensorCopy& copy) {
  s.square_avg(copy_defined(s.square_avg(), copy));
  s.acc_delta(copy_defined(s.acc_delta(), copy));
}

template <class Optimizer, class Options, class State>
std::unique_ptr<torch::optim::Optimizer> copy_as(const torch::optim::Optimizer& optimizer, const TensorCopy& copy) {
  if (dynamic_cast<const Optimizer*>(&optimizer) == nullptr) return nullptr;
  // Copying a group clones its options; the parameters are the same tensors, so the state's keys (which
  // name the parameters) hold for the copy too.
  const std::vector<torch::optim::OptimizerParamGroup> groups(optimizer.param_groups().begin(),
                                                              optimizer.param_groups().end());
  auto result = std::make_unique<Optimizer>(groups, static_cast<const Options&>(optimizer.defaults()));
  for (const auto& [key, state] : optimizer.state()) {
    auto state_copy = std::make_unique<State>(static_cast<const State&>(*state));
    copy_tensors(*state_copy, copy);
    result->state()[key] = std::move(state_copy);
  }
  return result;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> copy_optimizer(const torch::optim::Optimizer& optimizer,
                                                        const TensorCopy& copy) {
  using namespace torch::optim;
  if (auto r = copy_as<SGD, SGDOptions, SGDParamState>(optimizer, copy)) return r;
  if (auto r = copy_as<AdamW, AdamWOptions, AdamWParamState>(optimizer, copy)) return r;
  if (auto r = copy_as<Adam, AdamOptions, AdamParamState>(optimizer, copy)) return r;
  if (auto r = copy_as<Adadelta, AdadeltaOptions, AdadeltaParamState>(optimizer, copy)) return r;
  return nullptr;
}

int optimizer_state_tensors(const torch::optim::Optimizer& optimizer) {
  using namespace torch::optim;
  if (dynamic_cast<const SGD*>(&optimizer) != nullptr) {
    return static_cast<const SGDOptions&>(optimizer.defaults()).momentum() != 0 ? 1 : 0;
  }
  if (dynamic_cast<const AdamW*>(&optimizer) != nullptr) {
    return static_cast<const AdamWOptions&>(optimizer.defaults()).amsgrad() ? 3 : 2;
  }
  if (dynamic_cast<const Adam*>(&optimizer) != nullptr) {
    return static_cast<const AdamOptions&>(optimizer.defaults()).amsgrad() ? 3 : 2;
  }
  if (dynamic_cast<const Adadelta*>(&optimizer) != nullptr) return 2;
  return 0;
}

}  // namespace dtrain
