// Runs the real trainer with the bucketed reducer on any communicator and returns its results and final
// parameters, with console output captured instead of printed.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/comm/local_communicator.h"
#include "runtime/config/config_yaml.h"
#include "runtime/reduce/bucketed_reducer.h"
#include "runtime/reduce/shard_tree_reducer.h"
#include "runtime/train/run_directory.h"
#include "runtime/train/trainer.h"
#include "test/support/params.h"

namespace dtrain::test {

struct TrainRun {
  at::Tensor params;                                // flattened final parameters of every module, in order
  std::map<std::string, at::Tensor> module_params;  // flattened final parameters of each module
  at::Tensor buffers;                               // flattened final floating-point buffers of every module
  TrainResult result;
  std::string console;
};

// The run directory of a test's run, opened on rank 0 as dtrain opens it (nullptr on other ranks).
inline std::unique_ptr<RunDirectory> open_run_directory(const TrainConfig& config, const Communicator& comm) {
  return comm.is_root() ? RunDirectory::open(config, 0.0) : nullptr;
}

// `config` with checkpoint.dir where `run_dir` put it (rank 0; other ranks keep the configured one).
inline TrainConfig resolved(TrainConfig config, const RunDirectory* run_dir) {
  if (run_dir != nullptr) config.checkpoint.dir = run_dir->checkpoint_dir();
  return config;
}

// Called with the trainer and its logger before the run: adds observers (which must outlive the run).
using ObserverSetup = std::function<void(Trainer&, RunLogger&)>;

inline TrainRun train_run(const TrainConfig& config, const Workload& workload, Communicator& comm,
                          ReducerOptions buckets = ReducerOptions{BucketOptions{512, 64}},
                          c10::Device device = c10::Device(c10::DeviceType::CPU),
                          const ObserverSetup& observe = nullptr) {
  ReducerFactory make_reducer = [buckets](std::vector<at::Tensor> params, const std::vector<at::Tensor>& buffers,
                                          Communicator& c, const ReducerPlan& plan) -> std::unique_ptr<GradReducer> {
    if (plan.shards > 0) {
      return std::make_unique<ShardTreeReducer>(std::move(params), buffers, c, plan.shards, plan.sharing_ranks);
    }
    return std::make_unique<BucketedReducer>(std::move(params), buffers, c, buckets);
  };
  std::ostringstream console;
  const std::unique_ptr<RunDirectory> run_dir = open_run_directory(config, comm);
  RunLogger logger(config.log, comm.is_root(), run_dir ? std::optional<Directory>(run_dir->directory()) : std::nullopt, console);
  Trainer trainer(resolved(config, run_dir.get()), workload, comm, logger, make_reducer, device);
  if (observe) observe(trainer, logger);
  trainer.restore();
  TrainRun run;
  RunInfo info;  // as dtrain fills it: later runs find this one's workload in its config.yaml
  info.workload = config.workload;
  info.config_yaml = to_yaml(config, ConfigSchema{});
  run.result = trainer.run(info);
  std::vector<at::Tensor> all;
  std::vector<at::Tensor> buffers;
  for (const TrainedModule& m : trainer.state().modules()) {
    all.push_back(flat_params(*m.module));
    run.module_params[m.name] = all.back();
    buffers.push_back(flat_buffers(*m.module));
  }
  run.params = at::cat(all);
  run.buffers = at::cat(buffers);
  run.console = console.str();
  return run;
}

// train_run on one rank.
inline TrainRun train_alone(const TrainConfig& config, const Workload& workload) {
  LocalCommunicator comm;
  return train_run(config, workload, comm);
}

// The message of the ErrorType that training on one rank throws, or "no error" when it throws none.
template <class ErrorType>
std::string training_error(const TrainConfig& config, const Workload& workload) {
  try {
    train_alone(config, workload);
  } catch (const ErrorType& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace dtrain::test
