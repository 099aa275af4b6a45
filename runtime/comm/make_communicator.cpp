#include "runtime/comm/make_communicator.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdlib>
#include <functional>
#include <optional>

#include "runtime/comm/mpi_communicator.h"
#include "runtime/device/gpu_assignment.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"

#if DTRAIN_WITH_NCCL
#include "runtime/comm/nccl_communicator.h"
#endif
#if DTRAIN_WITH_GLOO
#include "runtime/comm/gloo_communicator.h"
#endif
#if DTRAIN_WITH_CUDA_TORCH
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "runtime/device/cuda_configs.h"
#include "runtime/device/cuda_kernel_inventory.h"
#endif

namespace dtrain {
namespace {

std::string cuda_visible_devices() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  return value == nullptr ? "" : value;
}

// --- what this build has: the file's only #ifs, each choosing one definition -----------------------

#if DTRAIN_WITH_CUDA_TORCH
constexpr bool kCudaTorch = true;

int visible_cuda_devices() { return static_cast<int>(torch::cuda::device_count()); }

std::string cuda_runtime_version() {
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
}

// The GPU kernels of the loaded libtorch_cuda.so (`library`: its path); nullopt when it is not loaded or has
// no GPU code. Throws DataError when the file cannot be read.
std::optional<CudaKernelInventory> torch_kernels(std::string& library) {
  library = loaded_library_path("libtorch_cuda");
  if (library.empty()) return std::nullopt;
  return read_cuda_kernel_inventory(library);
}

// Throws ConfigError when this LibTorch has no kernels for `device`'s compute capability: said at
// start-up, with what the build has and what to do, instead of "no kernel image is available" at the
// first operation. Silent when the library cannot be found or read (nothing to say it will fail).
void check_kernels_for(int device, const std::string& host) {
  std::string library;
  std::optional<CudaKernelInventory> inventory;
  try {
    inventory = torch_kernels(library);
  } catch (const DataError&) {
    return;
  }
  const cudaDeviceProp* gpu = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device));
  if (!inventory || inventory->modules() == 0 || inventory->runs_on(gpu->major, gpu->minor)) return;
  throw ConfigError(unsupported_gpu_message(GpuDescription{device, host, gpu->name, gpu->major, gpu->minor},
                                            libtorch_description() + " (" + library + ")", *inventory));
}

std::string gpu_kernels() {
  std::string library;
  try {
    const std::optional<CudaKernelInventory> inventory = torch_kernels(library);
    return inventory ? inventory->common_images() : "";
  } catch (const DataError& e) {
    return std::string("unreadable: ") + e.what();
  }
}

void use_cuda_device(int device) { c10::cuda::set_device(static_cast<c10::DeviceIndex>(device)); }

// The stream LibTorch computes on (autograd may use more than one): collectives follow it.
std::function<void*()> torch_compute_stream() {
  return [] { return static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream()); };
}
#else
constexpr bool kCudaTorch = false;
int visible_cuda_devices() { return 0; }
std::string cuda_runtime_version() { return ""; }
std::string gpu_kernels() { return ""; }
void check_kernels_for(int, const std::string&) {}
void use_cuda_device(int) {}
std::function<void*()> torch_compute_stream() { return {}; }
#endif

#if DTRAIN_WITH_NCCL
constexpr bool kNcclBuilt = true;

// CPU tensors go over MPI when MPI started the ranks; under torchrun, through the GPU.
std::unique_ptr<Communicator> make_nccl_communicator(const CommSetup& setup, Session& session) {
  NcclOptions nccl;
  nccl.device = setup.cuda_device;
  nccl.wait = setup.wait;
  nccl.on_fatal = setup.on_fatal;
  nccl.compute_stream = torch_compute_stream();
  std::unique_ptr<Communicator> host;
  if (session.mpi_world()) host = std::make_unique<MpiCommunicator>(session, setup.wait);
  return std::make_unique<NcclCommunicator>(session, std::move(host), nccl);
}
#else
constexpr bool kNcclBuilt = false;
std::unique_ptr<Communicator> make_nccl_communicator(const CommSetup&, Session&) { return nullptr; }
#endif

#if DTRAIN_WITH_GLOO
constexpr bool kGlooBuilt = true;

std::unique_ptr<Communicator> make_gloo_communicator(const CommSetup& setup, Session& session) {
  GlooOptions gloo;
  gloo.wait = setup.wait;
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME")) gloo.interface = interface;
  return std::make_unique<GlooCommunicator>(session, gloo);
}
#else
constexpr bool kGlooBuilt = false;
std::unique_ptr<Communicator> make_gloo_communicator(const CommSetup&, Session&) { return nullptr; }
#endif

}  // namespace

std::string libtorch_description() {
  return std::string("libtorch ") + TORCH_VERSION + (kCudaTorch ? " with CUDA " + cuda_runtime_version() : ", CPU only");
}

std::string libtorch_kernels_description() {
  const std::string kernels = gpu_kernels();
  return kernels.empty() ? libtorch_description() : libtorch_description() + ", GPU kernels " + kernels;
}

std::vector<std::string> available_backends() {
  std::vector<std::string> backends{"mpi"};
  // NCCL carries CUDA tensors only: with a CPU-only LibTorch it is compiled in but cannot be used.
  if (kNcclBuilt && kCudaTorch) backends.push_back("nccl");
  if (kGlooBuilt) backends.push_back("gloo");
  return backends;
}

