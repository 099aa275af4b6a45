// Backend and device selection: resolves "auto" and builds the Communicator. The one place that knows
// which backends this build contains.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/bootstrap/mpi_session.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"

namespace dtrain {

// Backends compiled into this build, e.g. {"mpi"}.
std::vector<std::string> available_backends();

// Resolves comm.device and comm.backend ("auto" picks CUDA+NCCL when usable, else CPU+MPI). Throws
// ConfigError, listing what is available, when the request cannot be met; never falls back silently.
DeviceKind resolve_device(DeviceKind requested);
BackendKind resolve_backend(BackendKind requested, DeviceKind device);

// Collective: every rank of `session` must call it with the same options.
std::unique_ptr<Communicator> make_communicator(BackendKind backend, const MpiSession& session,
                                                const CommOptions& options);

}  // namespace dtrain
