// torchrun's record of why a worker failed. torch.distributed.elastic names a file for each worker in
// TORCHELASTIC_ERROR_FILE; when workers fail, torchrun's agent takes the first failure (the earliest
// timestamp), copies that worker's file to its own TORCHELASTIC_ERROR_FILE with the worker's exit status
// added as "errorCode" (torch.distributed.elastic.multiprocessing.errors.record), and exits 1 whatever
// the workers' statuses were. A worker that wrote no file shows as "<N/A>" there and its status is lost:
// so dtrain writes one whenever it exits with a status other than 0, and whoever started torchrun can
// exit with dtrain's status (deploy/docker/dtrain-entrypoint.sh, deploy/slurm/torchrun.sbatch;
// docs/failures.md).
#pragma once

#include <string>

#include "runtime/bootstrap/launcher_env.h"

namespace dtrain {

// The file's JSON, in the layout the agent reads and amends: {"message": {"message": MESSAGE,
// "extraInfo": {"py_callstack": MESSAGE, "timestamp": "<unix seconds>"}, "errorCode": EXIT_CODE}}.
std::string elastic_error_json(int exit_code, const std::string& message, long long unix_time_s);

// Writes that file where TORCHELASTIC_ERROR_FILE says, for a worker torchrun's agent started
// (TORCHELASTIC_RUN_ID set); does nothing otherwise or for status 0. Never throws: a file that cannot be
// written costs one warning on stderr, and the exit goes on.
void write_elastic_error_file(const EnvLookup& env, int exit_code, const std::string& message) noexcept;

}  // namespace dtrain
