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

// How long a wait has lasted while this process ran. A gap of more than `gap_s` between two looks
// (waited_s calls) is time the process did not run: it was stopped (SIGSTOP, a debugger, a frozen VM)
// or starved. That time is not counted, so that a rank that was stopped does not, once continued, time
// out at once a collective its healthy peers were waiting in, and blame them for its own silence. The
// caller looks often (every poll, or every second), and `gap_s` lies well above that period.
class WaitClock final {
 public:
  explicit WaitClock(double gap_s) : gap_s_(gap_s), start_(Clock::now()), last_(start_) {}
  double waited_s() {
    const Clock::time_point now = Clock::now();
    const double since_last = std::chrono::duration<double>(now - last_).count();
    if (since_last > gap_s_) paused_s_ += since_last;
    last_ = now;
    return std::chrono::duration<double>(now - start_).count() - paused_s_;
  }
  double paused_s() const { return paused_s_; }  // the gaps left out so far

 private:
  using Clock = std::chrono::steady_clock;
  double gap_s_;
  Clock::time_point start_;
  Clock::time_point last_;
  double paused_s_ = 0.0;
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
