#include "runtime/train/loss_scaler.h"

#include <ATen/ATen.h>

namespace dtrain {

LossScaler::LossScaler(c10::Device device, const LossScalerOptions& options)
    : options_(options),
      device_(device),
      scale_(at::full({}, options.init_scale, at::TensorOptions().device(device).dtype(at::kFloat))),
      clean_steps_(at::zeros({}, at::TensorOptions().device(device).dtype(at::kLong))),
      skipped_(at::zeros({}, at::TensorOptions().device(device).dtype(at::kLong))) {}

at::Tensor LossScaler::scale(const at::Tensor& loss) const { return loss * scale_; }

at::Tensor LossScaler::unscale(const std::vector<at::Tensor>& grads) const {
  const at::Tensor inverse = scale_.reciprocal();
  std::vector<at::Tensor> non_finite;
  non_finite.reserve(grads.size());
  for (const at::Tensor& grad : grads) {
    if (!grad.defined()) continue;
    grad.mul_(inverse);
    non_finite.push_back(grad.isfinite().logical_not().any());
  }
  if (non_finite.empty()) return at::zeros({}, at::TensorOptions().device(device_).dtype(at::kBool));
  return at::stack(non_finite).any();
}

void LossScaler::update(const at::Tensor& found_inf) {
  const at::Tensor found = found_inf.to(device_, at::kBool);
  const at::Tensor counted = clean_steps_ + 1;
  const at::Tensor grow = counted >= options_.growth_interval;
  scale_.copy_(at::where(found, scale_ * options_.backoff_factor, at::where(grow, scale_ * options_.growth_factor, scale_)));
  clean_steps_.copy_(at::where(found.logical_or(grow), at::zeros_like(counted), counted));
  skipped_.add_(found.to(at::kLong));
}

double LossScaler::current_scale() const { return scale_.item<double>(); }

int64_t LossScaler::skipped_steps() const { return skipped_.item<int64_t>(); }

}  // namespace dtrain
