// Which GPU a rank computes on: derived from its local rank among the GPUs this process can see
// (CUDA_VISIBLE_DEVICES already applied), with a clear error when a node has too few.
#pragma once

#include <string>

namespace dtrain {

struct GpuPlacement {
  int local_rank = 0;
  int local_world_size = 1;  // ranks on this node
  int visible_gpus = 0;      // what the CUDA runtime reports for this process
  // NCCL cannot put two ranks of one communicator on one GPU; the MPI backend can (it stages through
  // host memory), which lets a multi-rank run work on a single-GPU machine.
  bool one_rank_per_gpu = true;
  std::string host;                  // for the error message
  std::string cuda_visible_devices;  // the variable's value ("" when unset), for the error message
};

// Local. Returns the CUDA device index of this rank: local_rank, or local_rank modulo the visible GPUs
// when ranks may share. Throws ConfigError naming the host and the counts when the node runs more ranks
// than it has GPUs and sharing is not allowed, or when it has none.
int assign_gpu(const GpuPlacement& placement);

}  // namespace dtrain
