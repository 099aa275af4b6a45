#include "runtime/device/gpu_assignment.h"

#include <sstream>

#include "runtime/util/error.h"

namespace dtrain {
namespace {

std::string visible_devices_note(const GpuPlacement& p) {
  return p.cuda_visible_devices.empty() ? "CUDA_VISIBLE_DEVICES unset"
                                        : "CUDA_VISIBLE_DEVICES=" + p.cuda_visible_devices;
}

}  // namespace

int assign_gpu(const GpuPlacement& p) {
  if (p.visible_gpus <= 0) {
    std::ostringstream os;
    os << "host " << p.host << " has no visible CUDA device (" << visible_devices_note(p)
       << "); use --device cpu, or run on a node with a GPU";
    throw ConfigError(os.str());
  }
  if (p.local_world_size > p.visible_gpus && p.one_rank_per_gpu) {
    std::ostringstream os;
    os << "host " << p.host << " runs " << p.local_world_size << " ranks but has only " << p.visible_gpus
       << " visible GPU" << (p.visible_gpus == 1 ? "" : "s") << " (" << visible_devices_note(p)
       << "); the NCCL backend needs one GPU per rank: start at most " << p.visible_gpus
       << " ranks per node, or use --backend mpi to share GPUs";
    throw ConfigError(os.str());
  }
  return p.local_rank % p.visible_gpus;
}

}  // namespace dtrain
