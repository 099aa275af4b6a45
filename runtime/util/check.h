// Precondition and call-checking helpers shared by every layer. Backend-specific macros
// (DTRAIN_MPI_CHECK) build on detail::throw_call_error so all call failures read the same.
#pragma once

#include <sstream>
#include <string>

#include "runtime/util/error.h"

namespace dtrain::detail {

// "<call> failed (<message>), <context>, <file>:<line>" with an optional "[rank r/n] " prefix.
[[noreturn]] void throw_call_error(const std::string& rank_prefix, const char* call, const std::string& message,
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
