// A workload's module made ready for the training loop: on the run's device, its BatchNorm layers synced
// over the ranks (train.sync_batchnorm), its 4-d weights in NHWC order (train.channels_last), and its
// optimizer.
#pragma once

#include <c10/core/Device.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/train/train_state.h"
#include "runtime/train/workload.h"

namespace dtrain {

struct PreparedModule {
  std::unique_ptr<torch::optim::Optimizer> optimizer;  // none for a module the step updates itself
  int64_t synced_batchnorms = 0;  // BatchNorm layers whose statistics now span the ranks
};

// Local. Moves named.module to `device` (before the optimizer takes its parameters), then applies the
// options: sync_batchnorm over `sync_comm` (nullptr: plain BatchNorm, as on one rank), channels_last,
// and an optimizer for a trained module; a module that is not trained takes no gradients.
PreparedModule prepare_module(NamedModule& named, const TrainOptions& options, c10::Device device,
                              Communicator* sync_comm);

// Local: the workload's modules for `data` (Workload::make_modules), each prepared as above (BatchNorm
// synced over `comm` where it has more than one rank) and added to `state` with its optimizer. Throws
// Error when the workload makes none, ConfigError when train.sync_batchnorm finds no BatchNorm layer.
void add_workload_modules(const Workload& workload, const WorkloadData& data, const TrainConfig& config,
                          c10::Device device, Communicator& comm, TrainState& state);

}  // namespace dtrain
