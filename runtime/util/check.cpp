#include "runtime/util/check.h"

#include <cstring>

namespace dtrain::detail {

const char* file_basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

void throw_call_error(const ErrorOrigin& origin, const char* call, const std::string& message, const char* file,
                      int line) {
  std::ostringstream os;
  os << call << " failed (" << message << "), " << file_basename(file) << ":" << line;
  throw CommError(origin, os.str());
}

}  // namespace dtrain::detail
