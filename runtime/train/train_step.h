// The seam between the one training loop and a workload: the loop brings batches, the step trains on
// them. A step names the metrics it reports; the loop reduces them over all ranks and logs them (JSONL,
// console, the Katib line) by those names.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/train/metrics.h"
#include "runtime/train/train_state.h"

namespace dtrain {

class TrainStep {
 public:
  virtual ~TrainStep() = default;

  // The metrics train() adds to, in the order the logs show them (a classifier: "loss").
  virtual std::vector<std::string> train_metrics() const = 0;
  // The metrics evaluate() adds to; the Katib line lists them in this order (a classifier: "accuracy",
  // "loss").
  virtual std::vector<std::string> eval_metrics() const = 0;

  // One micro-batch of training: forward under state.autocast(), state.backward() for each loss and
  // state.step() for each module to update (they act on the last micro-batch of an optimizer step only),
  // and `metrics.add()` of this rank's sums (e.g. the loss times the batch size, weight batch.size).
  virtual void train(const Batch& batch, TrainState& state, MetricSums& metrics) = 0;

  // One batch of the test set, in eval mode and without gradients (the loop sets both).
  virtual void evaluate(const Batch& batch, TrainState& state, MetricSums& metrics) = 0;
};

}  // namespace dtrain