std::vector<std::string> available_devices() {
  if (visible_cuda_devices() > 0) return {"cpu", "cuda"};
  return {"cpu"};
}

DeviceKind resolve_device(DeviceKind requested) {
  const int gpus = visible_cuda_devices();
  if (requested == DeviceKind::kAuto) return gpus > 0 ? DeviceKind::kCuda : DeviceKind::kCpu;
  if (requested == DeviceKind::kCuda && gpus == 0) {
    if (!kCudaTorch) {
      throw ConfigError(std::string("comm.device 'cuda' requested, but this dtrain was built with a CPU-only LibTorch (") +
                        TORCH_VERSION + "); available devices: " + join(available_devices()) +
                        ". Build against a CUDA LibTorch (see docs/gpu.md)");
    }
    const std::string visible = cuda_visible_devices();
    throw ConfigError("comm.device 'cuda' requested, but no CUDA device is visible to this process (" +
                      (visible.empty() ? std::string("CUDA_VISIBLE_DEVICES unset") : "CUDA_VISIBLE_DEVICES=" + visible) +
                      "); available devices: " + join(available_devices()));
  }
  return requested;
}

BackendKind resolve_backend(BackendKind requested, DeviceKind device, BootstrapKind bootstrap) {
  const bool under_mpi = bootstrap != BootstrapKind::kEnv;
  switch (requested) {
    case BackendKind::kAuto:
      if (device == DeviceKind::kCuda && kNcclBuilt && kCudaTorch) return BackendKind::kNccl;
      if (under_mpi) return BackendKind::kMpi;
      if (kGlooBuilt) return BackendKind::kGloo;
      throw ConfigError("under torchrun's environment (comm.bootstrap 'env') CPU training needs the gloo backend, "
                        "which is not built into this dtrain (" + libtorch_description() + "; available backends: " +
                        join(available_backends()) + "): build against a LibTorch with Gloo headers (Debian: "
                        "libgloo-dev), train on GPUs with nccl, or start the ranks with mpirun or srun");
    case BackendKind::kMpi:
      if (!under_mpi) {
        throw ConfigError("comm.backend 'mpi' needs ranks that an MPI launcher started (mpirun, srun), but comm.bootstrap "
                          "is 'env' (torchrun's variables); use --backend gloo on CPUs or nccl on GPUs");
      }
      return BackendKind::kMpi;
    case BackendKind::kNccl:
      if (!kCudaTorch) {
        throw ConfigError(std::string("comm.backend 'nccl' needs a CUDA LibTorch, but this dtrain was built with a "
                                      "CPU-only LibTorch (") + TORCH_VERSION + "); available backends: " +
                          join(available_backends()) + ". Build against a CUDA LibTorch (see docs/gpu.md)");
      }
      if (!kNcclBuilt) {
        throw ConfigError("comm.backend 'nccl' is not built into this dtrain; available backends: " +
                          join(available_backends()) + ". Build with the CUDA toolkit and NCCL (see docs/gpu.md)");
      }
      if (device != DeviceKind::kCuda) {
        throw ConfigError(std::string("comm.backend 'nccl' needs comm.device 'cuda', but the device is '") +
                          to_string(device) + "'; use --backend mpi for CPU training");
      }
      return BackendKind::kNccl;
    case BackendKind::kGloo:
      if (!kGlooBuilt) {
        throw ConfigError("comm.backend 'gloo' is not built into this dtrain; available backends: " +
                          join(available_backends()) +
                          ". It needs a LibTorch whose Gloo headers are installed (Debian: libgloo-dev)");
      }
      if (device != DeviceKind::kCpu) {
        throw ConfigError(std::string("comm.backend 'gloo' carries CPU tensors, but the device is '") +
                          to_string(device) + "'; use --backend nccl on GPUs");
      }
      return BackendKind::kGloo;
  }
  throw ConfigError("unknown comm.backend");
}

int select_cuda_device(const Session& session, BackendKind backend) {
  GpuPlacement placement;
  placement.local_rank = session.local_rank();
  placement.local_world_size = session.local_world_size();
  placement.visible_gpus = visible_cuda_devices();
  placement.one_rank_per_gpu = backend == BackendKind::kNccl;
  placement.host = session.hostname();
  placement.cuda_visible_devices = cuda_visible_devices();
  const int device = assign_gpu(placement);
  check_kernels_for(device, session.hostname());
  use_cuda_device(device);
  return device;
}

std::unique_ptr<Communicator> make_communicator(const CommSetup& setup, Session& session) {
  std::unique_ptr<Communicator> comm;
  if (setup.backend == BackendKind::kMpi) comm = std::make_unique<MpiCommunicator>(session, setup.wait);
  if (setup.backend == BackendKind::kNccl) comm = make_nccl_communicator(setup, session);
  if (setup.backend == BackendKind::kGloo) comm = make_gloo_communicator(setup, session);
  if (comm) return comm;
  throw ConfigError(std::string("cannot build a communicator for backend '") + to_string(setup.backend) +
                    "'; available backends: " + join(available_backends()) +
                    " (resolve 'auto' with resolve_backend first)");
}

}  // namespace dtrain
