#include "runtime/train/device_optimizer.h"

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>

#include "runtime/train/adadelta.h"
#include "runtime/train/optimizer_state_key.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace {

// Makes `target` `value` where `take` is true (a 0-dim bool), or everywhere when `take` is undefined.
void commit(const at::Tensor& target, const at::Tensor& value, const at::Tensor& take) {
  if (take.defined()) {
    target.copy_(at::where(take, value, target));
  } else {
    target.copy_(value);
  }
}

// The optimizer's state object of `param`, created (empty) where the optimizer has none yet.
template <class State>
State& state_of(torch::optim::Optimizer& optimizer, const at::Tensor& param) {
  auto& map = optimizer.state();
  const OptimizerStateKey key = optimizer_state_key<OptimizerStateKey>(param);
  auto it = map.find(key);
  if (it == map.end()) it = map.emplace(key, std::make_unique<State>()).first;
  auto* state = dynamic_cast<State*>(it->second.get());
  if (state == nullptr) throw Error("an optimizer's parameter state is not of the class its optimizer keeps");
  return *state;
}

// Adam's and AdamW's state (the same fields in two classes): moments made now, the step count read.
template <class State>
torch::optim::OptimizerParamState* adam_state(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                                              int64_t& steps) {
  auto& s = state_of<State>(optimizer, param);
  if (!s.exp_avg().defined()) s.exp_avg(at::zeros_like(param, at::MemoryFormat::Preserve));
  if (!s.exp_avg_sq().defined()) s.exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Preserve));
  if (steps < 0) steps = s.step();
  return &s;
}

// torch::optim::Adam (L2 added to the gradient) and AdamW (decoupled: p *= 1 - lr wd first), with the
// bias corrections of the device step count `step` and the device learning rate `lr`.
template <class Options, class State>
void adam_update(const at::Tensor& param, torch::optim::OptimizerParamState* state,
                 const torch::optim::OptimizerOptions& group, bool decoupled, const at::Tensor& lr,
                 const at::Tensor& step, const at::Tensor& take) {
  const auto& o = static_cast<const Options&>(group);
  auto& s = *static_cast<State*>(state);
  const auto [beta1, beta2] = o.betas();
  at::Tensor grad = param.grad();
  at::Tensor decayed = param;
  if (o.weight_decay() != 0) {
    if (decoupled) {
      decayed = param * (1 - lr * o.weight_decay());
    } else {
      grad = grad.add(param, o.weight_decay());
    }
  }
  const at::Tensor bias_correction1 = 1 - at::pow(beta1, step);
  const at::Tensor bias_correction2 = 1 - at::pow(beta2, step);
  const at::Tensor avg = s.exp_avg().mul(beta1).add_(grad, 1 - beta1);
  const at::Tensor avg_sq = s.exp_avg_sq().mul(beta2).addcmul_(grad, grad, 1 - beta2);
  const at::Tensor denom = (avg_sq.sqrt() / bias_correction2.sqrt()).add_(o.eps());
  const at::Tensor step_size = lr / bias_correction1;
  commit(s.exp_avg(), avg, take);
  commit(s.exp_avg_sq(), avg_sq, take);
  commit(param, decayed - avg.div(denom).mul_(step_size), take);
}

}  // namespace

struct DeviceOptimizer::Param {
  at::Tensor param;
  torch::optim::OptimizerParamState* state;  // the optimizer's own state object of the parameter
};

DeviceOptimizer::DeviceOptimizer(torch::optim::Optimizer& optimizer, OptimizerKind kind)
    : optimizer_(optimizer), kind_(kind) {
  const bool matches = kind == OptimizerKind::kSgd    ? dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr
                       : kind == OptimizerKind::kAdam   ? dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr
                       : kind == OptimizerKind::kAdamW  ? dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr
                                                        : dynamic_cast<Adadelta*>(&optimizer) != nullptr;
  if (!matches) throw Error(std::string("a device-side optimizer step for '") + to_string(kind) + "' got another optimizer");
  if (optimizer.param_groups().empty() || optimizer.param_groups().front().params().empty()) {
    throw Error("a device-side optimizer step needs an optimizer with parameters");
  }
  const at::TensorOptions scalar = at::TensorOptions().device(optimizer.param_groups().front().params().front().device()).dtype(at::kDouble);
  lr_ = at::full({}, optimizer.param_groups().front().options().get_lr(), scalar);
  step_ = at::zeros({}, scalar);
  sync_from_state();
}

DeviceOptimizer::~DeviceOptimizer() = default;

