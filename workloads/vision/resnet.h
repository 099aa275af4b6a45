// ResNets with torchvision's layers, parameter names, shapes and initialisation (v1.5: the stride of a
// down-sampling bottleneck sits in its 3x3 convolution), so parameter counts and state_dict keys match
// torchvision.models: resnet18 11,689,512 and resnet50 25,557,032 parameters at 1000 classes.
// The CIFAR stem (a 3x3 stride-1 convolution and no max-pool, as CIFAR recipes use for 32x32 inputs)
// gives the usual CIFAR-10 ResNet-18: 11,173,962 parameters at 10 classes.
#pragma once

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <vector>

#include "runtime/nn/batch_norm.h"
#include "runtime/train/workload.h"

namespace dtrain {

enum class ResNetStem {
  kImageNet,  // 7x7 stride-2 convolution and 3x3 stride-2 max-pool: 224 px in, 7x7 at the last stage
  kCifar,     // 3x3 stride-1 convolution, no pool: 32 px in, 4x4 at the last stage
};

struct ResNetOptions {
  enum class Block { kBasic, kBottleneck };
  Block block = Block::kBasic;
  std::vector<int64_t> layers{2, 2, 2, 2};  // blocks per stage
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  ResNetStem stem = ResNetStem::kImageNet;
};

ResNetOptions resnet18_options(int64_t num_classes, ResNetStem stem = ResNetStem::kImageNet);
ResNetOptions resnet50_options(int64_t num_classes, ResNetStem stem = ResNetStem::kImageNet);

class ResNet final : public Model {
 public:
  explicit ResNet(const ResNetOptions& options);
  at::Tensor forward(const at::Tensor& inputs) override;  // [N, C, H, W] -> logits [N, num_classes]

 private:
  ResNetStem stem_;
  torch::nn::Conv2d conv1_{nullptr};
  BatchNorm bn1_{nullptr};
  std::vector<torch::nn::Sequential> stages_;  // layer1..layer4
  torch::nn::Linear fc_{nullptr};
};

}  // namespace dtrain
