#include "test/support/tiny_cnn_workload.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "runtime/nn/batch_norm.h"
#include "test/support/assembled_workload.h"

namespace dtrain::test {
namespace {

class TinyCnn final : public Model {
 public:
  explicit TinyCnn(bool batch_norm)
      : conv_(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)))),
        fc_(register_module("fc", torch::nn::Linear(8, 4))) {
    if (batch_norm) bn_ = register_module("bn", BatchNorm(8));
  }
  at::Tensor forward(const at::Tensor& inputs) override {
    at::Tensor x = conv_->forward(inputs);
    if (bn_) x = bn_->forward(x);
    return fc_->forward(at::flatten(at::adaptive_avg_pool2d(x.relu(), {1, 1}), 1));
  }

 private:
  torch::nn::Conv2d conv_;
  BatchNorm bn_{nullptr};
  torch::nn::Linear fc_;
};

}  // namespace

std::unique_ptr<ClassifierWorkload> make_tiny_cnn_workload(TinyCnnOptions options) {
  WorkloadParts parts;
  parts.name = "tiny-cnn";
  parts.model = [options](const WorkloadData&) -> std::shared_ptr<Model> {
    auto model = std::make_shared<TinyCnn>(options.batch_norm);
    if (options.float64) return std::make_shared<Float64Model>(std::move(model));
    return model;
  };
  parts.data = [options](uint64_t seed) {
    return generated_images(4, 8, options.train_samples, options.test_samples, /*crop_padding=*/2, seed);
  };
  return assemble_workload(std::move(parts));
}

}  // namespace dtrain::test
