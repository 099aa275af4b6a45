// Launcher detection: which bootstrap a process gets, torchrun's variables checked with clear errors,
// and a torchrun/PyTorchJob process told to use MPI stops instead of training alone.
#include "test/support/catch.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/bootstrap/elastic_error_file.h"
#include "runtime/bootstrap/launcher_env.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "test/support/fake_env.h"

using namespace dtrain;
using dtrain::test::env_of;
using Catch::Matchers::Contains;

TEST_CASE("torchrun's variables without an MPI launcher stop the run instead of training alone", "[bootstrap]") {
  const LauncherEnv torchrun =
      read_launcher_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}}));
  CHECK(torchrun.mpi_variable.empty());
  CHECK(torchrun.torch_world_size == 2);
  CHECK_THROWS_AS(check_launcher(torchrun, 1), ConfigError);
  CHECK_THROWS_WITH(check_launcher(torchrun, 1),
                    Contains("a job of 2 processes (RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500") &&
                        Contains("it would train alone") && Contains("--bootstrap env"));
}

TEST_CASE("auto bootstrap: MPI under an MPI launcher, the environment under torchrun, else one process", "[bootstrap]") {
  const LauncherEnv torchrun = read_launcher_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  const LauncherEnv mpirun = read_launcher_env(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  const LauncherEnv alone = read_launcher_env(env_of({{"MASTER_ADDR", "leftover"}}));
  CHECK(choose_bootstrap(BootstrapKind::kAuto, torchrun) == BootstrapKind::kEnv);
  CHECK(choose_bootstrap(BootstrapKind::kAuto, mpirun) == BootstrapKind::kMpi);
  CHECK(choose_bootstrap(BootstrapKind::kAuto, alone) == BootstrapKind::kMpi);
  CHECK(choose_bootstrap(BootstrapKind::kEnv, mpirun) == BootstrapKind::kEnv);  // asked for: as asked
  CHECK(choose_bootstrap(BootstrapKind::kMpi, torchrun) == BootstrapKind::kMpi);
}

TEST_CASE("torchrun's variables are read and checked", "[bootstrap]") {
  const TorchEnv worker = read_torch_env(env_of({{"RANK", "3"},
                                                 {"WORLD_SIZE", "4"},
                                                 {"LOCAL_RANK", "1"},
                                                 {"LOCAL_WORLD_SIZE", "2"},
                                                 {"MASTER_ADDR", "node-0"},
                                                 {"MASTER_PORT", "29500"},
                                                 {"TORCHELASTIC_RUN_ID", "job-7"},
                                                 {"TORCHELASTIC_RESTART_COUNT", "2"},
                                                 {"TORCHELASTIC_MAX_RESTARTS", "3"},
                                                 {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  CHECK(worker.rank == 3);
  CHECK(worker.world_size == 4);
  CHECK(worker.local_rank == 1);
  CHECK(worker.local_world_size == 2);
  CHECK(worker.master_addr == "node-0");
  CHECK(worker.master_port == 29500);
  CHECK(worker.elastic_agent);
  CHECK(worker.run_id == "job-7");
  CHECK(worker.restart_count == 2);
  CHECK(worker.max_restarts == 3);
  CHECK(worker.agent_store);

  // A PyTorchJob pod: no LOCAL_RANK, no agent.
  const TorchEnv pod =
      read_torch_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "job-master-0"}, {"MASTER_PORT", "23456"}}));
  CHECK(pod.local_rank == -1);
  CHECK_FALSE(pod.elastic_agent);
  CHECK_FALSE(pod.agent_store);
  // One process needs no store.
  CHECK(read_torch_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}})).master_addr.empty());
}

