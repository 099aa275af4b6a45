// When a checkpoint inside an epoch is due: every checkpoint.every_steps optimizer steps, or every
// checkpoint.every_s seconds on rank 0's clock (for every rank: the ranks agree on it in the stop
// agreement's collective, stop_agreement.h).
#pragma once

#include <cstdint>

#include "runtime/config/config.h"
#include "runtime/train/stop_agreement.h"
#include "runtime/util/timer.h"

namespace dtrain {

class CheckpointSchedule final {
 public:
  explicit CheckpointSchedule(const CheckpointOptions& options);

  // checkpoint.every_steps or every_s is set (and checkpoints are on).
  bool inside_epochs() const;
  // Collective, after each optimizer step: whether a checkpoint inside the epoch is due now, and whether
  // to stop. Both are agreed in one small allgather of `stops` every stops.check_steps() steps (every 10
  // for every_s alone); between them, stops wait.
  StepDecision after_step(StopAgreement& stops);
  // A checkpoint was written: the count towards the next one starts again.
  void saved();

 private:
  const CheckpointOptions& options_;
  int64_t steps_since_checkpoint_ = 0;  // optimizer steps
  double last_checkpoint_s_ = 0.0;      // on clock_
  Stopwatch clock_;                     // since construction
};

}  // namespace dtrain
