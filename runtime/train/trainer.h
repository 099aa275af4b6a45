// The one training loop: epochs of sharded batches handed to the workload's step, evaluation on the
// whole test set, the learning-rate schedule, checkpoints and the step's metrics reduced over all ranks.
// Nothing here knows what a workload trains: its modules, losses and metrics come through TrainStep.
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
#include "runtime/reduce/grad_reducer.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/metrics.h"
#include "runtime/train/train_state.h"
#include "runtime/train/train_step.h"
#include "runtime/train/workload.h"
#include "runtime/util/activity.h"
#include "runtime/util/error.h"
#include "runtime/util/timer.h"

namespace dtrain {

class OpProfiler;
class ResourceSampler;

// Builds the gradient reducer of one module's parameters and buffers (the caller picks the class).
using ReducerFactory = std::function<std::unique_ptr<GradReducer>(
    std::vector<at::Tensor> params, const std::vector<at::Tensor>& buffers, Communicator& comm)>;

struct TrainResult {
  std::vector<EpochStats> epochs;  // the epochs this run trained (after a resume: only the new ones)
  RunSummary summary;
};

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
  MetricSums train_epoch(int64_t epoch, EpochStats& stats);
  // Sets the batch plan (see restore) and global_batch_.
  void plan_batch();
  // checkpoint.every_steps or every_s is set (and checkpoints are on).
  bool checkpoints_inside_epochs() const;
  // What every checkpoint records after `completed_epoch` (epoch, seed, names, world size, global batch, time).
  CheckpointMeta checkpoint_meta(int64_t completed_epoch) const;
  // Rank 0 writes `meta` with the modules' state; every rank restarts the count towards the next one.
  std::string save_checkpoint(const CheckpointMeta& meta);
  // Collective, after an optimizer step: whether checkpoint.every_steps/every_s ask for a checkpoint now
  // (rank 0's clock decides, for every rank).
  bool mid_epoch_checkpoint_due();
  // Collective: a checkpoint of epoch `epoch` after `steps_done` of its micro-steps (whole optimizer
  // steps), with the epoch's training metrics so far.
  void save_mid_epoch(int64_t epoch, int64_t steps_done, const MetricSums& epoch_sums, int64_t samples_seen);
  // Rank 0, at progress lines and checkpoints, when checkpoints inside epochs are on: where training is,
  // for the cost report of a later resume.
  void mark_progress(int64_t epoch, int64_t epoch_samples);
  MetricSums evaluate(int64_t epoch);  // with the live progress of "evaluation <epoch>/<epochs>"
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
  // The resource sampler of log.sample_interval_s (nullptr when 0), for this rank's device.
  std::unique_ptr<ResourceSampler> start_sampler();
  // Collective: every rank's samples since the last call into rank 0's run log.
  void log_samples(ResourceSampler& sampler);
  // log.profile_steps: starts the profiler on log.profile_rank before the window's first step; after its
  // last step (or at the end of a run that ends inside it) stops it and, collectively, brings the trace
  // and the operations table to rank 0's run directory.
  void profile_before_step();
  void profile_after_step();
  void finish_profile();
  // The peak TFLOP/s of one device for the mfu of epoch records: train.peak_tflops, else the table's
  // figure for this GPU and precision (see peak_flops.h), else 0. Sets accelerator_ and peak_note_.
  double resolve_peak_tflops();

  TrainConfig config_;  // train.batch_size and train.accumulate as plan_batch() set them
  const Workload& workload_;
  Communicator& comm_;
  RunLogger& logger_;
  ReducerFactory make_reducer_;
  c10::Device device_;
  TrainState state_;
  std::unique_ptr<TrainStep> step_;
  WorkloadData data_;
  int64_t seed_;
  Activity* activity_;
  int64_t first_epoch_ = 1;
  std::string resume_note_;
  std::optional<CheckpointMeta> restored_;
  bool planned_ = false;
  double restore_s_ = 0.0;  // how long restore() took to read and load the checkpoint
  int64_t global_batch_ = 0;
  std::string batch_note_;  // how the global batch is split, when train.elastic_batch holds it
  int64_t steps_since_checkpoint_ = 0;  // optimizer steps
  double last_checkpoint_s_ = 0.0;  // on total_ (rank 0's clock decides every_s)
  Stopwatch clock_;                 // since construction
  // FLOPs of this rank's first training steps and their samples (see kFlopCountSteps).
  int64_t flop_count_steps_ = 0;
  double counted_flops_ = 0.0;
  int64_t counted_samples_ = 0;
  std::vector<std::string> net_interfaces_;  // whose bytes count (network_interfaces_from_environment)
  std::string accelerator_;  // the GPU's product name, when NVML tells
  double peak_tflops_ = 0.0;
  std::string peak_note_;  // where the peak came from, printed after the run header
  int64_t run_step_ = 0;  // training steps of this run so far, across epochs
  enum class ProfileWindow { kBefore, kInside, kDone } profile_window_ = ProfileWindow::kBefore;
  std::unique_ptr<OpProfiler> profiler_;  // on log.profile_rank, inside the window
};

}  // namespace dtrain
