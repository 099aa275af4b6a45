// When a run checkpoints inside its epochs (checkpoint.every_steps, checkpoint.every_s), the progress
// marks rank 0 leaves between checkpoints, and the resume record: what a restart cost, told from the
// checkpoint it resumed from and the last mark of the interrupted run.
#pragma once

#include <cstdint>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/train/checkpoint.h"
#include "runtime/util/timer.h"

namespace dtrain {

class CheckpointSchedule final {
 public:
  CheckpointSchedule(const CheckpointOptions& options, Communicator& comm);

  // checkpoint.every_steps or every_s is set (and checkpoints are on).
  bool inside_epochs() const;
  // Collective, after each optimizer step: whether a checkpoint inside the epoch is due now (rank 0's
  // clock decides every_s, for every rank).
  bool due_after_step();
  // A checkpoint was written: the count towards the next one starts again.
  void saved();
  // Rank 0, at progress lines and checkpoints inside epochs: where training is, for the cost report of a
  // later resume. Nothing without checkpoints inside epochs (no restarts are expected then).
  void mark_progress(int64_t epoch, int64_t epoch_samples) const;
  // When a resumed process passed each point of its start, in Unix seconds (0: unknown).
  struct StartTimes {
    double process_start = 0.0;  // the process began
    double joined = 0.0;         // the ranks had met
    double restore_begin = 0.0;  // reading the checkpoint began
  };
  // The record of a run that resumed from `restored` after `restore_s` seconds of loading it. Rank 0
  // adds the steps redone and the restart time from the interrupted run's last progress mark, split at
  // the points of `start`.
  ResumeRecord resume_record(const CheckpointMeta& restored, int restart_count, double restore_s, StartTimes start,
                             int64_t samples_per_epoch, int64_t global_batch) const;

 private:
  const CheckpointOptions& options_;
  Communicator& comm_;
  int64_t steps_since_checkpoint_ = 0;  // optimizer steps
  double last_checkpoint_s_ = 0.0;      // on clock_
  Stopwatch clock_;                     // since construction
};

}  // namespace dtrain
