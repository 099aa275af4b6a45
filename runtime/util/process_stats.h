// Facts about the current process that runs report: peak resident memory.
#pragma once

#include <cstdint>

namespace dtrain {

// Peak resident set size of this process in bytes (VmHWM), or 0 where the OS does not report it.
int64_t peak_rss_bytes();

// When this process started, in Unix seconds (to the kernel's clock tick, 10 ms), or 0 where /proc does not
// say: how a restarted worker tells the launcher's restart from its own start-up.
double process_start_unix_s();

}  // namespace dtrain
