#include "workloads/vision/resnet.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <memory>
#include <string>

namespace dtrain {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// The projection shortcut of a block whose output differs from its input in channels or stride (a 1x1
// convolution and BatchNorm, torchvision's "downsample"); none where the identity fits.
nn::Sequential shortcut(int64_t in, int64_t out, int64_t stride) {
  if (stride == 1 && in == out) return nn::Sequential(nullptr);
  return nn::Sequential(conv(in, out, 1, stride), BatchNorm(out));
}

// conv-bn-relu, conv-bn, plus the shortcut, relu. Expansion 1.
class BasicBlock final : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;

  BasicBlock(int64_t in, int64_t planes, int64_t stride)
      : conv1_(register_module("conv1", conv(in, planes, 3, stride))),
        bn1_(register_module("bn1", BatchNorm(planes))),
        conv2_(register_module("conv2", conv(planes, planes, 3, 1))),
        bn2_(register_module("bn2", BatchNorm(planes))) {
    if (auto s = shortcut(in, planes, stride)) downsample_ = register_module("downsample", s);
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = bn1_->forward(conv1_->forward(x)).relu_();
    out = bn2_->forward(conv2_->forward(out));
    out += downsample_ ? downsample_->forward(x) : x;
    return out.relu_();
  }

 private:
  nn::Conv2d conv1_;
  BatchNorm bn1_;
  nn::Conv2d conv2_;
  BatchNorm bn2_;
  nn::Sequential downsample_{nullptr};
};

// 1x1 reduce, 3x3 (with the stride: v1.5), 1x1 expand to 4x planes.
class Bottleneck final : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;

  Bottleneck(int64_t in, int64_t planes, int64_t stride)
      : conv1_(register_module("conv1", conv(in, planes, 1, 1))),
        bn1_(register_module("bn1", BatchNorm(planes))),
        conv2_(register_module("conv2", conv(planes, planes, 3, stride))),
        bn2_(register_module("bn2", BatchNorm(planes))),
        conv3_(register_module("conv3", conv(planes, planes * kExpansion, 1, 1))),
        bn3_(register_module("bn3", BatchNorm(planes * kExpansion))) {
    if (auto s = shortcut(in, planes * kExpansion, stride)) downsample_ = register_module("downsample", s);
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = bn1_->forward(conv1_->forward(x)).relu_();
    out = bn2_->forward(conv2_->forward(out)).relu_();
    out = bn3_->forward(conv3_->forward(out));
    out += downsample_ ? downsample_->forward(x) : x;
    return out.relu_();
  }

 private:
  nn::Conv2d conv1_;
  BatchNorm bn1_;
  nn::Conv2d conv2_;
  BatchNorm bn2_;
  nn::Conv2d conv3_;
  BatchNorm bn3_;
  nn::Sequential downsample_{nullptr};
};

template <class Block>
nn::Sequential make_stage(int64_t& in, int64_t planes, int64_t blocks, int64_t stride) {
  nn::Sequential stage;
  for (int64_t i = 0; i < blocks; ++i) {
    stage->push_back(std::make_shared<Block>(in, planes, i == 0 ? stride : 1));
    in = planes * Block::kExpansion;
  }
  return stage;
}

}  // namespace

ResNetOptions resnet18_options(int64_t num_classes, ResNetStem stem) {
  ResNetOptions options;
  options.block = ResNetOptions::Block::kBasic;
  options.layers = {2, 2, 2, 2};
  options.num_classes = num_classes;
  options.stem = stem;
  return options;
}

ResNetOptions resnet50_options(int64_t num_classes, ResNetStem stem) {
  ResNetOptions options;
  options.block = ResNetOptions::Block::kBottleneck;
  options.layers = {3, 4, 6, 3};
  options.num_classes = num_classes;
  options.stem = stem;
  return options;
}

ResNet::ResNet(const ResNetOptions& options) : stem_(options.stem) {
  const bool imagenet = stem_ == ResNetStem::kImageNet;
  conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(options.in_channels, 64, imagenet ? 7 : 3)
                                                   .stride(imagenet ? 2 : 1)
                                                   .padding(imagenet ? 3 : 1)
                                                   .bias(false)));
  bn1_ = register_module("bn1", BatchNorm(64));
  int64_t in = 64;
  const int64_t planes[] = {64, 128, 256, 512};
  for (size_t i = 0; i < 4; ++i) {
    const int64_t stride = i == 0 ? 1 : 2;
    nn::Sequential stage = options.block == ResNetOptions::Block::kBasic
                               ? make_stage<BasicBlock>(in, planes[i], options.layers.at(i), stride)
                               : make_stage<Bottleneck>(in, planes[i], options.layers.at(i), stride);
    stages_.push_back(register_module("layer" + std::to_string(i + 1), stage));
  }
  fc_ = register_module("fc", nn::Linear(in, options.num_classes));

  // torchvision's initialisation: Kaiming-normal (fan-out, ReLU) convolutions; BatchNorm starts at weight 1
  // and bias 0 (its own initialisation); the fully connected layer keeps the default (Kaiming-uniform,
  // a = sqrt(5)), as there.
  at::NoGradGuard no_grad;
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* c = module->as<nn::Conv2d>()) nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
  }
}

at::Tensor ResNet::forward(const at::Tensor& inputs) {
  at::Tensor x = bn1_->forward(conv1_->forward(inputs)).relu_();
  if (stem_ == ResNetStem::kImageNet) x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  for (nn::Sequential& stage : stages_) x = stage->forward(x);
  x = at::flatten(at::adaptive_avg_pool2d(x, {1, 1}), 1);
  return fc_->forward(x);
}

}  // namespace dtrain
