#include "test/support/tiny_workload.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

#include "runtime/data/synthetic.h"
#include "test/support/assembled_workload.h"

namespace dtrain::test {
namespace {

class TinyNet final : public Model {
 public:
  TinyNet(double dropout, int64_t hidden, bool batchnorm)
      : fc1_(register_module("fc1", torch::nn::Linear(8, hidden))),
        dropout_(register_module("dropout", torch::nn::Dropout(dropout))),
        fc2_(register_module("fc2", torch::nn::Linear(hidden, 4))) {
    if (batchnorm) bn_ = register_module("bn", torch::nn::BatchNorm1d(hidden));
  }

  at::Tensor forward(const at::Tensor& inputs) override {
    at::Tensor hidden = fc1_->forward(inputs);
    if (bn_) hidden = bn_->forward(hidden);
    return at::log_softmax(fc2_->forward(dropout_->forward(at::relu(hidden))), 1);
  }

 private:
  torch::nn::Linear fc1_;
  torch::nn::Dropout dropout_;
  torch::nn::Linear fc2_;
  torch::nn::BatchNorm1d bn_{nullptr};
};

class TinyWorkload final : public ClassifierWorkload {
 public:
  explicit TinyWorkload(TinyOptions options) : options_(options) {}
  std::string name() const override { return "tiny"; }
  std::string data_format() const override { return "generated: 8 features, 4 classes"; }
  std::shared_ptr<Model> make_model(const WorkloadData&) const override {
    auto model = std::make_shared<TinyNet>(options_.dropout, options_.hidden, options_.batchnorm);
    if (options_.float64) return std::make_shared<Float64Model>(std::move(model));
    return model;
  }
  Outputs outputs() const override { return Outputs::kLogProbabilities; }
  WorkloadData load_data(const TrainConfig& config) const override {
    const auto seed = static_cast<uint64_t>(config.train.seed);
    WorkloadData data;
    data.num_classes = 4;
    auto train = std::make_shared<TensorDataset>(make_synthetic_dataset({{8}, 4, options_.train_samples, 1.0}, seed, seed + 1));
    auto test = std::make_shared<TensorDataset>(make_synthetic_dataset({{8}, 4, options_.test_samples, 1.0}, seed, seed + 2));
    for (int64_t i : options_.nan_train_samples) train->inputs[i].fill_(std::nan(""));
    if (options_.nan_test_inputs) test->inputs.fill_(std::nan(""));
    if (options_.nan_test_from >= 0) test->inputs.narrow(0, options_.nan_test_from, options_.test_samples - options_.nan_test_from).fill_(std::nan(""));
    data.train = std::move(train);
    data.test = std::move(test);
    data.description = "tiny synthetic";
    return data;
  }

 private:
  TinyOptions options_;
};

}  // namespace

std::unique_ptr<ClassifierWorkload> make_tiny_workload(TinyOptions options) { return std::make_unique<TinyWorkload>(options); }

TrainConfig tiny_config(const std::string& dir) {
  TrainConfig config;
  config.workload = "tiny";
  config.train.batch_size = 16;
  config.train.eval_batch_size = 32;
  config.train.optimizer = OptimizerKind::kSgd;
  config.train.lr = 0.05;
  config.train.epochs = 2;
  config.log.dir = dir + "/logs";
  config.log.interval = 0;
  config.log.progress = ProgressMode::kOff;
  config.log.sample_interval_s = 0;  // tests that look at the run log's records count them exactly
  config.checkpoint.dir = dir + "/checkpoints";
  // The copy in memory of the test's own: /dev/shm holds other runs' (and its sweep would say so).
  config.checkpoint.memory_dir = dir + "/memory";
  return config;
}

}  // namespace dtrain::test
