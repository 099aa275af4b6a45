// Which launcher started this process, from its environment. dtrain joins its ranks through MPI; a
// process that torchrun or a Kubeflow PyTorchJob started (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
// but no MPI launcher is a rank of a job dtrain cannot join yet, and must stop instead of training alone.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace dtrain {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
EnvLookup process_environment();

struct LauncherEnv {
  std::string mpi_variable;   // the first MPI launcher variable found (OMPI_COMM_WORLD_SIZE, PMIX_RANK, ...), or ""
  int torch_world_size = 0;   // WORLD_SIZE of torchrun / PyTorchJob, 0 when unset or unusable
  std::string torch_summary;  // "RANK=1 WORLD_SIZE=2 MASTER_ADDR=host MASTER_PORT=29500" as found
};

LauncherEnv read_launcher_env(const EnvLookup& env);

// Throws ConfigError when the environment describes a multi-process torchrun/PyTorchJob job but this
// process is a world of `mpi_world_size` 1 started by no MPI launcher: it would train alone. Returns a
// note ("" if none) when both an MPI launcher and torchrun's variables are present and MPI decides.
std::string check_launcher(const LauncherEnv& launcher, int mpi_world_size);

}  // namespace dtrain
