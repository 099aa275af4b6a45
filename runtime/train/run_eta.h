// The whole run's time left, for the progress line and the run log: the training steps left at this
// process's measured time per step, plus the end-of-epoch work left (evaluation, checkpoint, sample
// grids) at its measured mean. Only what this process measured counts, and its plan starts where the run
// continues, so the estimate stays right after a --resume, an elastic restart at another world size, or
// with train.max_steps. Until an epoch's end has been timed, an evaluation is taken to cost a third of a
// training step per sample (a forward pass against forward and backward). Local; not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

namespace dtrain {

struct RunPlan {
  int64_t last_epoch = 1;       // train.epochs
  int64_t steps_per_epoch = 0;  // this rank's steps in a whole epoch (at most train.max_steps)
  int64_t eval_samples = 0;     // test samples evaluated after each epoch
  int64_t global_batch = 1;     // training samples of one step, all ranks
};

class RunEta final {
 public:
  // `now_s`: a monotonic clock in seconds (tests pass their own); by default the steady clock.
  explicit RunEta(RunPlan plan, std::function<double()> now_s = nullptr);

  // Epoch `epoch` trains its steps [first_step, steps) (a resumed epoch starts after its first steps).
  void training_begins(int64_t epoch, int64_t first_step, int64_t steps);
  // `steps_done` of the epoch's steps are done (counted from the epoch's start, like `steps`).
  void step_done(int64_t steps_done);
  // The epoch's training is over; its evaluation (and checkpoint) begins.
  void training_ended();
  // The epoch's end-of-epoch work is done.
  void epoch_ended();

  // Seconds left until the run's end (after epoch_ended(): from that epoch's end); nullopt until one step
  // has been timed (the run's first step, with its start-up work, is not).
  std::optional<double> left_s() const;

 private:
  enum class Phase { kIdle, kTraining, kEpochEnd };
  double end_of_epoch_s() const;  // measured mean, or the estimate from the step time

  RunPlan plan_;
  std::function<double()> now_s_;
  Phase phase_ = Phase::kIdle;
  int64_t epoch_ = 0;
  int64_t steps_ = 0;       // the current epoch's
  int64_t steps_done_ = 0;
  double last_mark_s_ = 0.0;  // the last step's end, or the epoch's training start
  bool first_step_of_run_ = true;
  double timed_step_s_ = 0.0;
  int64_t timed_steps_ = 0;
  double end_began_s_ = 0.0;
  double timed_end_s_ = 0.0;
  int64_t timed_ends_ = 0;
};

}  // namespace dtrain