void DeviceOptimizer::sync_from_state() {
  groups_.clear();
  int64_t steps = -1;
  for (auto& group : optimizer_.param_groups()) {
    std::vector<Param> params;
    for (const at::Tensor& p : group.params()) {
      torch::optim::OptimizerParamState* state = nullptr;
      switch (kind_) {
        case OptimizerKind::kSgd: {
          auto& s = state_of<torch::optim::SGDParamState>(optimizer_, p);
          // Zero momentum makes the first step's buffer the gradient itself, as torch's first step does
          // by copying (SGD here never dampens).
          if (!s.momentum_buffer().defined()) s.momentum_buffer(at::zeros_like(p, at::MemoryFormat::Preserve));
          state = &s;
          break;
        }
        case OptimizerKind::kAdam: state = adam_state<torch::optim::AdamParamState>(optimizer_, p, steps); break;
        case OptimizerKind::kAdamW: state = adam_state<torch::optim::AdamWParamState>(optimizer_, p, steps); break;
        case OptimizerKind::kAdadelta: {
          auto& s = state_of<AdadeltaParamState>(optimizer_, p);
          if (!s.square_avg().defined()) s.square_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
          if (!s.acc_delta().defined()) s.acc_delta(at::zeros_like(p, at::MemoryFormat::Preserve));
          if (steps < 0) steps = s.step();
          state = &s;
          break;
        }
      }
      params.push_back(Param{p, state});
    }
    groups_.push_back(std::move(params));
  }
  step_.fill_(static_cast<double>(std::max<int64_t>(steps, 0)));
  lr_.fill_(optimizer_.param_groups().front().options().get_lr());
}

void DeviceOptimizer::sync_to_state() {
  const auto steps = static_cast<int64_t>(std::llround(step_.item<double>()));
  for (auto& group : groups_) {
    for (Param& p : group) {
      switch (kind_) {
        case OptimizerKind::kSgd: break;
        case OptimizerKind::kAdam: static_cast<torch::optim::AdamParamState*>(p.state)->step(steps); break;
        case OptimizerKind::kAdamW: static_cast<torch::optim::AdamWParamState*>(p.state)->step(steps); break;
        case OptimizerKind::kAdadelta: static_cast<AdadeltaParamState*>(p.state)->step(steps); break;
      }
    }
  }
}

void DeviceOptimizer::set_lr(double lr) {
  lr_.fill_(lr);
  for (auto& group : optimizer_.param_groups()) group.options().set_lr(lr);
}

void DeviceOptimizer::step(const at::Tensor& take) {
  at::NoGradGuard no_grad;
  step_.add_(take.defined() ? take.to(at::kDouble) : at::ones_like(step_));
  for (size_t g = 0; g < groups_.size(); ++g) {
    const torch::optim::OptimizerOptions& options = optimizer_.param_groups()[g].options();
    for (Param& p : groups_[g]) {
      if (!p.param.grad().defined()) continue;  // host metadata, as torch::optim skips such parameters
      switch (kind_) {
        case OptimizerKind::kSgd: step_sgd(p, options, take); break;
        case OptimizerKind::kAdam:
          adam_update<torch::optim::AdamOptions, torch::optim::AdamParamState>(p.param, p.state, options, false, lr_,
                                                                                step_, take);
          break;
        case OptimizerKind::kAdamW:
          adam_update<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(p.param, p.state, options, true, lr_,
                                                                                  step_, take);
          break;
        case OptimizerKind::kAdadelta: step_adadelta(p, options, take); break;
      }
    }
  }
}

// torch::optim::SGD: d = g + wd p; buf = momentum buf + d; d = nesterov ? d + momentum buf : buf;
// p -= lr d.
void DeviceOptimizer::step_sgd(Param& p, const torch::optim::OptimizerOptions& group, const at::Tensor& take) {
  auto& state = *static_cast<torch::optim::SGDParamState*>(p.state);
  const auto& options = static_cast<const torch::optim::SGDOptions&>(group);
  at::Tensor d = p.param.grad();
  if (options.weight_decay() != 0) d = d.add(p.param, options.weight_decay());
  if (options.momentum() != 0) {
    at::Tensor buffer = state.momentum_buffer().mul(options.momentum()).add_(d, 1 - options.dampening());
    d = options.nesterov() ? d.add(buffer, options.momentum()) : buffer;
    commit(state.momentum_buffer(), buffer, take);
  }
  commit(p.param, p.param - d * lr_, take);
}

// dtrain's Adadelta (torch.optim.Adadelta's order of operations).
void DeviceOptimizer::step_adadelta(Param& p, const torch::optim::OptimizerOptions& group, const at::Tensor& take) {
  const auto& o = static_cast<const AdadeltaOptions&>(group);
  auto& s = *static_cast<AdadeltaParamState*>(p.state);
  at::Tensor grad = p.param.grad();
  if (o.weight_decay() != 0) grad = grad.add(p.param, o.weight_decay());
  const at::Tensor square_avg = s.square_avg().mul(o.rho()).addcmul_(grad, grad, 1 - o.rho());
  const at::Tensor std = square_avg.add(o.eps()).sqrt_();
  const at::Tensor delta = s.acc_delta().add(o.eps()).sqrt_().div_(std).mul_(grad);
  const at::Tensor acc_delta = s.acc_delta().mul(o.rho()).addcmul_(delta, delta, 1 - o.rho());
  commit(s.square_avg(), square_avg, take);
  commit(s.acc_delta(), acc_delta, take);
  commit(p.param, p.param - delta * lr_, take);
}

}  // namespace dtrain
