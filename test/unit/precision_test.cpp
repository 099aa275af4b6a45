#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

#include <limits>

#include "runtime/train/autocast_scope.h"
#include "runtime/train/loss_scaler.h"
#include "runtime/util/error.h"

using namespace dtrain;

TEST_CASE("autocast runs linear layers in bf16 inside the scope only", "[precision]") {
  torch::nn::Linear layer(8, 4);
  const at::Tensor x = at::randn({3, 8});
  {
    AutocastScope scope(c10::DeviceType::CPU, Precision::kBf16);
    CHECK(layer->forward(x).scalar_type() == at::kBFloat16);
  }
  CHECK(layer->forward(x).scalar_type() == at::kFloat);
  {
    AutocastScope scope(c10::DeviceType::CPU, Precision::kFp32);
    CHECK(layer->forward(x).scalar_type() == at::kFloat);
  }
}

TEST_CASE("the loss scaler unscales gradients and reports overflow", "[precision]") {
  LossScaler scaler(c10::Device(c10::DeviceType::CPU), LossScalerOptions{1024.0, 2.0, 0.5, 3});
  CHECK(scaler.scale(at::tensor(2.0)).item<double>() == 2048.0);

  std::vector<at::Tensor> grads{at::full({4}, 1024.0), at::full({2, 2}, -512.0)};
  CHECK_FALSE(scaler.unscale(grads).item<bool>());
  CHECK(at::all(grads[0] == 1.0).item<bool>());
  CHECK(at::all(grads[1] == -0.5).item<bool>());

  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    std::vector<at::Tensor> overflowed{at::ones({4}), at::tensor(std::vector<double>{1.0, bad})};
    CHECK(scaler.unscale(overflowed).item<bool>());
  }
}

TEST_CASE("the loss scale halves on overflow and grows after clean steps", "[precision]") {
  LossScaler scaler(c10::Device(c10::DeviceType::CPU), LossScalerOptions{1024.0, 2.0, 0.5, 3});
  scaler.update(at::full({}, true));
  CHECK(scaler.current_scale() == 512.0);
  CHECK(scaler.skipped_steps() == 1);
  scaler.update(at::full({}, false));
  scaler.update(at::full({}, false));
  CHECK(scaler.current_scale() == 512.0);
  scaler.update(at::full({}, false));  // the third clean step in a row
  CHECK(scaler.current_scale() == 1024.0);
  scaler.update(at::full({}, false));
  scaler.update(at::full({}, true));  // an overflow resets the count of clean steps
  scaler.update(at::full({}, false));
  scaler.update(at::full({}, false));
  CHECK(scaler.current_scale() == 512.0);
  CHECK(scaler.skipped_steps() == 2);
}

TEST_CASE("the loss scaler's overflow flag and update stay on the device", "[precision]") {
  LossScaler scaler(c10::Device(c10::DeviceType::CPU), LossScalerOptions{1024.0, 2.0, 0.5, 2});
  const at::Tensor clean = scaler.unscale({at::full({3}, 2048.0)});
  CHECK(clean.dim() == 0);
  CHECK(clean.scalar_type() == at::kBool);
  CHECK_FALSE(clean.item<bool>());
  scaler.update(clean);
  scaler.update(clean);  // the second clean step: the scale doubles
  CHECK(scaler.current_scale() == 2048.0);
  const at::Tensor overflow = scaler.unscale({at::ones({2}), at::full({2}, std::numeric_limits<float>::infinity())});
  CHECK(overflow.item<bool>());
  scaler.update(overflow);
  CHECK(scaler.current_scale() == 1024.0);
  CHECK(scaler.skipped_steps() == 1);
}
