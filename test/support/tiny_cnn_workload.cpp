#include "test/support/tiny_cnn_workload.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "runtime/data/synthetic.h"

namespace dtrain::test {
namespace {

class TinyCnn final : public Model {
 public:
  explicit TinyCnn(bool batch_norm)
      : conv_(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)))),
        fc_(register_module("fc", torch::nn::Linear(8, 4))) {
    if (batch_norm) bn_ = register_module("bn", torch::nn::BatchNorm2d(8));
  }
  at::Tensor forward(const at::Tensor& inputs) override {
    at::Tensor x = conv_->forward(inputs);
    if (bn_) x = bn_->forward(x);
    return fc_->forward(at::flatten(at::adaptive_avg_pool2d(x.relu(), {1, 1}), 1));
  }

 private:
  torch::nn::Conv2d conv_;
  torch::nn::BatchNorm2d bn_{nullptr};
  torch::nn::Linear fc_;
};

class TinyCnnWorkload final : public ClassifierWorkload {
 public:
  explicit TinyCnnWorkload(TinyCnnOptions options) : options_(options) {}
  std::string name() const override { return "tiny-cnn"; }
  std::string data_format() const override { return "generated 8x8 RGB images, 4 classes"; }
  std::shared_ptr<Model> make_model(const WorkloadData&) const override {
    return std::make_shared<TinyCnn>(options_.batch_norm);
  }
  WorkloadData load_data(const DataOptions&, uint64_t seed) const override {
    WorkloadData data;
    data.num_classes = 4;
    auto train = std::make_shared<TensorDataset>(
        make_synthetic_images({4, 8, options_.train_samples, options_.train_samples}, seed, seed + 1));
    train->crop_padding = 2;
    train->random_flip = true;
    data.train = std::move(train);
    data.test = std::make_shared<TensorDataset>(
        make_synthetic_images({4, 8, options_.test_samples, options_.test_samples}, seed, seed + 2));
    data.description = "tiny generated images";
    return data;
  }

 private:
  TinyCnnOptions options_;
};

}  // namespace

std::unique_ptr<ClassifierWorkload> make_tiny_cnn_workload(TinyCnnOptions options) {
  return std::make_unique<TinyCnnWorkload>(options);
}

}  // namespace dtrain::test
