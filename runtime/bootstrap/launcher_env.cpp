#include "runtime/bootstrap/launcher_env.h"

#include <charconv>
#include <cstdlib>

#include "runtime/util/error.h"

namespace dtrain {
namespace {

// Set by the MPI launchers dtrain runs under: Open MPI's mpirun, PMIx (srun --mpi=pmix, prterun),
// PMI-1/2 (srun --mpi=pmi2, MPICH's hydra).
constexpr const char* kMpiVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};

std::optional<int> parse_int(const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

// The integer value of `name` in [low, high], or `fallback` when unset.
int int_variable(const EnvLookup& env, const char* name, int low, int high, int fallback, const std::string& summary) {
  const std::optional<std::string> text = env(name);
  if (!text) return fallback;
  const std::optional<int> value = parse_int(*text);
  if (!value || *value < low || *value > high) {
    throw ConfigError(std::string(name) + "='" + *text + "' is not an integer from " + std::to_string(low) + " to " +
                      std::to_string(high) + " (the launcher's variables: " + summary + ")");
  }
  return *value;
}

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
  launcher.torch_rank_set = env("RANK").has_value();
  if (const std::optional<std::string> size = env("WORLD_SIZE")) {
    const std::optional<int> value = parse_int(*size);
    if (value && *value > 0) launcher.torch_world_size = *value;
  }
  return launcher;
}

TorchEnv read_torch_env(const EnvLookup& env) {
  TorchEnv torch;
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                           "TORCHELASTIC_RESTART_COUNT"}) {
    if (const std::optional<std::string> value = env(name)) {
      torch.summary += (torch.summary.empty() ? "" : " ") + std::string(name) + "=" + *value;
    }
  }
  if (torch.summary.empty()) torch.summary = "none set";
  constexpr int kMaxRanks = 1 << 20;
  if (!env("WORLD_SIZE") || !env("RANK")) {
    throw ConfigError(std::string("comm.bootstrap 'env' needs RANK and WORLD_SIZE (as torchrun and a PyTorchJob set them), "
                                  "but ") + (!env("RANK") && !env("WORLD_SIZE") ? "neither is" : !env("RANK") ? "RANK is not" : "WORLD_SIZE is not") +
                      " set (the launcher's variables: " + torch.summary + ")");
  }
  torch.world_size = int_variable(env, "WORLD_SIZE", 1, kMaxRanks, 1, torch.summary);
  torch.rank = int_variable(env, "RANK", 0, torch.world_size - 1, 0, torch.summary);
  torch.local_world_size = int_variable(env, "LOCAL_WORLD_SIZE", 1, torch.world_size, -1, torch.summary);
  torch.local_rank = int_variable(env, "LOCAL_RANK", 0, torch.local_world_size > 0 ? torch.local_world_size - 1 : kMaxRanks,
                                  -1, torch.summary);
  if (torch.world_size > 1) {
    const std::optional<std::string> addr = env("MASTER_ADDR");
    if (!addr || addr->empty() || !env("MASTER_PORT")) {
      throw ConfigError("WORLD_SIZE=" + std::to_string(torch.world_size) +
                        " needs MASTER_ADDR and MASTER_PORT, the address of the c10d store the ranks meet in, but " +
                        (!addr || addr->empty() ? "MASTER_ADDR" : "MASTER_PORT") + " is not set (the launcher's variables: " +
                        torch.summary + ")");
    }
    torch.master_addr = *addr;
    torch.master_port = int_variable(env, "MASTER_PORT", 1, 65535, 0, torch.summary);
  }
  const std::optional<std::string> agent_store = env("TORCHELASTIC_USE_AGENT_STORE");
  torch.agent_store = agent_store && (*agent_store == "True" || *agent_store == "true" || *agent_store == "1");
  if (const std::optional<std::string> run_id = env("TORCHELASTIC_RUN_ID")) {
    torch.elastic_agent = true;
    torch.run_id = *run_id;
  }
  torch.restart_count = int_variable(env, "TORCHELASTIC_RESTART_COUNT", 0, 1 << 30, 0, torch.summary);
  torch.max_restarts = int_variable(env, "TORCHELASTIC_MAX_RESTARTS", 0, 1 << 30, 0, torch.summary);
  return torch;
}

BootstrapKind choose_bootstrap(BootstrapKind requested, const LauncherEnv& launcher) {
  if (requested != BootstrapKind::kAuto) return requested;
  if (!launcher.mpi_variable.empty()) return BootstrapKind::kMpi;
  if (launcher.torch_rank_set || launcher.torch_world_size > 0) return BootstrapKind::kEnv;
  return BootstrapKind::kMpi;
}

std::string check_launcher(const LauncherEnv& launcher, int mpi_world_size) {
  if (launcher.torch_world_size == 0) return "";
  if (launcher.mpi_variable.empty() && mpi_world_size == 1 && launcher.torch_world_size > 1) {
    throw ConfigError("the environment describes a job of " + std::to_string(launcher.torch_world_size) +
                      " processes (" + launcher.torch_summary +
                      ", as torchrun or a PyTorchJob set them), but comm.bootstrap is 'mpi' and no MPI launcher "
                      "started this process: it would train alone. Use --bootstrap env (or auto) under torchrun, or "
                      "start dtrain with mpirun or srun");
  }
  if (!launcher.mpi_variable.empty() && launcher.torch_world_size != mpi_world_size) {
    return "ignoring " + launcher.torch_summary + " (torchrun's variables): the MPI launcher (" +
           launcher.mpi_variable + ") decides, world size " + std::to_string(mpi_world_size);
  }
  return "";
}

}  // namespace dtrain
