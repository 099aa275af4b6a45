// The dtrain exception hierarchy. Library code throws these; only launch/main.cpp decides how a run ends.
#pragma once

#include <stdexcept>
#include <string>

namespace dtrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad configuration: a YAML key, a CLI flag or a combination of values. Detected before any training.
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

}  // namespace dtrain
