#include "workloads/vision/alexnet.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

namespace dtrain {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding));
}

nn::MaxPool2d pool() { return nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2)); }

nn::ReLU relu() { return nn::ReLU(nn::ReLUOptions(true)); }

}  // namespace

AlexNet::AlexNet(int64_t num_classes, double dropout) {
  // The indices of torchvision's Sequential, so the parameter names (features.0.weight, ...) match.
  features_ = register_module(
      "features", nn::Sequential(conv(3, 64, 11, 4, 2), relu(), pool(), conv(64, 192, 5, 1, 2), relu(), pool(),
                                 conv(192, 384, 3, 1, 1), relu(), conv(384, 256, 3, 1, 1), relu(),
                                 conv(256, 256, 3, 1, 1), relu(), pool()));
  classifier_ = register_module(
      "classifier", nn::Sequential(nn::Dropout(dropout), nn::Linear(256 * 6 * 6, 4096), relu(), nn::Dropout(dropout),
                                   nn::Linear(4096, 4096), relu(), nn::Linear(4096, num_classes)));
}

at::Tensor AlexNet::forward(const at::Tensor& inputs) {
  at::Tensor x = features_->forward(inputs);
  x = at::flatten(at::adaptive_avg_pool2d(x, {6, 6}), 1);
  return classifier_->forward(x);
}

}  // namespace dtrain
