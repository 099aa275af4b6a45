#include "runtime/util/check.h"

#include <cstring>

namespace dtrain::detail {

const char* file_basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

void throw_call_error(const std::string& rank_prefix, const char* call, const std::string& message,
                      const char* file, int line) {
  std::ostringstream os;
  os << rank_prefix << call << " failed (" << message << "), " << file_basename(file) << ":" << line;
  throw CommError(os.str());
}

}  // namespace dtrain::detail
