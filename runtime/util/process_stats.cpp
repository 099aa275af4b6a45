#include "runtime/util/process_stats.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace dtrain {

int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(1 << 12, '\n');
  }
  // Not Linux: getrusage reports kilobytes on Linux and BSD (bytes on macOS, which dtrain does not target).
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) return static_cast<int64_t>(usage.ru_maxrss) * 1024;
  return 0;
}

}  // namespace dtrain
