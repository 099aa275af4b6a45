#include "runtime/comm/mpi_progress.h"

#include <time.h>

#include <algorithm>

namespace dtrain::detail {
namespace {

constexpr long kFirstPauseNs = 10'000;
constexpr long kMaxPauseNs = 100'000;

}  // namespace

MpiProgress::MpiProgress(bool active) : active_(active), thread_([this] { run(); }) {}

MpiProgress::~MpiProgress() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void MpiProgress::add(std::shared_ptr<MpiRequest> request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming_.push_back(std::move(request));
  }
  work_.notify_one();
}

void MpiProgress::run() {
  std::vector<std::shared_ptr<MpiRequest>> in_flight;
  long pause_ns = kFirstPauseNs;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Nothing in flight: sleep until a request comes (no CPU at all between steps).
      if (in_flight.empty()) work_.wait(lock, [this] { return stop_ || !incoming_.empty(); });
      if (stop_) return;
      if (!incoming_.empty()) pause_ns = kFirstPauseNs;  // a new bucket: its first rounds are quick
      for (auto& r : incoming_) in_flight.push_back(std::move(r));
      incoming_.clear();
    }
    // In launch order: collectives complete in the order they were started on every rank.
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      MpiRequest& r = **it;
      int done = 0;
      const int rc = MPI_Test(&r.request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS || done) {
        {
          std::lock_guard<std::mutex> lock(r.mutex);
          r.done = true;
          r.error = rc;
        }
        r.completed.notify_all();
        it = in_flight.erase(it);
      } else {
        ++it;
      }
    }
    if (in_flight.empty() || active_) continue;
    const timespec pause{0, pause_ns};
    nanosleep(&pause, nullptr);
    pause_ns = std::min(2 * pause_ns, kMaxPauseNs);
  }
}

}  // namespace dtrain::detail
