// What this rank is doing now: the training phase with its epoch and step, and the collective it is
// blocked in, if any. The main thread writes it (one uncontended lock per step); the heartbeat and
// watchdog threads read it to tell other ranks, and error records use it to say where a run failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace dtrain {

enum class Phase : uint8_t { kStarting, kRestoring, kTraining, kEvaluating, kCheckpointing, kFinishing };

const char* to_string(Phase phase);

struct ActivitySnapshot {
  Phase phase = Phase::kStarting;
  int64_t epoch = 0;         // 0 before the first epoch
  int64_t step = 0;          // training step within the epoch (1-based); 0 outside training
  std::string waiting_for;   // the collective this rank is blocked in; empty when it is not waiting
  double waiting_s = 0.0;    // how long it has been blocked there
};

// "training, epoch 1, step 17" or "checkpointing, epoch 3; waiting 9.8 s in MPI_Iallreduce of 4724264 bytes".
std::string describe(const ActivitySnapshot& activity);

class Activity final {
 public:
  void set_phase(Phase phase, int64_t epoch, int64_t step = 0);
  void set_step(int64_t step);
  // A blocking wait on a collective; end_wait() when it returns or throws (see WaitScope).
  void begin_wait(std::string what);
  void end_wait();
  ActivitySnapshot snapshot() const;  // thread-safe

 private:
  using Clock = std::chrono::steady_clock;
  mutable std::mutex mutex_;
  Phase phase_ = Phase::kStarting;
  int64_t epoch_ = 0;
  int64_t step_ = 0;
  std::string waiting_for_;
  Clock::time_point waiting_since_;
};

// Marks a blocking wait on `activity` (which may be null) for the scope's lifetime.
class WaitScope final {
 public:
  WaitScope(Activity* activity, std::string what) : activity_(activity) {
    if (activity_ != nullptr) activity_->begin_wait(std::move(what));
  }
  ~WaitScope() {
    if (activity_ != nullptr) activity_->end_wait();
  }
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;

 private:
  Activity* activity_;
};

}  // namespace dtrain
