#include "runtime/train/module_setup.h"

#include <ATen/ATen.h>

#include "runtime/nn/batch_norm.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/check.h"

namespace dtrain {

PreparedModule prepare_module(NamedModule& named, const TrainOptions& options, c10::Device device,
                              Communicator* sync_comm) {
  PreparedModule prepared;
  named.module->to(device);
  if (options.sync_batchnorm) prepared.synced_batchnorms = sync_batchnorm_statistics(*named.module, sync_comm);
  if (options.channels_last) {
    // NHWC weights, so that convolutions on NHWC inputs need no layout change in forward or backward.
    at::NoGradGuard no_grad;
    for (at::Tensor& p : named.module->parameters()) {
      if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  if (named.trained) {
    prepared.optimizer = make_optimizer(options, *named.module, named.no_weight_decay);
  } else {
    for (at::Tensor& p : named.module->parameters()) p.set_requires_grad(false);
  }
  return prepared;
}

void add_workload_modules(const Workload& workload, const WorkloadData& data, const TrainConfig& config,
                          c10::Device device, Communicator& comm, TrainState& state) {
  int64_t synced_batchnorms = 0;
  for (NamedModule& named : workload.make_modules(data, config)) {
    // On one rank the global batch is the rank's own: plain BatchNorm computes the same, without the
    // collectives.
    PreparedModule prepared = prepare_module(named, config.train, device, comm.world_size() > 1 ? &comm : nullptr);
    synced_batchnorms += prepared.synced_batchnorms;
    state.add(named.name, std::move(named.module), std::move(prepared.optimizer));
  }
  DTRAIN_CHECK(!state.modules().empty(), Error, "workload '" << workload.name() << "' made no modules to train");
  DTRAIN_CHECK(!config.train.sync_batchnorm || synced_batchnorms > 0, ConfigError,
               "train.sync_batchnorm is set, but the " << workload.name()
                                                       << " workload's model has no BatchNorm layers to sync");
}

}  // namespace dtrain
