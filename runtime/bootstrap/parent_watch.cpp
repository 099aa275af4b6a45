#include "runtime/bootstrap/parent_watch.h"

#include <unistd.h>

#include <chrono>

namespace dtrain {

ParentWatch::ParentWatch(double period_s, std::function<void(pid_t old_parent)> on_gone) {
  const pid_t parent = getppid();
  const auto period = std::chrono::duration<double>(period_s);
  thread_ = std::thread([this, parent, period, on_gone = std::move(on_gone)] {
    // Sleeps in short slices so that the destructor never waits a whole period.
    const auto slice = std::chrono::milliseconds(50);
    auto next = std::chrono::steady_clock::now() + period;
    while (!stop_.load()) {
      std::this_thread::sleep_for(slice);
      if (std::chrono::steady_clock::now() < next) continue;
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
      if (getppid() != parent) {
        on_gone(parent);
        return;
      }
    }
  });
}

ParentWatch::~ParentWatch() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

}  // namespace dtrain