TEST_CASE("bad torchrun variables name the variable, its value and what was expected", "[bootstrap]") {
  auto error_of = [](std::map<std::string, std::string> values) {
    try {
      read_torch_env(env_of(std::move(values)));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of({{"WORLD_SIZE", "2"}}), Contains("needs RANK and WORLD_SIZE") && Contains("RANK is not set"));
  CHECK_THAT(error_of({}), Contains("neither is set"));
  CHECK_THAT(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}),
             Contains("RANK='2' is not an integer from 0 to 1"));
  CHECK_THAT(error_of({{"RANK", "0"}, {"WORLD_SIZE", "two"}}), Contains("WORLD_SIZE='two' is not an integer from 1"));
  CHECK_THAT(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}}),
             Contains("WORLD_SIZE=2 needs MASTER_ADDR and MASTER_PORT") && Contains("MASTER_ADDR is not set"));
  CHECK_THAT(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}}),
             Contains("MASTER_PORT='70000' is not an integer from 1 to 65535"));
  CHECK_THAT(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}, {"LOCAL_RANK", "x"}}),
             Contains("LOCAL_RANK='x'"));
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

TEST_CASE("a failed torchrun worker's error file has the layout torchrun's agent reads, with the exit status",
          "[bootstrap]") {
  const nlohmann::json record = nlohmann::json::parse(elastic_error_json(6, "rank 1 (of 2) is gone", 1795000000));
  // torch.distributed.elastic: ProcessFailure reads message.message and int(message.extraInfo.timestamp);
  // ErrorHandler.dump_error_file sets message.errorCode again, to the status the agent saw.
  CHECK(record["message"]["message"] == "rank 1 (of 2) is gone");
  CHECK(record["message"]["extraInfo"]["timestamp"] == "1795000000");
  CHECK(record["message"]["extraInfo"]["py_callstack"] == "rank 1 (of 2) is gone");  // torchrun's "traceback"
  CHECK(record["message"]["errorCode"] == 6);
  // A path's bytes that are not UTF-8 do not make the record unreadable.
  CHECK(nlohmann::json::parse(elastic_error_json(2, "no such file 'run\xe9'", 0))["message"]["message"] ==
        "no such file 'run\xef\xbf\xbd'");
}

TEST_CASE("dtrain writes torchrun's error file only for a failed worker an agent started", "[bootstrap]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dtrain-elastic-error-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string file = (dir / "error.json").string();
  const std::map<std::string, std::string> agent{{"TORCHELASTIC_RUN_ID", "job-7"}, {"TORCHELASTIC_ERROR_FILE", file}};

  write_elastic_error_file(env_of(agent), 0, "done");
  CHECK_FALSE(fs::exists(file));  // a success leaves nothing
  write_elastic_error_file(env_of({{"TORCHELASTIC_ERROR_FILE", file}}), 2, "bad flag");
  CHECK_FALSE(fs::exists(file));  // no agent: a variable inherited from elsewhere is not followed

  write_elastic_error_file(env_of(agent), 2, "dtrain: error: --epochs must be at least 1, got 0");
  const nlohmann::json record = nlohmann::json::parse(read_file(file));
  CHECK(record["message"]["errorCode"] == 2);
  CHECK(record["message"]["message"] == "dtrain: error: --epochs must be at least 1, got 0");
  CHECK_FALSE(fs::exists(file + ".tmp"));
  write_elastic_error_file(env_of(agent), 143, "");  // a later exit replaces it; an empty text says the status
  CHECK(nlohmann::json::parse(read_file(file))["message"]["message"] == "dtrain exited with status 143");

  // A link where the file goes is replaced, not followed: its target stays as it was.
  const std::string target = (dir / "target").string();
  write_file_atomically(target, "untouched", Durability::kReplaced);
  fs::remove(file);
  fs::create_symlink(target, file);
  write_elastic_error_file(env_of(agent), 4, "non-finite loss");
  CHECK(read_file(target) == "untouched");
  CHECK(nlohmann::json::parse(read_file(file))["message"]["errorCode"] == 4);
  // A directory that is gone: a warning, and the exit goes on.
  const std::string gone = (dir / "gone" / "error.json").string();
  write_elastic_error_file(env_of({{"TORCHELASTIC_RUN_ID", "job-7"}, {"TORCHELASTIC_ERROR_FILE", gone}}), 6, "lost a peer");
  CHECK_FALSE(fs::exists(dir / "gone"));
  fs::remove_all(dir);
}
