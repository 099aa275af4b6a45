#include "runtime/device/cuda_configs.h"

#include <algorithm>

#include "runtime/util/strings.h"

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

std::string unsupported_gpu_message(const GpuDescription& gpu, const std::string& library,
                                    const CudaKernelInventory& inventory) {
  const std::string arch = "sm_" + std::to_string(gpu.major) + std::to_string(gpu.minor);
  std::vector<std::string> fits;
  std::vector<std::string> all;
  for (const CudaConfig& c : cuda_configs()) {
    const std::string kernels = c.inventory().common_images();
    all.push_back(c.name + ": " + kernels);
    if (!c.runs_on(gpu.major, gpu.minor)) continue;
    fits.push_back("dtrain's " + c.name + " configuration (LibTorch " + c.torch_version + " with CUDA " +
                   c.cuda_version + ", kernels " + kernels + "): the image " + c.image() +
                   " (bash scripts/build_image.sh " + c.image_kind + ") or a build with bash scripts/build_cuda.sh " +
                   c.name);
  }
  std::string what_to_do;
  if (!fits.empty()) {
    what_to_do = "Use " + join(fits, ", or ") + "; or another GPU, or --device cpu";
  } else {
    what_to_do = "No configuration of dtrain has " + arch + " kernels (" + join(all, "; ") +
                 "; PyPI's LibTorch builds have none older than sm_50): use another GPU or --device cpu";
  }
  return "GPU " + std::to_string(gpu.index) + " on host " + gpu.host + " (" + gpu.name + ", compute capability " +
         std::to_string(gpu.major) + "." + std::to_string(gpu.minor) + ") cannot run this LibTorch's CUDA kernels: " +
         library + " has kernels for " + inventory.common_images() + " and none for " + arch + ". " + what_to_do +
         " (docs/gpu.md)";
}

}  // namespace dtrain
