#include "runtime/train/run_eta.h"

#include <algorithm>
#include <utility>

#include "runtime/util/timer.h"

namespace dtrain {
namespace {

// A forward pass costs about a third of forward and backward (the backward pass computes two gradients
// per layer: of its input and of its weights).
constexpr double kEvalShareOfStep = 1.0 / 3.0;

}  // namespace

RunEta::RunEta(RunPlan plan, std::function<double()> now_s)
    : plan_(plan), now_s_(now_s ? std::move(now_s) : steady_now_s) {}

void RunEta::training_begins(int64_t epoch, int64_t first_step, int64_t steps) {
  phase_ = Phase::kTraining;
  epoch_ = epoch;
  steps_ = steps;
  steps_done_ = first_step;
  last_mark_s_ = now_s_();
}

void RunEta::step_done(int64_t steps_done) {
  const double now = now_s_();
  if (first_step_of_run_) {
    first_step_of_run_ = false;  // start-up work (allocations, FLOP counting, the first collectives)
  } else {
    timed_step_s_ += now - last_mark_s_;
    timed_steps_ += steps_done - steps_done_;
  }
  steps_done_ = steps_done;
  last_mark_s_ = now;
}

void RunEta::training_ended() {
  phase_ = Phase::kEpochEnd;
  end_began_s_ = now_s_();
}

void RunEta::epoch_ended() {
  if (phase_ == Phase::kEpochEnd) {
    timed_end_s_ += now_s_() - end_began_s_;
    ++timed_ends_;
  }
  phase_ = Phase::kIdle;
}

double RunEta::end_of_epoch_s() const {
  if (timed_ends_ > 0) return timed_end_s_ / static_cast<double>(timed_ends_);
  const double step_s = timed_step_s_ / static_cast<double>(timed_steps_);
  return static_cast<double>(plan_.eval_samples) * step_s / static_cast<double>(std::max<int64_t>(1, plan_.global_batch)) *
         kEvalShareOfStep;
}

std::optional<double> RunEta::left_s() const {
  if (timed_steps_ <= 0) return std::nullopt;
  const double step_s = timed_step_s_ / static_cast<double>(timed_steps_);
  const double end_s = end_of_epoch_s();
  const int64_t later_epochs = std::max<int64_t>(0, plan_.last_epoch - epoch_);
  double left = static_cast<double>(later_epochs) * (static_cast<double>(plan_.steps_per_epoch) * step_s + end_s);
  if (phase_ == Phase::kTraining) {
    left += static_cast<double>(std::max<int64_t>(0, steps_ - steps_done_)) * step_s + end_s;
  } else if (phase_ == Phase::kEpochEnd) {
    left += std::max(0.0, end_s - (now_s_() - end_began_s_));
  }  // kIdle: epoch_ is over
  return left;
}

}  // namespace dtrain
