// Runs the real trainer with the bucketed reducer on any communicator and returns its results and final
// parameters, with console output captured instead of printed.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/comm/local_communicator.h"
#include "runtime/reduce/bucketed_reducer.h"
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

// `device_steps`: optimizer steps taken on the device (TrainState::enable_device_steps), as a captured step
// takes them.
inline TrainRun train_run(const TrainConfig& config, const Workload& workload, Communicator& comm,
                          ReducerOptions buckets = ReducerOptions{BucketOptions{512, 64}},
                          c10::Device device = c10::Device(c10::DeviceType::CPU), bool device_steps = false) {
  ReducerFactory make_reducer = [buckets](std::vector<at::Tensor> params, const std::vector<at::Tensor>& buffers,
                                          Communicator& c) -> std::unique_ptr<GradReducer> {
    return std::make_unique<BucketedReducer>(std::move(params), buffers, c, buckets);
  };
  std::ostringstream console;
  RunLogger logger(config.log, comm.is_root(), config.workload, console);
  Trainer trainer(config, workload, comm, logger, make_reducer, device);
  if (device_steps) trainer.state().enable_device_steps();
  trainer.restore();
  TrainRun run;
  run.result = trainer.run(RunInfo{});
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
