#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "runtime/train/device_optimizer.h"
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

namespace {

// Two identical modules, one stepped by `make_optimizer`'s optimizer, the other by the same optimizer
// class driven by DeviceOptimizer, both on the same gradients; `skip` lists the steps the device side
// is told not to take (and the reference therefore does not take).
double device_step_gap(OptimizerKind kind, const std::vector<int>& skip, bool reload_midway = false) {
  TrainOptions options;
  options.optimizer = kind;
  options.lr = kind == OptimizerKind::kAdadelta ? 1.0 : 0.05;
  options.momentum = 0.9;
  options.nesterov = kind == OptimizerKind::kSgd;
  options.weight_decay = 0.01;
  options.no_decay_norm_bias = true;  // two parameter groups, one without weight decay
  at::manual_seed(3);
  auto reference = std::make_shared<LinearNorm>();
  auto device = std::make_shared<LinearNorm>();
  {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < reference->parameters().size(); ++i) device->parameters()[i].copy_(reference->parameters()[i]);
  }
  auto reference_opt = make_optimizer(options, *reference);
  auto device_opt = make_optimizer(options, *device);
  auto stepper = std::make_unique<DeviceOptimizer>(*device_opt, kind);
  for (int step = 1; step <= 8; ++step) {
    const double lr = options.lr * (step <= 4 ? 1.0 : 0.5);  // a schedule change midway
    set_learning_rate(*reference_opt, lr);
    stepper->set_lr(lr);
    const bool skipped = std::find(skip.begin(), skip.end(), step) != skip.end();
    for (size_t i = 0; i < reference->parameters().size(); ++i) {
      at::Tensor grad = at::randn(reference->parameters()[i].sizes());
      reference->parameters()[i].mutable_grad() = grad.clone();
      // A skipped step's gradients are NaN, as after an fp16 overflow: the mask must hold them off.
      device->parameters()[i].mutable_grad() = skipped ? at::full_like(grad, NAN) : grad.clone();
    }
    if (!skipped) reference_opt->step();
    stepper->step(at::full({}, !skipped, at::kBool));
    if (reload_midway && step == 4) {
      // A checkpoint: the device step count goes into the optimizer's state, a fresh optimizer loads it.
      stepper->sync_to_state();
      std::stringstream bytes;
      {
        torch::serialize::OutputArchive archive;
        device_opt->save(archive);
        archive.save_to(bytes);
      }
      device_opt = make_optimizer(options, *device);
      torch::serialize::InputArchive archive;
      archive.load_from(bytes);
      device_opt->load(archive);
      stepper = std::make_unique<DeviceOptimizer>(*device_opt, kind);
    }
  }
  double gap = 0.0;
  for (size_t i = 0; i < reference->parameters().size(); ++i) {
    gap = std::max(gap, (reference->parameters()[i] - device->parameters()[i]).abs().max().item<double>());
  }
  return gap;
}

}  // namespace

TEST_CASE("device-side optimizer steps follow torch::optim's, and a false flag skips a step", "[train][device-step]") {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kAdadelta}) {
    CAPTURE(to_string(kind));
    CHECK(device_step_gap(kind, {}) < 1e-6);
    CHECK(device_step_gap(kind, {1, 5}) < 1e-6);  // the very first step too: no state may change
    CHECK(device_step_gap(kind, {3}, /*reload_midway=*/true) < 1e-6);
  }
}

TEST_CASE("a device-side step leaves the parameters alone where the flag is false", "[train][device-step]") {
  LinearNorm module;
  TrainOptions options;
  options.optimizer = OptimizerKind::kAdam;
  auto optimizer = make_optimizer(options, module);
  DeviceOptimizer stepper(*optimizer, OptimizerKind::kAdam);
  std::vector<at::Tensor> before;
  for (const at::Tensor& p : module.parameters()) {
    before.push_back(p.detach().clone());
    p.mutable_grad() = at::full_like(p, INFINITY);
  }
  stepper.step(at::full({}, false, at::kBool));
  for (size_t i = 0; i < before.size(); ++i) CHECK(at::equal(before[i], module.parameters()[i]));
  CHECK(stepper.step_count().item<double>() == 0.0);
  CHECK_THROWS_WITH(DeviceOptimizer(*optimizer, OptimizerKind::kSgd),
                    Catch::Contains("a device-side optimizer step for 'sgd' got another optimizer"));
}
