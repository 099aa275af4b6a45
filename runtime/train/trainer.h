// The one training loop: epochs of sharded batches handed to the workload's step, evaluation on the
// whole test set, the learning-rate schedule, checkpoints and the step's metrics reduced over all ranks.
// Nothing here knows what a workload trains: its modules, losses and metrics come through TrainStep.
// What watches the loop (telemetry, resource samples, the profiler window) are RunObservers that the
// caller adds; the loop tells them where it is and they add their own figures to the records.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/log/run_logger.h"
#include "runtime/log/run_observer.h"
#include "runtime/reduce/grad_reducer.h"
#include "runtime/train/bad_samples.h"
#include "runtime/train/metrics.h"
#include "runtime/train/run_checkpoints.h"
#include "runtime/train/run_eta.h"
#include "runtime/train/train_state.h"
#include "runtime/train/train_step.h"
#include "runtime/train/workload.h"
#include "runtime/util/activity.h"
#include "runtime/util/error.h"
#include "runtime/util/timer.h"

namespace dtrain {

// What the run's batch plan fixed that picks and shapes its reducers: under train.deterministic the
// shard count and how many ranks share the shards' tree (1 where every rank trains the whole global
// batch: runtime/train/batch_plan.h); shards 0 otherwise.
struct ReducerPlan {
  int64_t shards = 0;
  int sharing_ranks = 1;
};

// Builds the gradient reducer of one module's parameters and buffers (the caller picks the class).
using ReducerFactory = std::function<std::unique_ptr<GradReducer>(
    std::vector<at::Tensor> params, const std::vector<at::Tensor>& buffers, Communicator& comm,
    const ReducerPlan& plan)>;

struct TrainResult {
  std::vector<EpochStats> epochs;  // the epochs this run trained (after a resume: only the new ones)
  RunSummary summary;
};

struct EpochRun;

class Trainer final {
 public:
  // Local: builds the workload's modules, one optimizer each, and its step on `device`, and loads the data there (uploaded once; batches
  // are gathered on the device). Throws DataError/ConfigError; nothing collective happens here, so the
  // caller can agree on failure across ranks before restore() and run(). `activity`, if given, is kept
  // up to date with the phase, epoch and step (for the heartbeat and error records).
  Trainer(const TrainConfig& config, const Workload& workload, Communicator& comm, RunLogger& logger,
          ReducerFactory make_reducer, c10::Device device = c10::Device(c10::DeviceType::CPU),
          Activity* activity = nullptr);
  ~Trainer();

  // Adds an observer (kept by reference: it must outlive run()); hooks run in the order of the calls.
  void observe(RunObserver& observer);

  // Set alike on every rank before run(): where this rank learns of a stop signal it received (0: none;
  // stop_signals.h). The ranks agree on it at step boundaries (every optimizer step on a CPU, every 10 on
  // a GPU), at epoch ends and before training; there rank 0 saves a checkpoint of that point, records
  // the stop, and run() throws StoppedBySignal on every rank once the checkpoint is on disk.
  void stop_on(std::function<int()> local_signal) { checkpoints_.stop_on(std::move(local_signal)); }

  // Collective: with checkpoint.resume, loads the newest checkpoint of checkpoint.dir on every rank (every
  // module and optimizer; inside an epoch, also its position). Then splits the batch over this world
  // (train.elastic_batch global: the global batch of train.global_batch_size, else the checkpoint's, else
  // of this start; see batch_plan.h). Throws DataError or ConfigError, the same on every rank, for an
  // unusable checkpoint or a global batch this world cannot split, so the caller can agree on it and
  // exit on every rank without aborting. Without a checkpoint, run() starts at epoch 1.
  void restore();

  // Collective: makes the replicas identical and trains the remaining epochs; when a restored run has
  // already reached train.epochs, reports its final metrics from the checkpoint instead. `info` is
  // completed with the data facts and logged as the run start. A NaN or infinite loss or gradient
  // throws NonFiniteError at the same step on every rank (train.on_nonfinite: stop), or skips that
  // optimizer step on every rank (skip-step); no checkpoint with non-finite values is written.
  TrainResult run(RunInfo info);

  // The effective per-rank batch and accumulation after restore() (train.elastic_batch global may have
  // changed them), and the global batch.
  const TrainOptions& train_options() const { return config_.train; }
  int64_t global_batch() const { return global_batch_; }

  TrainState& state() { return state_; }
  const WorkloadData& data() const { return data_; }

