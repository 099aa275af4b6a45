// Which GPU architectures a CUDA library has kernels for, read from the fatbinaries in its ELF
// .nv_fatbin section, and whether a GPU of a given compute capability can run them. Lets dtrain say at
// start-up that a LibTorch cannot drive this GPU, instead of failing at the first operation with "no
// kernel image is available". Plain file reading: no CUDA needed, so it is built and tested everywhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dtrain {

struct KernelImage {
  int arch = 0;                // 10 x major + minor: 75 for sm_75, 100 for sm_100
  bool ptx = false;            // PTX, compiled by the driver for this arch and every newer one
  bool arch_specific = false;  // an "a" image (sm_90a): runs on exactly this arch
};

// "sm_86", "sm_90a" or "compute_90" (PTX).
std::string to_string(const KernelImage& image);

// Whether `image` runs on a GPU of compute capability major.minor: a cubin on the same major and an
// equal or higher minor, an arch-specific cubin on its own arch only, PTX on its arch and newer.
bool runs_on(const KernelImage& image, int major, int minor);

class CudaKernelInventory final {
 public:
  explicit CudaKernelInventory(std::vector<std::vector<KernelImage>> modules) : modules_(std::move(modules)) {}

  size_t modules() const { return modules_.size(); }  // fatbinaries: about one per CUDA source file
  // True when every module has an image for compute capability major.minor: otherwise some kernel
  // would be missing, and the first operation that needs it fails.
  bool runs_on(int major, int minor) const;
  // The images that every module has, e.g. "sm_75, sm_80, sm_86, sm_90, sm_100, sm_120".
  std::string common_images() const;

 private:
  std::vector<std::vector<KernelImage>> modules_;
};

// Reads the inventory of an ELF shared library or executable. nullopt when it has no .nv_fatbin section
// (no GPU code). Throws DataError naming the file when it cannot be read or its fatbinaries are malformed.
std::optional<CudaKernelInventory> read_cuda_kernel_inventory(const std::string& path);

// The path of a library loaded into this process whose file name contains `name` (e.g.
// "libtorch_cuda"), or "" when none is.
std::string loaded_library_path(const std::string& name);

}  // namespace dtrain
