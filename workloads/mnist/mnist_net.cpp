#include "workloads/mnist/mnist_net.h"

#include <ATen/ATen.h>

namespace dtrain {

MnistNet::MnistNet(double conv_dropout, double fc_dropout)
    : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).stride(1)))),
      conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).stride(1)))),
      dropout1_(register_module("dropout1", torch::nn::Dropout(conv_dropout))),
      dropout2_(register_module("dropout2", torch::nn::Dropout(fc_dropout))),
      fc1_(register_module("fc1", torch::nn::Linear(9216, 128))),
      fc2_(register_module("fc2", torch::nn::Linear(128, 10))) {}

at::Tensor MnistNet::forward(const at::Tensor& inputs) {
  at::Tensor x = at::relu(conv1_->forward(inputs));
  x = at::relu(conv2_->forward(x));
  x = at::max_pool2d(x, {2, 2});
  x = dropout1_->forward(x);
  x = at::flatten(x, 1);
  x = at::relu(fc1_->forward(x));
  x = dropout2_->forward(x);
  return at::log_softmax(fc2_->forward(x), 1);
}

}  // namespace dtrain
