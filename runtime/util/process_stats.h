// Facts about the current process that runs report (peak resident memory, its start) or that decide
// whether it can start at all (its address-space limit).
#pragma once

#include <cstdint>
#include <string>

namespace dtrain {

// Peak resident set size of this process in bytes (VmHWM), or 0 where the OS does not report it.
int64_t peak_rss_bytes();

// When this process started, in Unix seconds (to the kernel's clock tick, 10 ms), or 0 where /proc does not
// say: how a restarted worker tells the launcher's restart from its own start-up.
double process_start_unix_s();

// The least address space (RLIMIT_AS, `ulimit -v`) dtrain starts under. Its libraries map about 1.3 GiB
// before any data, and under too small a limit OpenBLAS retries its 128 MiB buffer for ever (measured on
// a 2-core VM: mnist trained under 1.8 GB, spun at its first step under 1.5 GB; under 1 GB a thread could
// not even be started).
constexpr uint64_t kMinAddressSpaceBytes = uint64_t{2} << 30;

// "" when this process's address-space limit is none or at least kMinAddressSpaceBytes; else the sentence
// that refuses it, naming the limit and what to ask for.
std::string address_space_problem();

}  // namespace dtrain
