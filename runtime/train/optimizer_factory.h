// Builds the configured optimizer and computes the learning-rate schedule. The schedule is a pure
// function of the epoch, so a resumed run needs no scheduler state.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include "runtime/config/config.h"

namespace dtrain {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainOptions& options, std::vector<at::Tensor> params);

// StepLR: lr x gamma^floor((epoch - 1) / lr_step_epochs), epochs counted from 1.
double learning_rate_for_epoch(const TrainOptions& options, int64_t epoch);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace dtrain
