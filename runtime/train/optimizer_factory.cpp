#include "runtime/train/optimizer_factory.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/train/adadelta.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace {

constexpr double kPi = 3.14159265358979323846;

// One group of all parameters with `decayed`'s options, or two: the decayed parameters with them and
// the exempt ones (named in `exempt`, or 1-d with no_decay_norm_bias) with the same options but no weight
// decay.
template <class Options>
std::vector<torch::optim::OptimizerParamGroup> param_groups(const TrainOptions& options, const torch::nn::Module& module,
                                                            const std::vector<std::string>& exempt, const Options& decayed) {
  std::vector<at::Tensor> decay;
  std::vector<at::Tensor> no_decay;
  const auto named = module.named_parameters();
  for (const std::string& name : exempt) {
    if (named.find(name) == nullptr) throw Error("no_weight_decay names '" + name + "', which is not a parameter of the module");
  }
  for (const auto& item : named) {
    const bool exempted = std::find(exempt.begin(), exempt.end(), item.key()) != exempt.end();
    (exempted || (options.no_decay_norm_bias && item.value().dim() <= 1) ? no_decay : decay).push_back(item.value());
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<Options>(decayed));
  if (!no_decay.empty()) {
    Options undecayed = decayed;
    undecayed.weight_decay(0.0);
    groups.emplace_back(no_decay, std::make_unique<Options>(undecayed));
  }
  return groups;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainOptions& o, const torch::nn::Module& module,
                                                        const std::vector<std::string>& no_weight_decay) {
  switch (o.optimizer) {
    case OptimizerKind::kAdadelta: {
      AdadeltaOptions options(o.lr);
      options.weight_decay(o.weight_decay);
      return std::make_unique<Adadelta>(param_groups(o, module, no_weight_decay, options), options);
    }
    case OptimizerKind::kSgd: {
      torch::optim::SGDOptions options(o.lr);
      options.momentum(o.momentum).nesterov(o.nesterov).weight_decay(o.weight_decay);
      return std::make_unique<torch::optim::SGD>(param_groups(o, module, no_weight_decay, options), options);
    }
    case OptimizerKind::kAdam: {
      torch::optim::AdamOptions options(o.lr);
      options.betas({o.adam_beta1, o.adam_beta2}).eps(o.adam_eps).weight_decay(o.weight_decay);
      return std::make_unique<torch::optim::Adam>(param_groups(o, module, no_weight_decay, options), options);
    }
    case OptimizerKind::kAdamW: {
      torch::optim::AdamWOptions options(o.lr);
      options.betas({o.adam_beta1, o.adam_beta2}).eps(o.adam_eps).weight_decay(o.weight_decay);
      return std::make_unique<torch::optim::AdamW>(param_groups(o, module, no_weight_decay, options), options);
    }
  }
  throw ConfigError(std::string("train.optimizer: unsupported optimizer '") + to_string(o.optimizer) + "'");
}

double learning_rate_at(const TrainOptions& o, int64_t epoch, int64_t step, int64_t steps) {
  steps = std::max<int64_t>(steps, 1);
  const double t = static_cast<double>(epoch - 1) + static_cast<double>(step) / static_cast<double>(steps);
  double lr = o.lr;
  switch (o.lr_schedule) {
    case LrSchedule::kConstant: break;
    case LrSchedule::kStep: lr *= std::pow(o.lr_gamma, static_cast<double>((epoch - 1) / o.lr_step_epochs)); break;
    case LrSchedule::kMultiStep: {
      int64_t passed = 0;
      for (int64_t milestone : o.lr_milestones) passed += epoch > milestone ? 1 : 0;
      lr *= std::pow(o.lr_gamma, static_cast<double>(passed));
      break;
    }
    case LrSchedule::kCosine: {
      const double span = static_cast<double>(o.epochs) - o.warmup_epochs;
      const double u = span > 0 ? std::clamp((t - o.warmup_epochs) / span, 0.0, 1.0) : 0.0;
      lr = o.lr_min + (o.lr - o.lr_min) * 0.5 * (1.0 + std::cos(kPi * u));
      break;
    }
  }
  if (o.warmup_epochs > 0) lr *= std::min(1.0, (t + 1.0 / static_cast<double>(steps)) / o.warmup_epochs);
  return lr;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace dtrain
