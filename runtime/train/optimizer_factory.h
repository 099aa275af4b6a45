// Builds the configured optimizer of one module and computes the learning-rate schedule. The schedule
// is a pure function of the position in the run (epoch and step), so a resumed run continues it exactly
// with no scheduler state of its own; the optimizers' state (momentum, Adam moments) is checkpointed.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include "runtime/config/config.h"

namespace dtrain {

// The optimizer of `module`'s parameters. The parameters named in `no_weight_decay`, and with
// train.no_decay_norm_bias the 1-d ones (biases and normalisation weights), form a second group without
// weight decay. Throws Error for a name the module has no parameter of.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainOptions& options, const torch::nn::Module& module,
                                                        const std::vector<std::string>& no_weight_decay = {});

// The learning rate of the optimizer step that starts at micro-batch `step` (0-based) of `epoch`
// (1-based), an epoch having `steps` micro-batches:
//   warm-up  lr x min(1, (t + 1/steps) / warmup_epochs), t = epoch - 1 + step / steps, then
//   constant lr;  step lr x gamma^floor((epoch - 1) / lr_step_epochs);  multistep lr x gamma^(milestones
//   passed); cosine (per step, over the epochs after warm-up) lr_min + (lr - lr_min)(1 + cos(pi u)) / 2.
double learning_rate_at(const TrainOptions& options, int64_t epoch, int64_t step = 0, int64_t steps = 1);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace dtrain
