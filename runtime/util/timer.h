// Monotonic wall-clock timing for per-step and per-epoch measurements, and the calendar time that records
// and comparisons across hosts use.
#pragma once

#include <chrono>
#include <ctime>
#include <string>

namespace dtrain {

class Stopwatch final {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void reset() { start_ = Clock::now(); }
  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

// `when` in UTC with a strftime format.
inline std::string format_utc(std::time_t when, const char* strftime_format) {
  std::tm utc{};
  gmtime_r(&when, &utc);
  char text[64];
  std::strftime(text, sizeof text, strftime_format, &utc);
  return text;
}

// "2026-11-21T10:00:00Z"
inline std::string utc_timestamp(std::time_t when) { return format_utc(when, "%Y-%m-%dT%H:%M:%SZ"); }

// Seconds of the steady clock: monotonic, for durations and rates within one process.
inline double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds this process has used, all its threads (user + system). Over a wait, what the wait cost
// the node: a wait that blocks adds the communication threads' real work, one that polls (in any
// thread) adds its whole duration.
inline double process_cpu_s() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Seconds since 1970 (the system clock): comparable across the hosts of a job, not monotonic.
inline double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace dtrain
