#include "runtime/comm/make_communicator.h"

#include "runtime/comm/mpi_communicator.h"
#include "runtime/util/error.h"

namespace dtrain {

std::vector<std::string> available_backends() { return {"mpi"}; }

DeviceKind resolve_device(DeviceKind requested) {
  // This build has no CUDA support: the CPU is the only device.
  if (requested == DeviceKind::kCuda) {
    throw ConfigError("comm.device 'cuda' requested, but this dtrain was built without CUDA; available devices: cpu");
  }
  return DeviceKind::kCpu;
}

BackendKind resolve_backend(BackendKind requested, DeviceKind device) {
  if (requested == BackendKind::kNccl) {
    std::string names;
    for (const std::string& name : available_backends()) names += (names.empty() ? "" : ", ") + name;
    throw ConfigError("comm.backend 'nccl' is not built into this dtrain; available backends: " + names);
  }
  return BackendKind::kMpi;
}

std::unique_ptr<Communicator> make_communicator(BackendKind backend, const MpiSession& session,
                                                const CommOptions& options) {
  switch (backend) {
    case BackendKind::kMpi: return std::make_unique<MpiCommunicator>(session, options.timeout_s);
    case BackendKind::kAuto:
    case BackendKind::kNccl: break;
  }
  throw ConfigError(std::string("cannot build a communicator for backend '") + to_string(backend) +
                    "'; resolve it with resolve_backend first");
}

}  // namespace dtrain
