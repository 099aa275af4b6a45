#include "runtime/train/loss_scaler.h"

#include <ATen/ATen.h>

namespace dtrain {

LossScaler::LossScaler(const LossScalerOptions& options) : options_(options), scale_(options.init_scale) {}

at::Tensor LossScaler::scale(const at::Tensor& loss) const { return loss * scale_; }

bool LossScaler::unscale_and_check(const std::vector<at::Tensor>& grads) const {
  if (grads.empty()) return false;
  const double inverse = 1.0 / scale_;
  std::vector<at::Tensor> non_finite;
  non_finite.reserve(grads.size());
  for (const at::Tensor& grad : grads) {
    if (!grad.defined()) continue;
    grad.mul_(inverse);
    non_finite.push_back(grad.isfinite().logical_not().any());
  }
  if (non_finite.empty()) return false;
  return at::stack(non_finite).any().item<bool>();
}

void LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    clean_steps_ = 0;
    ++skipped_steps_;
    return;
  }
  if (++clean_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    clean_steps_ = 0;
  }
}

}  // namespace dtrain
