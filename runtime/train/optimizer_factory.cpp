#include "runtime/train/optimizer_factory.h"

#include <torch/optim/sgd.h>

#include <cmath>

#include "runtime/train/adadelta.h"
#include "runtime/util/error.h"

namespace dtrain {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainOptions& options, std::vector<at::Tensor> params) {
  switch (options.optimizer) {
    case OptimizerKind::kAdadelta: return std::make_unique<Adadelta>(std::move(params), AdadeltaOptions(options.lr));
    case OptimizerKind::kSgd:
      return std::make_unique<torch::optim::SGD>(std::move(params),
                                                 torch::optim::SGDOptions(options.lr).momentum(options.momentum));
  }
  throw ConfigError("train.optimizer: unsupported optimizer");
}

double learning_rate_for_epoch(const TrainOptions& options, int64_t epoch) {
  const int64_t decays = (epoch - 1) / options.lr_step_epochs;
  return options.lr * std::pow(options.lr_gamma, static_cast<double>(decays));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace dtrain
