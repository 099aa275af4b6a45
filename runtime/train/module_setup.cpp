#include "runtime/train/module_setup.h"

#include <ATen/ATen.h>

#include "runtime/nn/batch_norm.h"
#include "runtime/train/optimizer_factory.h"

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

}  // namespace dtrain
