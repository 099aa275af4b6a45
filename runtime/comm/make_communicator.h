// Backend and device selection: resolves "auto", picks this rank's GPU and builds the Communicator.
// The one place that knows which backends and devices this build contains.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap/session.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/util/error.h"

namespace dtrain {

// Backends compiled into this build, e.g. {"mpi", "nccl"}.
std::vector<std::string> available_backends();

// The LibTorch this build uses, e.g. "libtorch 2.11.0 with CUDA 13.0" or "libtorch 1.13.0, CPU only".
std::string libtorch_description();
// The same, with the GPU architectures its CUDA kernels are built for (read from the loaded
// libtorch_cuda.so): "libtorch 2.7.1 with CUDA 12.6, GPU kernels sm_50, sm_60, ..., sm_90".
std::string libtorch_kernels_description();

// Devices usable by this process: "cpu", plus "cuda" when LibTorch has CUDA and a GPU is visible.
std::vector<std::string> available_devices();

// Local. Resolve comm.device and comm.backend: "auto" picks CUDA and NCCL when a GPU is visible and
// NCCL was built in, else CPU and MPI (Gloo when the ranks came from torchrun's environment, `bootstrap`
// env). Throws ConfigError, listing what is available, when the request cannot be met; never falls back
// silently.
DeviceKind resolve_device(DeviceKind requested);
BackendKind resolve_backend(BackendKind requested, DeviceKind device, BootstrapKind bootstrap);

// Local. The CUDA device of this rank from its local rank (see assign_gpu), made LibTorch's current
// device. Throws ConfigError when the node has too few GPUs for the backend.
int select_cuda_device(const Session& session, BackendKind backend);

struct CommSetup {
  BackendKind backend = BackendKind::kMpi;  // resolved
  int cuda_device = -1;                     // from select_cuda_device; NCCL only
  WaitOptions wait;                         // timeout (comm.timeout_s), wait marking, stall reports
  // NCCL's watchdog calls this after aborting a timed-out or failed communicator; it must end the job.
  std::function<void(const CommError& error)> on_fatal;
};

// Collective: every rank of `session` must call it with the same backend. MPI needs an MpiSession.
std::unique_ptr<Communicator> make_communicator(const CommSetup& setup, Session& session);

}  // namespace dtrain
