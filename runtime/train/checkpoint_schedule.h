// What the ranks decide together at step boundaries: whether a checkpoint inside the epoch is due
// (checkpoint.every_steps, checkpoint.every_s on rank 0's clock) and whether a stop signal reached any
// rank (stop_signals.h); the progress marks rank 0 leaves between checkpoints; and the resume record:
// what a restart cost, told from the checkpoint it resumed from and the last mark of the interrupted run.
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/train/checkpoint.h"
#include "runtime/util/timer.h"

namespace dtrain {

// What the ranks agreed after a step.
struct StepDecision {
  bool checkpoint = false;  // a checkpoint inside the epoch is due
  int stop_signal = 0;      // a stop signal reached a rank: stop here (0: none)
  int stop_rank = -1;       // the lowest rank it reached
};

class CheckpointSchedule final {
 public:
  // `check_steps`: optimizer steps between two agreements on a stop (1 on CPUs, where the collective
  // costs microseconds against steps of milliseconds; more on GPUs, whose steps the host does not
  // otherwise wait for).
  CheckpointSchedule(const CheckpointOptions& options, Communicator& comm, int64_t check_steps = 1);

  // Where each rank learns of a stop signal it received (0: none); set alike on every rank. Without
  // one, no rank stops for signals.
  void stop_on(std::function<int()> local_signal) { local_signal_ = std::move(local_signal); }

  // checkpoint.every_steps or every_s is set (and checkpoints are on).
  bool inside_epochs() const;
  // Collective, after each optimizer step: whether a checkpoint inside the epoch is due now (rank 0's
  // clock decides every_s, for every rank), and whether to stop. Both are agreed in one small allgather
  // every check_steps steps (every 10 for every_s alone); between them, stops wait.
  StepDecision after_step();
  // Collective, at once: whether a stop signal reached any rank (epoch ends, the run's start).
  StepDecision agree_stop();
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
  // Collective: every rank's stop signal, and rank 0's clock when `clock`.
  StepDecision agree(bool clock);

  const CheckpointOptions& options_;
  Communicator& comm_;
  const int64_t check_steps_;
  std::function<int()> local_signal_;
  int64_t steps_since_agreement_ = 0;
  int64_t steps_since_checkpoint_ = 0;  // optimizer steps
  double last_checkpoint_s_ = 0.0;      // on clock_
  Stopwatch clock_;                     // since construction
};

}  // namespace dtrain
