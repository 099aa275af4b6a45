// Which launcher started this process, read from its environment before any rank connects: an MPI
// launcher (mpirun, srun; dtrain's ranks come from MPI) or torchrun and Kubeflow's PyTorchJob (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT; dtrain's ranks meet in a c10d store). A process that one of
// them started as a rank of N never trains alone.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "runtime/config/config.h"

namespace dtrain {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
EnvLookup process_environment();

struct LauncherEnv {
  std::string mpi_variable;   // the first MPI launcher variable found (OMPI_COMM_WORLD_SIZE, PMIX_RANK, ...), or ""
  int torch_world_size = 0;   // WORLD_SIZE of torchrun / PyTorchJob, 0 when unset or unusable
  bool torch_rank_set = false;  // RANK is set
  std::string torch_summary;  // "RANK=1 WORLD_SIZE=2 MASTER_ADDR=host MASTER_PORT=29500" as found
};

LauncherEnv read_launcher_env(const EnvLookup& env);

// The variables of a torchrun or PyTorchJob worker, checked.
struct TorchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;        // LOCAL_RANK; -1 when unset (a PyTorchJob pod): taken from the hosts
  int local_world_size = -1;  // LOCAL_WORLD_SIZE, likewise
  std::string master_addr;    // MASTER_ADDR: where the store is; empty for a world of one
  int master_port = 0;        // MASTER_PORT
  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store and every worker is its client;
  // else rank 0 hosts it, as PyTorch's env:// does.
  bool agent_store = false;
  bool elastic_agent = false;  // TORCHELASTIC_RUN_ID is set: a torchrun agent started this process
  std::string run_id;          // TORCHELASTIC_RUN_ID
  int restart_count = 0;       // TORCHELASTIC_RESTART_COUNT: how often the agent restarted the workers
  int max_restarts = 0;        // TORCHELASTIC_MAX_RESTARTS
  std::string summary;         // the variables as found, for messages
};

// Throws ConfigError naming the variable, its value and what was expected: RANK and WORLD_SIZE must be
// integers with 0 <= RANK < WORLD_SIZE; with WORLD_SIZE above 1, MASTER_ADDR and MASTER_PORT (1-65535)
// are needed too.
TorchEnv read_torch_env(const EnvLookup& env);

// The bootstrap for comm.bootstrap `requested`: mpi and env as asked; auto picks mpi when an MPI launcher
// started this process, env when RANK or WORLD_SIZE is set, else mpi (one process, or MPI's singleton).
BootstrapKind choose_bootstrap(BootstrapKind requested, const LauncherEnv& launcher);

// For an MPI bootstrap. Throws ConfigError when the environment describes a multi-process torchrun or
// PyTorchJob job but this process is a world of `mpi_world_size` 1 started by no MPI launcher: it would
// train alone. Returns a note ("" if none) when both an MPI launcher and torchrun's variables are present
// and MPI decides.
std::string check_launcher(const LauncherEnv& launcher, int mpi_world_size);

}  // namespace dtrain
