#include "runtime/bootstrap/launcher_env.h"

#include <charconv>
#include <cstdlib>

#include "runtime/util/error.h"

namespace dtrain {
namespace {

// Set by the MPI launchers dtrain runs under: Open MPI's mpirun, PMIx (srun --mpi=pmix, prterun),
// PMI-1/2 (srun --mpi=pmi2, MPICH's hydra).
constexpr const char* kMpiVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

LauncherEnv read_launcher_env(const EnvLookup& env) {
  LauncherEnv launcher;
  for (const char* name : kMpiVariables) {
    if (env(name)) {
      launcher.mpi_variable = name;
      break;
    }
  }
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    if (const std::optional<std::string> value = env(name)) {
      launcher.torch_summary += (launcher.torch_summary.empty() ? "" : " ") + std::string(name) + "=" + *value;
    }
  }
  if (const std::optional<std::string> size = env("WORLD_SIZE")) {
    int value = 0;
    const char* end = size->data() + size->size();
    auto [ptr, ec] = std::from_chars(size->data(), end, value);
    if (ec == std::errc() && ptr == end && value > 0) launcher.torch_world_size = value;
  }
  return launcher;
}

std::string check_launcher(const LauncherEnv& launcher, int mpi_world_size) {
  if (launcher.torch_world_size == 0) return "";
  if (launcher.mpi_variable.empty() && mpi_world_size == 1 && launcher.torch_world_size > 1) {
    throw ConfigError("the environment describes a job of " + std::to_string(launcher.torch_world_size) +
                      " processes (" + launcher.torch_summary +
                      ", as torchrun or a PyTorchJob set them), but no MPI launcher started this one, and dtrain "
                      "joins its ranks through MPI: it would train alone. Start dtrain with mpirun or srun "
                      "(README, docs/deploy.md), or unset WORLD_SIZE to train in one process");
  }
  if (!launcher.mpi_variable.empty() && launcher.torch_world_size != mpi_world_size) {
    return "ignoring " + launcher.torch_summary + " (torchrun's variables): the MPI launcher (" +
           launcher.mpi_variable + ") decides, world size " + std::to_string(mpi_world_size);
  }
  return "";
}

}  // namespace dtrain
