// The one training loop: epochs of sharded training with gradient averaging, evaluation on the whole
// test set, the learning-rate schedule, checkpoints and metrics reduced over all ranks.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/log/run_logger.h"
#include "runtime/reduce/grad_reducer.h"
#include "runtime/train/loss_scaler.h"
#include "runtime/train/metrics.h"
#include "runtime/train/workload.h"

namespace torch::optim {
class Optimizer;
}

namespace dtrain {

// Builds the gradient reducer for the model's parameters and buffers (the caller picks the class).
using ReducerFactory = std::function<std::unique_ptr<GradReducer>(
    std::vector<at::Tensor> params, const std::vector<at::Tensor>& buffers, Communicator& comm)>;

struct TrainResult {
  std::vector<EpochStats> epochs;  // the epochs this run trained (after a resume: only the new ones)
  RunSummary summary;
};

class Trainer final {
 public:
  // Local: builds the model and optimizer on `device` and loads the data there (uploaded once; batches
  // are gathered on the device). Throws DataError/ConfigError; nothing collective happens here, so the
  // caller can agree on failure across ranks before run().
  Trainer(const TrainConfig& config, const Workload& workload, Communicator& comm, RunLogger& logger,
          ReducerFactory make_reducer, c10::Device device = c10::Device(c10::DeviceType::CPU));
  ~Trainer();

  // Collective: resumes if configured, makes the replicas identical, trains the remaining epochs.
  // `info` is completed with the data facts and logged as the run start.
  TrainResult run(RunInfo info);

  Model& model() { return *model_; }
  const WorkloadData& data() const { return data_; }

 private:
  MetricTotals train_epoch(int64_t epoch, GradReducer& reducer, EpochStats& stats);
  MetricTotals evaluate();
  // One optimizer step on the averaged gradients; with fp16, skipped when they overflowed.
  void optimizer_step();

  const TrainConfig config_;
  const Workload& workload_;
  Communicator& comm_;
  RunLogger& logger_;
  ReducerFactory make_reducer_;
  c10::Device device_;
  std::unique_ptr<LossScaler> scaler_;  // fp16 only
  std::shared_ptr<Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  WorkloadData data_;
  int64_t seed_;
};

}  // namespace dtrain
