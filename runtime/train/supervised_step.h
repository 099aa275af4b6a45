// The step shared by classifiers: forward, mean loss, backward, optimizer step; evaluation counts the
// correct predictions. Metrics: "loss" in training, "accuracy" and "loss" in evaluation.
#pragma once

#include <string>

#include "runtime/train/workload.h"

namespace dtrain {

class SupervisedStep final : public TrainStep {
 public:
  // Trains the state's module `module`, a Model.
  explicit SupervisedStep(ClassifierWorkload::Outputs outputs, std::string module = "model");

  std::vector<std::string> train_metrics() const override { return {"loss"}; }
  std::vector<std::string> eval_metrics() const override { return {"accuracy", "loss"}; }
  void train(const Batch& batch, TrainState& state, MetricSums& metrics) override;
  void evaluate(const Batch& batch, TrainState& state, MetricSums& metrics) override;

 private:
  at::Tensor loss(const at::Tensor& outputs, const at::Tensor& targets) const;

  ClassifierWorkload::Outputs outputs_;
  std::string module_;
};

}  // namespace dtrain
