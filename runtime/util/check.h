// Precondition and call-checking helpers shared by every layer. Backend-specific macros
// (DTRAIN_MPI_CHECK) build on detail::throw_call_error so all call failures read the same.
#pragma once

#include <sstream>
#include <string>

#include "runtime/util/error.h"

namespace dtrain::detail {

// Throws CommError(origin, "<call> failed (<message>), <file>:<line>").
[[noreturn]] void throw_call_error(const ErrorOrigin& origin, const char* call, const std::string& message,
                                   const char* file, int line);

const char* file_basename(const char* path);

}  // namespace dtrain::detail

// Throws ErrorType with the streamed message when `cond` is false:
//   DTRAIN_CHECK(n > 0, ConfigError, "train.batch_size must be positive, got " << n);
#define DTRAIN_CHECK(cond, ErrorType, message)  \
  do {                                          \
    if (!(cond)) {                              \
      std::ostringstream dtrain_check_os_;      \
      dtrain_check_os_ << message;              \
      throw ::dtrain::ErrorType(dtrain_check_os_.str()); \
    }                                           \
  } while (false)

// DTRAIN_CHECK with the error's origin (evaluated only on failure):
//   DTRAIN_CHECK_AT(root < n, CommError, detail::mpi_origin(), "broadcast root " << root << " out of range");
#define DTRAIN_CHECK_AT(cond, ErrorType, origin, message)                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::ostringstream dtrain_check_os_;                              \
      dtrain_check_os_ << message;                                      \
      throw ::dtrain::ErrorType((origin), dtrain_check_os_.str());      \
    }                                                                   \
  } while (false)
