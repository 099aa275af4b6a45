#include "runtime/util/process_stats.h"

#include <sys/resource.h>

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>
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

double process_start_unix_s() {
  // Field 22 of /proc/self/stat: clock ticks from boot to the start; /proc/stat's btime: the boot.
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t name_end = text.rfind(')');  // the command name may hold spaces and parentheses
  if (name_end == std::string::npos) return 0.0;
  std::istringstream fields(text.substr(name_end + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  long long start_ticks = 0;
  if (!(fields >> start_ticks)) return 0.0;
  std::ifstream boot("/proc/stat");
  std::string key;
  long long boot_s = 0;
  while (boot >> key) {
    if (key == "btime") {
      boot >> boot_s;
      break;
    }
    boot.ignore(1 << 16, '\n');
  }
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  if (boot_s <= 0 || ticks_per_s <= 0) return 0.0;
  return static_cast<double>(boot_s) + static_cast<double>(start_ticks) / static_cast<double>(ticks_per_s);
}

}  // namespace dtrain
