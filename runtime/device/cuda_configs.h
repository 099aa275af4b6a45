// dtrain's CUDA configurations: the PyPI LibTorch each builds against (scripts/install_cuda_torch.sh),
// the image it ships as (deploy/docker/Dockerfile.cuda) and the GPU kernels its libtorch_cuda.so has,
// as dtrain's own inventory read them (cuda_kernel_inventory.h). The start-up check uses this table to
// name the configuration that runs on a GPU the loaded LibTorch cannot drive; the unit tests check each
// entry against the real library of the build that uses it, so the table cannot drift from the scripts.
#pragma once

#include <string>
#include <vector>

#include "runtime/device/cuda_kernel_inventory.h"

namespace dtrain {

struct CudaConfig {
  std::string name;           // "current", "volta": the argument of scripts/build_cuda.sh
  std::string torch_version;  // "2.11.0"
  std::string cuda_version;   // "13.0": the CUDA that LibTorch was built with
  std::string image_kind;     // "cuda": the argument of scripts/build_image.sh
  std::vector<KernelImage> kernels;  // the images every module of its libtorch_cuda.so has

  std::string image() const { return "dtrain:" + image_kind; }  // the tag scripts/build_image.sh gives it
  CudaKernelInventory inventory() const { return CudaKernelInventory({kernels}); }
  bool runs_on(int major, int minor) const { return inventory().runs_on(major, minor); }
};

// Every configuration, newest LibTorch first.
const std::vector<CudaConfig>& cuda_configs();

// The configuration that builds against LibTorch `torch_version` (e.g. "2.7.1"), or nullptr.
const CudaConfig* cuda_config_for_torch(const std::string& torch_version);

}  // namespace dtrain
