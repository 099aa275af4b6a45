#include "runtime/util/activity.h"

#include <cstdio>

namespace dtrain {

const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::kStarting: return "starting";
    case Phase::kRestoring: return "restoring a checkpoint";
    case Phase::kTraining: return "training";
    case Phase::kEvaluating: return "evaluating";
    case Phase::kCheckpointing: return "checkpointing";
    case Phase::kFinishing: return "finishing";
  }
  return "?";
}

std::string describe(const ActivitySnapshot& a) {
  std::string text = to_string(a.phase);
  if (a.epoch > 0) text += ", epoch " + std::to_string(a.epoch);
  if (a.step > 0) text += ", step " + std::to_string(a.step);
  if (!a.waiting_for.empty()) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", a.waiting_s);
    text += std::string("; waiting ") + seconds + " s in " + a.waiting_for;
  }
  return text;
}

void Activity::set_phase(Phase phase, int64_t epoch, int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = phase;
  epoch_ = epoch;
  step_ = step;
}

void Activity::set_step(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
}

void Activity::begin_wait(std::string what) {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_for_ = std::move(what);
  waiting_since_ = Clock::now();
}

void Activity::end_wait() {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_for_.clear();
}

ActivitySnapshot Activity::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ActivitySnapshot s;
  s.phase = phase_;
  s.epoch = epoch_;
  s.step = step_;
  s.waiting_for = waiting_for_;
  if (!waiting_for_.empty()) s.waiting_s = std::chrono::duration<double>(Clock::now() - waiting_since_).count();
  return s;
}

}  // namespace dtrain
