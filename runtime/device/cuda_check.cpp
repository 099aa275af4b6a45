#include "runtime/device/cuda_check.h"

#include <unistd.h>

#include "runtime/bootstrap/mpi_detail.h"

namespace dtrain::detail {

std::string rank_host_prefix() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string prefix = mpi_rank_prefix();  // "[rank r/n] " or ""
  if (prefix.empty()) return std::string("[") + host + "] ";
  return prefix.substr(0, prefix.size() - 2) + " " + host + "] ";
}

std::string cuda_error_string(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code);
}

}  // namespace dtrain::detail
