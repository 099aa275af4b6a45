// Monotonic wall-clock timing for per-step and per-epoch measurements.
#pragma once

#include <chrono>

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

}  // namespace dtrain
