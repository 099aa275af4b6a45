// Adadelta (Zeiler 2012) with PyTorch's update order and defaults (rho 0.9, eps 1e-6), the optimizer of
// the pytorch/examples MNIST recipe; LibTorch's C++ frontend does not ship one.
#pragma once

#include <torch/arg.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/serialize.h>

#include <vector>

namespace dtrain {

struct AdadeltaOptions : public torch::optim::OptimizerCloneableOptions<AdadeltaOptions> {
  AdadeltaOptions(double lr = 1.0) : lr_(lr) {}  // NOLINT: implicit like LibTorch's option types
  TORCH_ARG(double, lr) = 1.0;
  TORCH_ARG(double, rho) = 0.9;
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, weight_decay) = 0.0;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct AdadeltaParamState : public torch::optim::OptimizerCloneableParamState<AdadeltaParamState> {
  TORCH_ARG(at::Tensor, square_avg);
  TORCH_ARG(at::Tensor, acc_delta);
  TORCH_ARG(int64_t, step) = 0;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

class Adadelta final : public torch::optim::Optimizer {
 public:
  Adadelta(std::vector<at::Tensor> params, AdadeltaOptions defaults);
  Adadelta(std::vector<torch::optim::OptimizerParamGroup> groups, AdadeltaOptions defaults);
  at::Tensor step(LossClosure closure = nullptr) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
};

}  // namespace dtrain
