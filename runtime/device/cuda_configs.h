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

struct GpuDescription {
  int index = 0;
  std::string host;
  std::string name;  // e.g. "Tesla V100-SXM2-16GB"
  int major = 0;     // compute capability
  int minor = 0;
};

// The start-up error for a GPU that `library` (e.g. "libtorch 2.11.0 with CUDA 13.0 (path)") has no
// kernels for: which GPU, what the library has, and what to do: the configuration of dtrain
// (cuda_configs.h) whose image and build have kernels for it, or that none has.
std::string unsupported_gpu_message(const GpuDescription& gpu, const std::string& library,
                                    const CudaKernelInventory& inventory);

}  // namespace dtrain
