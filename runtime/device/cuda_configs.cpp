#include "runtime/device/cuda_configs.h"

#include <algorithm>

namespace dtrain {

namespace {

std::vector<KernelImage> cubins(std::initializer_list<int> archs) {
  std::vector<KernelImage> images;
  for (int arch : archs) images.push_back(KernelImage{arch, false, false});
  return images;
}

}  // namespace

const std::vector<CudaConfig>& cuda_configs() {
  // Read from the wheels with read_cuda_kernel_inventory (docs/gpu.md, "Two CUDA configurations", lists
  // every PyPI version checked). CUDA 13 builds nothing older than sm_75; PyPI's torch 2.8 to 2.10
  // (CUDA 12.8) dropped sm_50 and sm_60, so 2.7.1 is the newest with Pascal and Volta kernels.
  // scripts/install_cuda_torch.sh installs these versions; deploy/k8s/render_mpijob.py repeats the table.
  static const std::vector<CudaConfig> configs{
      {"current", "2.11.0", "13.0", "cuda", cubins({75, 80, 86, 90, 100, 120})},
      {"volta", "2.7.1", "12.6", "cuda-volta", cubins({50, 60, 70, 75, 80, 86, 90})},
  };
  return configs;
}

const CudaConfig* cuda_config_for_torch(const std::string& torch_version) {
  const auto& configs = cuda_configs();
  const auto it = std::find_if(configs.begin(), configs.end(),
                               [&](const CudaConfig& c) { return c.torch_version == torch_version; });
  return it == configs.end() ? nullptr : &*it;
}

}  // namespace dtrain
