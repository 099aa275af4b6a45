#include "runtime/train/adadelta.h"

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <type_traits>

#include "runtime/train/optimizer_state.h"

namespace dtrain {

void AdadeltaOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, rho);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
}

void AdadeltaOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(rho);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
}

void AdadeltaParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(at::Tensor, square_avg);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(at::Tensor, acc_delta);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
}

void AdadeltaParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(square_avg);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(acc_delta);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
}

Adadelta::Adadelta(std::vector<at::Tensor> params, AdadeltaOptions defaults)
    : Optimizer({torch::optim::OptimizerParamGroup(std::move(params))},
                std::make_unique<AdadeltaOptions>(defaults)) {}

Adadelta::Adadelta(std::vector<torch::optim::OptimizerParamGroup> groups, AdadeltaOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<AdadeltaOptions>(defaults)) {}

at::Tensor Adadelta::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const AdadeltaOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      at::Tensor grad = p.grad();
      if (options.weight_decay() != 0) grad = grad.add(p, options.weight_decay());
      const auto key = optimizer_state_key(p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto state = std::make_unique<AdadeltaParamState>();
        state->square_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        state->acc_delta(at::zeros_like(p, at::MemoryFormat::Preserve));
        it = state_.emplace(key, std::move(state)).first;
      }
      auto& state = static_cast<AdadeltaParamState&>(*it->second);
      state.step(state.step() + 1);
      // Same operation order as torch.optim.Adadelta, so both produce the same rounding.
      at::Tensor& square_avg = state.square_avg();
      at::Tensor& acc_delta = state.acc_delta();
      square_avg.mul_(options.rho()).addcmul_(grad, grad, 1 - options.rho());
      const at::Tensor std = square_avg.add(options.eps()).sqrt_();
      at::Tensor delta = acc_delta.add(options.eps()).sqrt_();
      delta.div_(std).mul_(grad);
      acc_delta.mul_(options.rho()).addcmul_(delta, delta, 1 - options.rho());
      p.add_(delta, -options.lr());
    }
  }
  return loss;
}

void Adadelta::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<AdadeltaParamState, AdadeltaOptions>(archive, *this);
}

void Adadelta::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<AdadeltaParamState, AdadeltaOptions>(archive, *this);
}

}  // namespace dtrain
