// AlexNet as torchvision builds it (the one-GPU variant of "One weird trick"): five convolutions, an
// adaptive 6x6 average pool and three fully connected layers with dropout 0.5; 61,100,840 parameters at
// 1000 classes, torchvision's parameter names and its default (Kaiming-uniform) initialisation.
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include "runtime/train/workload.h"

namespace dtrain {

class AlexNet final : public Model {
 public:
  explicit AlexNet(int64_t num_classes = 1000, double dropout = 0.5);
  at::Tensor forward(const at::Tensor& inputs) override;  // [N, 3, H >= 63, W >= 63] -> logits

 private:
  torch::nn::Sequential features_{nullptr};
  torch::nn::Sequential classifier_{nullptr};
};

}  // namespace dtrain
