// A run's checkpoint, resume and stop lifecycle in one owner. The trainer calls it on plain records at
// a few points: restore() at the start, after_step() at every optimizer-step boundary (saves a
// checkpoint inside the epoch when one is due, stops when a signal reached a rank), around each
// epoch's evaluation (hold_epoch_end(), evaluation_stop(), save_epoch_end(), after_epoch()), and
// finish() at the end. Underneath: the Checkpointer (checkpoint.h: snapshot, write, restore), the
// CheckpointSaver (the write behind training), the CheckpointSchedule (when a checkpoint inside an epoch
// is due) and the StopAgreement (stop signals, agreed by the ranks).
//
// A stop saves a checkpoint of the step boundary every rank is at (or names the one an epoch end just
// wrote), waits until rank 0's checkpoint is on disk, records the stop and throws StoppedBySignal on
// every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/log/run_logger.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/checkpoint_saver.h"
#include "runtime/train/checkpoint_schedule.h"
#include "runtime/train/metrics.h"
#include "runtime/train/stop_agreement.h"
#include "runtime/train/train_state.h"
#include "runtime/util/activity.h"

namespace dtrain {

// What every checkpoint of a run records besides its position and metrics.
struct RunIdentity {
  std::string workload;
  std::string optimizer;
  std::string labels;          // WorkloadData::labels
  int64_t seed = 0;            // train.seed, or the restored run's
  int64_t global_batch = 0;    // samples per optimizer step over all ranks (0 before the batch is planned)
  int64_t train_samples = 0;   // samples of the training set (an epoch)
};

// A step boundary inside an epoch.
struct EpochPoint {
  int64_t epoch = 0;
  int64_t steps_done = 0;              // micro-steps of the epoch taken (whole optimizer steps)
  const MetricSums* train = nullptr;   // this rank's training sums of the epoch so far
  int64_t samples_seen = 0;            // this rank's samples in them
};

class RunCheckpoints final {
 public:
  // `config` and `state` are the trainer's (kept by reference: train.batch_size and train.accumulate as
  // its batch plan sets them). `stop_check_steps`: StopAgreement's check_steps. `activity` may be null.
  RunCheckpoints(const TrainConfig& config, Communicator& comm, RunLogger& logger, TrainState& state,
                 int64_t stop_check_steps, Activity* activity);
  RunCheckpoints(const RunCheckpoints&) = delete;
  RunCheckpoints& operator=(const RunCheckpoints&) = delete;

  // Set alike on every rank before training: where this rank learns of a stop signal (StopAgreement).
  void stop_on(std::function<int()> local_signal) { stops_.stop_on(std::move(local_signal)); }
  // What the checkpoints record of the run; set again whenever it changes (a restore, the batch plan).
  void identify(RunIdentity identity) { identity_ = std::move(identity); }

  // Collective: with checkpoint.resume, loads the newest usable checkpoint of checkpoint.dir into the
  // state's modules on every rank (Checkpointer::restore) and returns its metadata; none without one.
  // Throws DataError, the same on every rank, for an unusable checkpoint.
  const CheckpointMeta* restore();
  // The restored checkpoint, if any.
  const CheckpointMeta* restored() const { return restored_ ? &*restored_ : nullptr; }

  // After the run_start record: the resume note, checkpoints passed over, the resume record (what the
  // restart cost, for `restart_count` and the process's start times); then, on rank 0, prepares the
  // host memory of the snapshots on a thread of its own.
  void run_started(int restart_count, double joined_unix_s);
  // Collective, before the first epoch: a signal that came during the start (loading data, reading the
  // checkpoint) stops here.
  void stop_if_signalled_at_start();

  // Collective, at the boundary of every optimizer step inside an epoch: logs a finished background
  // write, rethrows a failed one; then, unless `epoch_ends` (the epoch's last step: its end does it),
  // stops on a signal or saves a checkpoint that is due.
  void after_step(const EpochPoint& point, bool epoch_ends);
  // Rank 0, at progress lines: where training is, for the cost report of a later resume (only with
  // checkpoints inside epochs: no restarts are expected otherwise).
  void mark_progress(int64_t epoch, int64_t epoch_samples) const;

  // Collective, with checkpoints on: the state at the end of epoch `epoch`'s training, held before its
  // evaluation (which does not change it), so that a stop during a long evaluation saves it at once.
  void hold_epoch_end(int64_t epoch);
  // Collective, between evaluation batches: whether a stop signal reached any rank.
  StepDecision evaluation_stop() { return stops_.agree_stop(); }
  // Collective: a stop agreed during the evaluation of `stats`' epoch (after `stats.steps` of training
  // from `stats.first_step`, whose sums `train` holds) saves the held state as a checkpoint inside the
  // epoch, from which a resume evaluates the epoch and goes on; then stops.
  [[noreturn]] void stop_in_evaluation(const StepDecision& decision, const EpochStats& stats, const MetricSums& train);
  // Writes the held state with the epoch's figures (`stats`, reduced and evaluated) and returns the
  // checkpoint's path ("" on ranks > 0, and without checkpoints).
  std::string save_epoch_end(const EpochStats& stats);
  // Collective, after the epoch's record, unless it was the last: a stop that came in the epoch's last
  // step, its evaluation or its checkpoint stops here, the epoch complete.
  void after_epoch(const EpochStats& stats);

  // At the end of a run that trained to its last epoch: waits for the last write and removes the copy
  // in memory (the disk holds the final state). Rethrows a failed write.
  void finish() { saver_.finish(); }

 private:
  CheckpointMeta meta(int64_t completed_epoch) const;
  // Collective: a checkpoint inside epoch `point.epoch`, with the epoch's training metrics so far; the
  // held snapshot of that point when `held`. Returns its path ("" on ranks > 0).
  std::string save_inside_epoch(const EpochPoint& point, bool held = false);
  // Collective: ends the run for `decision`'s signal at `where` (its checkpoint already written, if
  // any), or inside an epoch at `point` after saving a checkpoint there. Throws StoppedBySignal.
  [[noreturn]] void stop(const StepDecision& decision, StopRecord where, const EpochPoint* point = nullptr);
  int64_t epoch_samples(int64_t steps_done) const;
  int64_t samples_per_pass() const;  // global samples per backward pass
  void set_phase(Phase phase, int64_t epoch, int64_t step = 0);

  const TrainConfig& config_;
  const CheckpointOptions& options_;
  Communicator& comm_;
  RunLogger& logger_;
  TrainState& state_;
  Activity* activity_;
  RunIdentity identity_;
  StopAgreement stops_;
  CheckpointSchedule schedule_;
  CheckpointSaver saver_;
  CheckpointSnapshot held_;  // the epoch end's, from hold_epoch_end() until it is saved
  std::optional<CheckpointMeta> restored_;
  std::vector<std::string> passed_over_;  // what restore() passed over (Restored::passed_over)
  std::string resume_note_;
  double restore_s_ = 0.0;  // how long restore() took to read and load the checkpoint
  double restore_begin_unix_s_ = 0.0;
};

}  // namespace dtrain
