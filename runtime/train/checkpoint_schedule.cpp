#include "runtime/train/checkpoint_schedule.h"

namespace dtrain {
namespace {

// With checkpoint.every_s, rank 0's clock is consulted (one small allgather) every this many optimizer
// steps: the checkpoint comes at most this many steps late, and the steps between pay nothing.
constexpr int64_t kCheckpointClockSteps = 10;

}  // namespace

CheckpointSchedule::CheckpointSchedule(const CheckpointOptions& options) : options_(options) {}

bool CheckpointSchedule::inside_epochs() const {
  return options_.enabled && (options_.every_steps > 0 || options_.every_s > 0);
}

StepDecision CheckpointSchedule::after_step(StopAgreement& stops) {
  ++steps_since_checkpoint_;
  stops.step_taken();
  const bool clock = inside_epochs() && options_.every_s > 0;
  StepDecision decision;
  if (clock || stops.watching()) {
    const int64_t every = stops.watching() ? stops.check_steps() : kCheckpointClockSteps;
    if (stops.steps_since_agreement() >= every) {
      decision = stops.agree(clock && clock_.elapsed_s() - last_checkpoint_s_ >= options_.every_s);
    }
  }
  if (inside_epochs() && options_.every_steps > 0 && steps_since_checkpoint_ >= options_.every_steps) {
    decision.checkpoint = true;
  }
  return decision;
}

void CheckpointSchedule::saved() {
  steps_since_checkpoint_ = 0;
  last_checkpoint_s_ = clock_.elapsed_s();
}

}  // namespace dtrain
