// The dtrain exception hierarchy and the exit status each kind ends a run with. Library code throws
// these; only launch/main.cpp decides how a run ends. docs/failures.md lists the exit codes.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

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
// 128 + N: stopped by signal N (SIGTERM 143, SIGINT 130, SIGHUP 129, SIGUSR1 138, SIGUSR2 140) after
// saving a checkpoint, as a shell reports a process the signal ended; --resume continues there.
constexpr int kExitSignalBase = 128;

// Where an error happened: the rank and job size, and the host where the machine matters (GPU and NCCL
// errors). Errors carry it as data, so code that handles them reads the rank instead of parsing text.
struct ErrorOrigin {
  int rank = -1;       // -1: not known (before MPI is up, or an error every rank meets alike)
  int world_size = 0;
  std::string host;

  bool known() const { return rank >= 0 || !host.empty(); }
  // "[rank 3/16] ", "[rank 3/16 gpu-7] ", "[gpu-7] " or "": how messages start.
  std::string prefix() const;
};

// Every dtrain error: a message and, where known, its origin. what() is the two together, as printed.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : Error(ErrorOrigin{}, message) {}
  Error(ErrorOrigin origin, const std::string& message)
      : std::runtime_error(origin.prefix() + message), origin_(std::move(origin)), message_(message) {}

  const ErrorOrigin& origin() const { return origin_; }
  const std::string& message() const { return message_; }  // without the origin

 private:
  ErrorOrigin origin_;
  std::string message_;
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

// A stop signal reached a rank (stop_signals.h): every rank stopped at the same step boundary, after the
// checkpoint of that point was saved. Not a failure of the run; it ends with kExitSignalBase + signal().
class StoppedBySignal : public Error {
 public:
  StoppedBySignal(int signal, const std::string& message) : Error(message), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// The exit status for an exception escaping a run: the kind's code, kExitFailure for anything else.
int exit_code_of(const std::exception& error);

// A library exception's message without the C++ stack trace that LibTorch's c10d appends in some builds
// ("\nException raised from ..."): what happened, for a message of dtrain's own.
std::string message_without_trace(const std::exception& error);

}  // namespace dtrain
