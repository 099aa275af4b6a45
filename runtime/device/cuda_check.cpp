#include "runtime/device/cuda_check.h"

#include <unistd.h>

#include "runtime/bootstrap/mpi_detail.h"

namespace dtrain::detail {

ErrorOrigin device_origin() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  ErrorOrigin origin = mpi_origin();
  origin.host = host;
  return origin;
}

std::string cuda_error_string(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code);
}

}  // namespace dtrain::detail
