// The one training loop: epochs of sharded training with gradient averaging, evaluation on the whole
// test set, the learning-rate schedule, checkpoints and metrics reduced over all ranks.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/log/run_logger.h"
#include "runtime/reduce/grad_reducer.h"
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
  // Local: builds the model and optimizer and loads the data. Throws DataError/ConfigError; nothing
  // collective happens here, so the caller can agree on failure across ranks before run().
  Trainer(const TrainConfig& config, const Workload& workload, Communicator& comm, RunLogger& logger,
          ReducerFactory make_reducer);
  ~Trainer();

  // Collective: resumes if configured, makes the replicas identical, trains the remaining epochs.
  // `info` is completed with the data facts and logged as the run start.
  TrainResult run(RunInfo info);

  Model& model() { return *model_; }
  const WorkloadData& data() const { return data_; }

 private:
  MetricTotals train_epoch(int64_t epoch, GradReducer& reducer, EpochStats& stats);
  MetricTotals evaluate();

  const TrainConfig config_;
  const Workload& workload_;
  Communicator& comm_;
  RunLogger& logger_;
  ReducerFactory make_reducer_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  WorkloadData data_;
  int64_t seed_;
};

}  // namespace dtrain
