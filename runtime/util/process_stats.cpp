#include "runtime/util/process_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
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

std::string address_space_problem() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= kMinAddressSpaceBytes) {
    return "";
  }
  const auto gib = [](uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (uint64_t{1} << 30));
    return std::string(text);
  };
  return "the address-space limit (ulimit -v) is " + std::to_string(limit.rlim_cur / 1024) + " KiB (" + gib(limit.rlim_cur) +
         "), below the " + gib(kMinAddressSpaceBytes) + " dtrain needs to start: its libraries alone map about 1.3 GiB, and "
         "under a smaller limit its BLAS retries its buffers for ever instead of failing. Raise it (ulimit -v " +
         std::to_string(kMinAddressSpaceBytes / 1024) + ", or unlimited; a batch system's memory option rather than a "
         "virtual-memory one), with room for the model and its data (docs/failures.md)";
}

}  // namespace dtrain
