// Dynamic loss scaling for fp16 training, as torch.cuda.amp.GradScaler does it: the loss is multiplied
// by a large scale so small gradients survive fp16, gradients are unscaled before the optimizer step, and
// a step whose gradients overflowed is skipped and the scale halved. After `growth_interval` clean steps
// the scale doubles again.
//
// The scale, the count of clean steps and the overflow flag are tensors on the training device, updated
// by tensor ops: scaling, unscaling and the update read nothing on the host (they could run inside a
// captured CUDA graph); TrainState reads the overflow flag once per optimizer step to decide.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace dtrain {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16, GradScaler's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps before the scale grows
};

class LossScaler final {
 public:
  explicit LossScaler(c10::Device device = c10::Device(c10::DeviceType::CPU), const LossScalerOptions& options = {});

  // loss x scale, for backward.
  at::Tensor scale(const at::Tensor& loss) const;

  // Divides the gradients by the scale in place and returns a 0-dim bool tensor on the device, true when
  // any of them is inf or NaN. Call after the gradients were averaged across ranks: every rank then sees
  // the same values and makes the same decision.
  at::Tensor unscale(const std::vector<at::Tensor>& grads) const;

  // After each optimizer step (taken or skipped): adjusts the scale on the device.
  void update(const at::Tensor& found_inf);

  // Host reads, for messages and tests.
  double current_scale() const;
  int64_t skipped_steps() const;

 private:
  LossScalerOptions options_;
  c10::Device device_;
  at::Tensor scale_;        // 0-dim float
  at::Tensor clean_steps_;  // 0-dim int64: clean steps since the scale last changed
  at::Tensor skipped_;      // 0-dim int64: steps skipped for overflow
};

}  // namespace dtrain
