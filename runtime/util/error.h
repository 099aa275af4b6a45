// The dtrain exception hierarchy and the exit status each kind ends a run with. Library code throws
// these; only launch/main.cpp decides how a run ends. docs/failures.md lists the exit codes.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace dtrain {

// Exit statuses of the dtrain binary. Distinct codes let a job system tell input it should not retry
// (config, data) from failures a restart with --resume may get past (communication, a full disk).
constexpr int kExitSuccess = 0;
constexpr int kExitFailure = 1;    // anything not listed below
constexpr int kExitConfig = 2;     // bad flags, YAML or paths, found before training
constexpr int kExitData = 3;       // a missing, malformed or mismatched dataset or checkpoint file
constexpr int kExitNonFinite = 4;  // the loss or the gradients became NaN or infinite
constexpr int kExitIo = 5;         // a log, result or checkpoint could not be written
constexpr int kExitComm = 6;       // a collective failed or timed out: a peer is dead, stuck or unreachable

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad configuration: a YAML key, a CLI flag, a combination of values or an unusable directory.
// Detected before any training.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A failed MPI/NCCL/CUDA call, a timed-out collective or a peer that went away.
class CommError : public Error {
 public:
  using Error::Error;
};

// A missing, truncated or malformed data or checkpoint file.
class DataError : public Error {
 public:
  using Error::Error;
};

// Writing a run log, a result or a checkpoint failed (full disk, lost permissions, read-only mount).
class IoError : public Error {
 public:
  using Error::Error;
};

// Training produced a NaN or infinite loss or gradient, and the configured policy is to stop.
class NonFiniteError : public Error {
 public:
  using Error::Error;
};

// The exit status for an exception escaping a run: the kind's code, kExitFailure for anything else.
int exit_code_of(const std::exception& error);

}  // namespace dtrain
