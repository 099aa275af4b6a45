// Optimizer steps with no host synchronisation, for a training step captured whole in a CUDA graph: the
// learning rate and the step count live in 0-dim device tensors, and whether a step is taken (fp16
// overflow, skip-step) is a device-side flag that masks the update instead of a host branch. The update
// math is torch::optim's (SGD with momentum and Nesterov, Adam, AdamW) and dtrain's Adadelta, on the same
// per-parameter state objects, so checkpoints stay the optimizers' own format: sync_to_state() writes the
// device step count into that state before a save, sync_from_state() reads it after a load.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/optim/optimizer.h>

#include <vector>

#include "runtime/config/config.h"

namespace dtrain {

class DeviceOptimizer final {
 public:
  // For `optimizer`, which make_optimizer built for `kind`. Creates the state the first step would
  // (momentum buffers, moments) now, as zeros: a captured step must not allocate persistent tensors.
  // Throws Error for an optimizer of another class.
  DeviceOptimizer(torch::optim::Optimizer& optimizer, OptimizerKind kind);
  ~DeviceOptimizer();
  DeviceOptimizer(const DeviceOptimizer&) = delete;
  DeviceOptimizer& operator=(const DeviceOptimizer&) = delete;

  // Writes the learning rate into the device tensor (between steps or graph replays) and the options.
  void set_lr(double lr);

  // One optimizer step on the parameters' gradients. `take` is a 0-dim bool tensor on the parameters'
  // device: where false, parameters, state and step count stay as they were (NaN gradients included);
  // undefined means always. Capturable: no host read, no persistent allocation.
  void step(const at::Tensor& take = at::Tensor());

  // The device step count into every parameter's state (Adam, Adadelta `step`): one host read, before a
  // checkpoint is saved.
  void sync_to_state();
  // After a checkpoint was loaded into the optimizer: its step count and learning rate to the device.
  void sync_from_state();

  const at::Tensor& lr() const { return lr_; }
  const at::Tensor& step_count() const { return step_; }

 private:
  struct Param;
  void step_sgd(Param& p, const torch::optim::OptimizerOptions& group, const at::Tensor& take);
  void step_adadelta(Param& p, const torch::optim::OptimizerOptions& group, const at::Tensor& take);

  torch::optim::Optimizer& optimizer_;
  OptimizerKind kind_;
  at::Tensor lr_;    // 0-dim double on the device
  at::Tensor step_;  // 0-dim double on the device: optimizer steps taken
  std::vector<std::vector<Param>> groups_;
};

}  // namespace dtrain
