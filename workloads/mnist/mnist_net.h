// The pytorch/examples MNIST network: conv 32, conv 64, max-pool, dropout 0.25, fc 128, dropout 0.5,
// fc 10, log-softmax. 1,199,882 parameters.
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "runtime/train/workload.h"

namespace dtrain {

class MnistNet final : public Model {
 public:
  // The example's dropout probabilities by default; 0 turns a layer off (as the distributed-equivalence
  // tests do: dropout masks are drawn per rank, see docs/workloads.md).
  explicit MnistNet(double conv_dropout = 0.25, double fc_dropout = 0.5);
  at::Tensor forward(const at::Tensor& inputs) override;  // [N, 1, 28, 28] -> log-probabilities [N, 10]

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::Conv2d conv2_;
  torch::nn::Dropout dropout1_;
  torch::nn::Dropout dropout2_;
  torch::nn::Linear fc1_;
  torch::nn::Linear fc2_;
};

}  // namespace dtrain
