#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>

#include "runtime/train/optimizer_factory.h"
#include "runtime/train/supervised_step.h"
#include "test/support/params.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"

using namespace dtrain;

namespace {

constexpr double kPi = 3.14159265358979323846;

struct LinearNorm : torch::nn::Module {
  LinearNorm() {
    fc = register_module("fc", torch::nn::Linear(4, 3));
    bn = register_module("bn", torch::nn::BatchNorm1d(3));
  }
  torch::nn::Linear fc{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};

}  // namespace

TEST_CASE("learning-rate schedules give the documented rate at each step", "[train][schedule]") {
  TrainOptions o;
  o.lr = 0.4;
  o.epochs = 10;
  SECTION("constant") {
    CHECK(learning_rate_at(o, 1) == 0.4);
    CHECK(learning_rate_at(o, 10, 99, 100) == 0.4);
  }
  SECTION("step: every lr_step_epochs epochs by gamma") {
    o.lr_schedule = LrSchedule::kStep;
    o.lr_gamma = 0.5;
    o.lr_step_epochs = 3;
    CHECK(learning_rate_at(o, 3, 50, 100) == Approx(0.4));
    CHECK(learning_rate_at(o, 4) == Approx(0.2));
    CHECK(learning_rate_at(o, 7) == Approx(0.1));
  }
  SECTION("multistep: by gamma after each milestone epoch") {
    o.lr_schedule = LrSchedule::kMultiStep;
    o.lr_gamma = 0.1;
    o.lr_milestones = {2, 5};
    CHECK(learning_rate_at(o, 2) == Approx(0.4));
    CHECK(learning_rate_at(o, 3) == Approx(0.04));
    CHECK(learning_rate_at(o, 5) == Approx(0.04));
    CHECK(learning_rate_at(o, 6) == Approx(0.004));
  }
  SECTION("cosine: per step from lr to lr_min over the run") {
    o.lr_schedule = LrSchedule::kCosine;
    o.lr_min = 0.0;
    CHECK(learning_rate_at(o, 1, 0, 10) == Approx(0.4));
    CHECK(learning_rate_at(o, 6, 0, 10) == Approx(0.2));                 // half way
    CHECK(learning_rate_at(o, 3, 5, 10) == Approx(0.2 * (1 + std::cos(kPi * 0.25))));
    CHECK(learning_rate_at(o, 10, 9, 10) == Approx(0.2 * (1 + std::cos(kPi * 0.99))));
    o.lr_min = 0.1;
    CHECK(learning_rate_at(o, 6, 0, 10) == Approx(0.25));
  }
  SECTION("warm-up: linear in steps, then the schedule over the remaining epochs") {
    o.lr_schedule = LrSchedule::kCosine;
    o.warmup_epochs = 2;
    CHECK(learning_rate_at(o, 1, 0, 10) == Approx(0.4 * 0.1 / 2));
    CHECK(learning_rate_at(o, 1, 9, 10) == Approx(0.4 * 1.0 / 2));
    CHECK(learning_rate_at(o, 2, 9, 10) == Approx(0.4));
    CHECK(learning_rate_at(o, 3, 0, 10) == Approx(0.4));  // the cosine starts after the warm-up
    CHECK(learning_rate_at(o, 7, 0, 10) == Approx(0.2));  // half of the 8 cosine epochs
  }
}

TEST_CASE("each optimizer is built with its options, and 1-d parameters can skip weight decay", "[train]") {
  LinearNorm module;
  TrainOptions o;
  o.lr = 0.05;
  o.weight_decay = 1e-4;
  o.optimizer = OptimizerKind::kSgd;
  o.momentum = 0.8;
  o.nesterov = true;
  auto sgd = make_optimizer(o, module);
  REQUIRE(dynamic_cast<torch::optim::SGD*>(sgd.get()) != nullptr);
  REQUIRE(sgd->param_groups().size() == 1);
  const auto& options = static_cast<const torch::optim::SGDOptions&>(sgd->param_groups()[0].options());
  CHECK(options.nesterov());
  CHECK(options.momentum() == 0.8);
  CHECK(options.weight_decay() == 1e-4);

  o.no_decay_norm_bias = true;
  o.optimizer = OptimizerKind::kAdamW;
  o.adam_beta2 = 0.95;
  auto adamw = make_optimizer(o, module);
  REQUIRE(dynamic_cast<torch::optim::AdamW*>(adamw.get()) != nullptr);
  REQUIRE(adamw->param_groups().size() == 2);
  const auto& decayed = static_cast<const torch::optim::AdamWOptions&>(adamw->param_groups()[0].options());
  const auto& undecayed = static_cast<const torch::optim::AdamWOptions&>(adamw->param_groups()[1].options());
  CHECK(adamw->param_groups()[0].params().size() == 1);  // fc.weight
  CHECK(adamw->param_groups()[1].params().size() == 3);  // fc.bias, bn.weight, bn.bias
  CHECK(decayed.weight_decay() == 1e-4);
  CHECK(undecayed.weight_decay() == 0.0);
  CHECK(std::get<1>(decayed.betas()) == 0.95);
  set_learning_rate(*adamw, 0.5);
  CHECK(undecayed.lr() == 0.5);
}

TEST_CASE("label smoothing is cross-entropy against the smoothed target, for logits and log-probabilities",
          "[train]") {
  at::manual_seed(3);
  const at::Tensor logits = at::randn({5, 4}, at::kDouble);
  const at::Tensor targets = at::tensor({0, 3, 1, 1, 2}, at::kLong);
  const double e = 0.2;
  const at::Tensor logp = at::log_softmax(logits, 1);
  const at::Tensor smoothed = at::one_hot(targets, 4).to(at::kDouble) * (1 - e) + e / 4;
  const double expected = -(smoothed * logp).sum(1).mean().item<double>();
  using Outputs = ClassifierWorkload::Outputs;
  CHECK(classification_loss(logits, targets, Outputs::kLogits, e).item<double>() == Approx(expected).epsilon(1e-12));
  CHECK(classification_loss(logp, targets, Outputs::kLogProbabilities, e).item<double>() ==
        Approx(expected).epsilon(1e-12));
  CHECK(classification_loss(logp, targets, Outputs::kLogProbabilities).item<double>() ==
        Approx(at::nll_loss(logp, targets).item<double>()));
}

TEST_CASE("gradient clipping bounds the global norm of the averaged gradients", "[train]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.checkpoint.enabled = false;
  config.train.epochs = 1;
  config.train.max_steps = 1;
  config.train.momentum = 0.0;
  config.train.lr = 1.0;
  const auto workload = test::make_tiny_workload();
  at::manual_seed(static_cast<uint64_t>(config.train.seed));
  const at::Tensor initial = test::flat_params(*workload->make_model({}));

  config.train.clip_grad_norm = 1e-3;
  const at::Tensor clipped = test::train_alone(config, *workload).params;
  // One plain SGD step at lr 1 moves the parameters by exactly the clipped gradient.
  CHECK((clipped - initial).norm().item<double>() == Approx(1e-3).epsilon(1e-4));

  config.train.clip_grad_norm = 0.0;
  const at::Tensor free = test::train_alone(config, *workload).params;
  CHECK((free - initial).norm().item<double>() > 1e-2);
}
