// Dynamic loss scaling for fp16 training, as torch.cuda.amp.GradScaler does it: the loss is multiplied
// by a large scale so small gradients survive fp16, gradients are unscaled before the optimizer step, and
// a step whose gradients overflowed is skipped and the scale halved. After `growth_interval` clean steps
// the scale doubles again.
#pragma once

#include <ATen/core/Tensor.h>

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
  explicit LossScaler(const LossScalerOptions& options = {});

  // loss x scale, for backward.
  at::Tensor scale(const at::Tensor& loss) const;

  // Divides the gradients by the scale in place and returns true when any of them is inf or NaN (one
  // host synchronisation). Call after the gradients were averaged across ranks: every rank then sees
  // the same values and makes the same decision.
  bool unscale_and_check(const std::vector<at::Tensor>& grads) const;

  // After each optimizer step (taken or skipped): adjusts the scale.
  void update(bool found_inf);

  double current_scale() const { return scale_; }
  int64_t skipped_steps() const { return skipped_steps_; }

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t clean_steps_ = 0;
  int64_t skipped_steps_ = 0;
};

}  // namespace dtrain
