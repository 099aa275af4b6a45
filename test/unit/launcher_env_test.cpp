// Launcher detection: a torchrun/PyTorchJob process without an MPI launcher stops instead of training
// alone; under an MPI launcher torchrun's variables are ignored, with a note.
#include "test/support/catch.h"

#include <map>

#include "runtime/bootstrap/launcher_env.h"
#include "runtime/util/error.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

EnvLookup env_of(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("torchrun's variables without an MPI launcher stop the run instead of training alone", "[bootstrap]") {
  const LauncherEnv torchrun =
      read_launcher_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}}));
  CHECK(torchrun.mpi_variable.empty());
  CHECK(torchrun.torch_world_size == 2);
  CHECK_THROWS_AS(check_launcher(torchrun, 1), ConfigError);
  CHECK_THROWS_WITH(check_launcher(torchrun, 1),
                    Contains("a job of 2 processes (RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500") &&
                        Contains("it would train alone"));
}

TEST_CASE("one process, or an MPI launcher, is not stopped by torchrun's variables", "[bootstrap]") {
  CHECK(check_launcher(read_launcher_env(env_of({})), 1).empty());
  CHECK(check_launcher(read_launcher_env(env_of({{"WORLD_SIZE", "1"}, {"RANK", "0"}})), 1).empty());
  CHECK(check_launcher(read_launcher_env(env_of({{"WORLD_SIZE", "two"}})), 1).empty());  // not a size: not a job
  const LauncherEnv both = read_launcher_env(env_of({{"OMPI_COMM_WORLD_SIZE", "4"}, {"WORLD_SIZE", "2"}, {"RANK", "0"}}));
  CHECK(both.mpi_variable == "OMPI_COMM_WORLD_SIZE");
  CHECK_THAT(check_launcher(both, 4), Contains("the MPI launcher (OMPI_COMM_WORLD_SIZE) decides, world size 4"));
  const LauncherEnv slurm = read_launcher_env(env_of({{"PMIX_RANK", "0"}, {"WORLD_SIZE", "4"}}));
  CHECK(check_launcher(slurm, 4).empty());  // they agree: nothing to say
}
