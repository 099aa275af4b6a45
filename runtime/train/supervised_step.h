// The step shared by classifiers: forward, mean loss, backward, optimizer step; evaluation counts the
// correct predictions. Metrics: "loss" in training (with train.label_smoothing, the smoothed loss that is
// minimised), "accuracy" and "loss" (plain cross-entropy) in evaluation.
#pragma once

#include <string>

#include "runtime/train/workload.h"

namespace dtrain {

// The mean loss of class scores `outputs` against class indices `targets`: NLL of log-probabilities or
// cross-entropy of logits, with label smoothing `label_smoothing` (the target is (1 - e) one-hot plus e
// spread evenly over the classes).
at::Tensor classification_loss(const at::Tensor& outputs, const at::Tensor& targets,
                               ClassifierWorkload::Outputs kind, double label_smoothing = 0.0);

class SupervisedStep final : public TrainStep {
 public:
  // Trains the state's module `module`, a Model.
  explicit SupervisedStep(ClassifierWorkload::Outputs outputs, std::string module = "model");

  std::vector<std::string> train_metrics() const override { return {"loss"}; }
  std::vector<std::string> eval_metrics() const override { return {"accuracy", "loss"}; }
  void train(const Batch& batch, TrainState& state, MetricSums& metrics) override;
  void evaluate(const Batch& batch, TrainState& state, MetricSums& metrics) override;

 private:
  ClassifierWorkload::Outputs outputs_;
  std::string module_;
};

}  // namespace dtrain
