#include "runtime/comm/make_communicator.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdlib>

#include "runtime/comm/mpi_communicator.h"
#include "runtime/device/gpu_assignment.h"
#include "runtime/util/error.h"
#include "runtime/util/strings.h"

#if DTRAIN_WITH_NCCL
#include "runtime/comm/nccl_communicator.h"
#endif
#if DTRAIN_WITH_CUDA_TORCH
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "runtime/device/cuda_kernel_inventory.h"
#endif

namespace dtrain {
namespace {

std::string cuda_visible_devices() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  return value == nullptr ? "" : value;
}

int visible_cuda_devices() {
#if DTRAIN_WITH_CUDA_TORCH
  return static_cast<int>(torch::cuda::device_count());
#else
  return 0;
#endif
}

#if DTRAIN_WITH_CUDA_TORCH
// Throws ConfigError when this LibTorch has no kernels for `device`'s compute capability: said at
// start-up, with what the build has and what to do, instead of "no kernel image is available" at the
// first operation. Silent when the library cannot be found or read (nothing to say it will fail).
void check_kernels_for(int device, const std::string& host);
#endif

}  // namespace

std::string libtorch_description() {
#if DTRAIN_WITH_CUDA_TORCH
  return std::string("libtorch ") + TORCH_VERSION + " with CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10);
#else
  return std::string("libtorch ") + TORCH_VERSION + ", CPU only";
#endif
}

std::vector<std::string> available_backends() {
#if DTRAIN_WITH_NCCL
  return {"mpi", "nccl"};
#else
  return {"mpi"};
#endif
}

std::vector<std::string> available_devices() {
  if (visible_cuda_devices() > 0) return {"cpu", "cuda"};
  return {"cpu"};
}

DeviceKind resolve_device(DeviceKind requested) {
  const int gpus = visible_cuda_devices();
  if (requested == DeviceKind::kAuto) return gpus > 0 ? DeviceKind::kCuda : DeviceKind::kCpu;
  if (requested == DeviceKind::kCuda && gpus == 0) {
#if DTRAIN_WITH_CUDA_TORCH
    const std::string visible = cuda_visible_devices();
    throw ConfigError("comm.device 'cuda' requested, but no CUDA device is visible to this process (" +
                      (visible.empty() ? std::string("CUDA_VISIBLE_DEVICES unset") : "CUDA_VISIBLE_DEVICES=" + visible) +
                      "); available devices: " + join(available_devices()));
#else
    throw ConfigError(std::string("comm.device 'cuda' requested, but this dtrain was built with a CPU-only LibTorch (") +
                      TORCH_VERSION + "); available devices: " + join(available_devices()) +
                      ". Build against a CUDA LibTorch (see docs/gpu.md)");
#endif
  }
  return requested;
}

BackendKind resolve_backend(BackendKind requested, DeviceKind device) {
#if DTRAIN_WITH_NCCL
  const bool nccl_built = true;
#else
  const bool nccl_built = false;
#endif
  switch (requested) {
    case BackendKind::kAuto:
      return device == DeviceKind::kCuda && nccl_built ? BackendKind::kNccl : BackendKind::kMpi;
    case BackendKind::kMpi:
      return BackendKind::kMpi;
    case BackendKind::kNccl:
      if (!nccl_built) {
        throw ConfigError("comm.backend 'nccl' is not built into this dtrain; available backends: " +
                          join(available_backends()) + ". Build with the CUDA toolkit and NCCL (see docs/gpu.md)");
      }
      if (device != DeviceKind::kCuda) {
        throw ConfigError(std::string("comm.backend 'nccl' needs comm.device 'cuda', but the device is '") +
                          to_string(device) + "'; use --backend mpi for CPU training");
      }
      return BackendKind::kNccl;
  }
  throw ConfigError("unknown comm.backend");
}

int select_cuda_device(const MpiSession& session, BackendKind backend) {
  GpuPlacement placement;
  placement.local_rank = session.local_rank();
  placement.local_world_size = session.local_world_size();
  placement.visible_gpus = visible_cuda_devices();
  placement.one_rank_per_gpu = backend == BackendKind::kNccl;
  placement.host = session.hostname();
  placement.cuda_visible_devices = cuda_visible_devices();
  const int device = assign_gpu(placement);
#if DTRAIN_WITH_CUDA_TORCH
  check_kernels_for(device, session.hostname());
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
#endif
  return device;
}

#if DTRAIN_WITH_CUDA_TORCH
namespace {

void check_kernels_for(int device, const std::string& host) {
  const std::string library = loaded_library_path("libtorch_cuda");
  if (library.empty()) return;
  std::optional<CudaKernelInventory> inventory;
  try {
    inventory = read_cuda_kernel_inventory(library);
  } catch (const DataError&) {
    return;
  }
  const cudaDeviceProp* gpu = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device));
  if (!inventory || inventory->modules() == 0 || inventory->runs_on(gpu->major, gpu->minor)) return;
  throw ConfigError(unsupported_gpu_message(GpuDescription{device, host, gpu->name, gpu->major, gpu->minor},
                                            libtorch_description() + " (" + library + ")", *inventory));
}

}  // namespace
#endif

std::unique_ptr<Communicator> make_communicator(const CommSetup& setup, const MpiSession& session) {
  switch (setup.backend) {
    case BackendKind::kMpi:
      return std::make_unique<MpiCommunicator>(session, setup.wait);
    case BackendKind::kNccl: {
#if DTRAIN_WITH_NCCL
      NcclOptions nccl;
      nccl.device = setup.cuda_device;
      nccl.wait = setup.wait;
      nccl.on_fatal = setup.on_fatal;
#if DTRAIN_WITH_CUDA_TORCH
      // Collectives follow whatever stream LibTorch computes on (autograd may use more than one).
      nccl.compute_stream = [] { return static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream()); };
#endif
      return std::make_unique<NcclCommunicator>(session, nccl);
#else
      break;
#endif
    }
    case BackendKind::kAuto:
      break;
  }
  throw ConfigError(std::string("cannot build a communicator for backend '") + to_string(setup.backend) +
                    "'; available backends: " + join(available_backends()) +
                    " (resolve 'auto' with resolve_backend first)");
}

}  // namespace dtrain