 private:
  // The run_start record (with the observers' additions), the notes and, after a restore, the resume record.
  void start_run(RunInfo& info);
  // A restored run that had already reached train.epochs: its final record again; returns its test metrics.
  MetricValues report_finished_run();
  // Collective: trains, evaluates, checkpoints and records epoch `epoch`.
  EpochStats run_epoch(int64_t epoch);
  // Sets `run`'s steps (after a resume inside the epoch, from its position) and `stats`' first step and
  // step count; returns this rank's samples of the epoch in training order.
  std::vector<int64_t> plan_epoch(EpochRun& run, EpochStats& stats) const;
  MetricSums train_epoch(int64_t epoch, EpochStats& stats);
  // Collective: reduces the epoch's training and test sums and counts into `stats`, warns about samples
  // that could not be read, and throws NonFiniteError for figures that cannot stand.
  void settle_figures(EpochStats& stats, const MetricSums& train, const MetricSums& test);
  void train_step(EpochRun& run, int64_t step, const Batch& batch, EpochStats& stats);
  // Collective, every log.interval steps: the progress line of the metrics of all ranks since the last.
  void log_progress(EpochRun& run, int64_t step);
  // On a GPU: throws NonFiniteError when the device's flag says a step had a NaN or infinite value.
  void check_device_flag(int64_t epoch) const;
  void report_skipped_steps(int64_t epoch, EpochStats& stats);
  // Sets the batch plan (see restore) and global_batch_.
  void plan_batch();
  // What the run's checkpoints record of it (workload, optimizer, data labels, seed, global batch).
  RunIdentity identity() const;
  // Whether epoch `epoch` continues from a restored checkpoint inside it.
  bool resumed_inside(int64_t epoch) const {
    return restored_ && epoch == first_epoch_ && restored_->epoch_samples > 0;
  }
  // With the live progress of "evaluation <epoch>/<epochs>". Collective; with `stop`, the ranks agree on
  // stop signals between batches, and a stop ends the evaluation early with `*stop` saying so.
  MetricSums evaluate(int64_t epoch, StepDecision* stop = nullptr);
  int64_t eval_samples() const;  // test samples evaluated after each epoch (train.eval_samples)
  // Image batches in NHWC order with train.channels_last; other inputs as they are.
  at::Tensor model_layout(const at::Tensor& inputs) const;
  // Rank 0's BatchNorm statistics (floating-point buffers) to every rank; see GradReducer::sync_buffers.
  void sync_buffers();
  // Seed of the training transforms of `epoch`: per sample, not per rank (see Dataset::stream).
  uint64_t augment_seed(int64_t epoch) const;
  // The NonFiniteError for steps [first_step, last_step] of `epoch` (one step when they are equal).
  NonFiniteError non_finite(int64_t epoch, int64_t first_step, int64_t last_step, const std::string& what) const;
  void set_phase(Phase phase, int64_t epoch, int64_t step = 0);

  TrainConfig config_;  // train.batch_size and train.accumulate as plan_batch() set them
  const Workload& workload_;
  Communicator& comm_;
  RunLogger& logger_;
  ReducerFactory make_reducer_;
  c10::Device device_;
  TrainState state_;
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<SampleGridWriter> sample_writer_;  // rank 0's, when the workload makes pictures
  WorkloadData data_;
  int64_t seed_;
  Activity* activity_;
  BadSamples bad_samples_;
  // Declared after state_: destroyed first, it finishes a checkpoint being written from it.
  RunCheckpoints checkpoints_;
  std::vector<RunObserver*> observers_;
  int64_t first_epoch_ = 1;
  const CheckpointMeta* restored_ = nullptr;  // checkpoints_'s, after a restore
  bool planned_ = false;
  int64_t global_batch_ = 0;
  std::string batch_note_;  // how the global batch is split, when train.elastic_batch holds it
  // Which share of each global batch this rank trains: share `rank` of `ranks`, the world's, or the
  // whole of it on every rank (train.deterministic, whole-input passes: runtime/train/batch_plan.h).
  struct Share {
    int rank = 0;
    int ranks = 1;
  } share_;
  // Whether this rank's training metrics and samples count: ranks that each trained the whole batch count
  // it once, on rank 0 (the sums are reduced over the ranks).
  bool counts_its_share() const { return share_.ranks > 1 || comm_.is_root(); }
  ReducerPlan reducer_plan() const { return {config_.train.deterministic ? config_.train.shards : 0, share_.ranks}; }
  int64_t run_step_ = 0;    // training steps of this run so far, across epochs
  std::optional<RunEta> eta_;  // from run(): the whole run's time left
};

}  // namespace dtrain
