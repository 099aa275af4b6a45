// Facts about the current process that runs report: peak resident memory.
#pragma once

#include <cstdint>

namespace dtrain {

// Peak resident set size of this process in bytes (VmHWM), or 0 where the OS does not report it.
int64_t peak_rss_bytes();

}  // namespace dtrain
