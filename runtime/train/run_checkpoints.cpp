#include "runtime/train/run_checkpoints.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "runtime/util/process_stats.h"
#include "runtime/util/stop_signals.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

// When a resumed process passed each point of its start, in Unix seconds (0: unknown).
struct StartTimes {
  double process_start = 0.0;  // the process began
  double joined = 0.0;         // the ranks had met
  double restore_begin = 0.0;  // reading the checkpoint began
};

// The record of a run that resumed from `restored` after `restore_s` seconds of loading it. Rank 0 adds
// the steps redone and the restart time from the interrupted run's last progress mark (in `dir`), split
// at the points of `start`.
ResumeRecord resume_record(const CheckpointMeta& restored, const Communicator& comm, const std::string& dir,
                           int restart_count, double restore_s, StartTimes start, int64_t samples_per_epoch,
                           int64_t global_batch) {
  ResumeRecord resume;
  resume.checkpoint = restored.path;
  resume.from_memory = restored.from_memory;
  resume.restart_count = restart_count;
  resume.from_world_size = restored.world_size;
  resume.world_size = comm.world_size();
  resume.epoch = restored.epoch + 1;
  resume.step = restored.epoch_steps;
  resume.epoch_samples = restored.epoch_samples;
  const double now = unix_now_s();
  resume.unix_time_s = now;
  resume.restore_s = restore_s;
  if (restored.saved_unix_s > 0) resume.lost_s = now - restored.saved_unix_s;
  if (!comm.is_root()) return resume;
  const std::optional<ProgressMark> mark = read_progress_mark(dir);
  if (mark && global_batch > 0) {
    const int64_t saved = restored.epoch * samples_per_epoch + restored.epoch_samples;
    // The mark follows the checkpoint it accompanies; a group stopped between the two (a node joining
    // right after a save) left a mark older than the checkpoint, and reached no further.
    const int64_t reached = std::max((mark->epoch - 1) * samples_per_epoch + mark->epoch_samples, saved);
    resume.steps_redone = (reached - saved) / global_batch;
    const double last_seen = std::max(mark->unix_s, restored.saved_unix_s);
    resume.restart_s = now - last_seen;
    if (start.process_start > last_seen) resume.down_s = start.process_start - last_seen;
  }
  if (start.process_start > 0 && start.joined >= start.process_start) {
    resume.join_s = start.joined - start.process_start;
    if (start.restore_begin >= start.joined) resume.setup_s = start.restore_begin - start.joined;
  }
  return resume;
}

}  // namespace

RunCheckpoints::RunCheckpoints(const TrainConfig& config, Communicator& comm, RunLogger& logger, TrainState& state,
                               int64_t stop_check_steps, Activity* activity)
    : config_(config),
      options_(config.checkpoint),
      comm_(comm),
      logger_(logger),
      state_(state),
      activity_(activity),
      stops_(comm, stop_check_steps),
      schedule_(options_),
      saver_(options_, comm, logger) {}

void RunCheckpoints::set_phase(Phase phase, int64_t epoch, int64_t step) {
  if (activity_ != nullptr) activity_->set_phase(phase, epoch, step);
}

const CheckpointMeta* RunCheckpoints::restore() {
  const Checkpointer checkpointer(options_, comm_);
  if (options_.resume) {
    restore_begin_unix_s_ = unix_now_s();
    Stopwatch watch;
    set_phase(Phase::kRestoring, 0);
    Restored found = checkpointer.restore(state_.modules(), identity_.workload, identity_.optimizer, identity_.labels);
    restored_ = std::move(found.checkpoint);
    passed_over_ = std::move(found.passed_over);
    if (restored_) {
      restore_s_ = watch.elapsed_s();
    } else {
      resume_note_ = "no checkpoint in " + options_.dir + "; starting at epoch 1";
    }
  }
  if (!restored_ && !options_.init_from.empty()) {
    set_phase(Phase::kRestoring, 0);
    const int64_t loaded = checkpointer.init_from(options_.init_from, state_.modules());
    resume_note_ = (resume_note_.empty() ? "" : resume_note_ + "; ") + "starting from the weights in " + options_.init_from +
                   " (" + std::to_string(loaded) + " tensors)";
  }
  return restored();
}

void RunCheckpoints::run_started(int restart_count, double joined_unix_s) {
  if (!resume_note_.empty()) logger_.info(resume_note_);
  for (const std::string& passed : passed_over_) {
    logger_.warning("passed over a damaged checkpoint, " + passed +
                    (restored_ ? "; resuming from the newest whole one, " + restored_->path
                               : std::string("; none is left to resume, so the run starts at epoch 1")));
  }
  if (restored_) {
    const StartTimes start{process_start_unix_s(), joined_unix_s, restore_begin_unix_s_};
    logger_.resumed(resume_record(*restored_, comm_, options_.dir, restart_count, restore_s_, start,
                                  identity_.train_samples, identity_.global_batch));
  }
  saver_.prepare(state_.modules());
}

void RunCheckpoints::stop_if_signalled_at_start() {
  const StepDecision decision = stops_.agree_stop();
  if (decision.stop_signal == 0) return;
  StopRecord where;
  if (restored_) {
    where.epoch = restored_->epoch + (restored_->epoch_samples > 0 ? 1 : 0);
    where.step = restored_->epoch_steps;
    where.epoch_samples = restored_->epoch_samples;
  }
  stop(decision, where);
}

CheckpointMeta RunCheckpoints::meta(int64_t completed_epoch) const {
  CheckpointMeta meta;
  meta.epoch = completed_epoch;
  meta.seed = identity_.seed;
  meta.workload = identity_.workload;
  meta.optimizer = identity_.optimizer;
  meta.world_size = comm_.world_size();
  meta.global_batch = identity_.global_batch;
  meta.labels = identity_.labels;
  meta.saved_unix_s = unix_now_s();
  return meta;
}

int64_t RunCheckpoints::epoch_samples(int64_t steps_done) const {
  return std::min(identity_.train_samples, steps_done * samples_per_pass());
}

int64_t RunCheckpoints::samples_per_pass() const {
  // The global batch over its backward passes: batch x ranks, or the whole global batch where every rank
  // trains it whole (train.deterministic with whole-input passes).
  return identity_.global_batch / config_.train.accumulate;
}

void RunCheckpoints::after_step(const EpochPoint& point, bool epoch_ends) {
  saver_.poll();
  const StepDecision decision = schedule_.after_step(stops_);
  // At the epoch's last step the stop waits for the epoch's end (its evaluation and checkpoint).
  if (epoch_ends) return;
  if (decision.stop_signal != 0) stop(decision, StopRecord{}, &point);
  if (decision.checkpoint) save_inside_epoch(point);
}

void RunCheckpoints::mark_progress(int64_t epoch, int64_t epoch_samples) const {
  if (!comm_.is_root() || !schedule_.inside_epochs()) return;
  write_progress_mark(options_.dir, ProgressMark{epoch, epoch_samples, unix_now_s()});
}

std::string RunCheckpoints::save_inside_epoch(const EpochPoint& point, bool held) {
  set_phase(Phase::kCheckpointing, point.epoch, point.steps_done);
  const MetricSums counts = count_sums({{"train_samples", point.samples_seen}});
  const std::vector<MetricValues> reduced = reduce_all(comm_, {point.train, &counts});
  CheckpointMeta meta = this->meta(point.epoch - 1);
  meta.epoch_samples = point.steps_done * samples_per_pass();
  meta.epoch_steps = point.steps_done / config_.train.accumulate;
  meta.partial_train = reduced[0];
  meta.partial_samples = reduced_count(reduced[1], "train_samples");
  std::string path;
  if (held) {
    held_.set_meta(meta);
    path = saver_.take(std::move(held_));
  } else {
    path = saver_.take(meta, state_.modules());
  }
  schedule_.saved();
  mark_progress(point.epoch, meta.epoch_samples);
  set_phase(Phase::kTraining, point.epoch, point.steps_done);
  return path;
}

void RunCheckpoints::hold_epoch_end(int64_t epoch) {
  if (options_.enabled) held_ = saver_.hold(meta(epoch), state_.modules());
}

void RunCheckpoints::stop_in_evaluation(const StepDecision& decision, const EpochStats& stats, const MetricSums& train) {
  // The epoch's training is complete; its state, held before the evaluation, is saved as a checkpoint at
  // the end of that training, from which a resume evaluates the epoch and goes on.
  const int64_t steps_done = stats.first_step - 1 + stats.steps;
  StopRecord record;
  record.epoch = stats.epoch;
  record.step = steps_done / config_.train.accumulate;
  record.epoch_samples = epoch_samples(steps_done);
  record.in_evaluation = true;
  if (options_.enabled) {
    record.checkpoint = save_inside_epoch(EpochPoint{stats.epoch, steps_done, &train, stats.train_samples}, true);
    record.saved = true;
  }
  stop(decision, record);
}

std::string RunCheckpoints::save_epoch_end(const EpochStats& stats) {
  if (!options_.enabled) return "";
  set_phase(Phase::kCheckpointing, stats.epoch);
  CheckpointMeta meta = this->meta(stats.epoch);
  meta.metrics = stats;
  held_.set_meta(std::move(meta));
  std::string path = saver_.take(std::move(held_));
  schedule_.saved();
  return path;
}

void RunCheckpoints::after_epoch(const EpochStats& stats) {
  const StepDecision decision = stops_.agree_stop();
  if (decision.stop_signal == 0) return;
  StopRecord where;
  where.epoch = stats.epoch;
  where.epoch_samples = stats.train_samples;
  where.checkpoint = stats.checkpoint_path;
  where.saved = options_.enabled;
  stop(decision, where);
}

void RunCheckpoints::stop(const StepDecision& decision, StopRecord record, const EpochPoint* point) {
  Stopwatch watch;
  record.checkpoints = options_.enabled;
  record.signal = signal_name(decision.stop_signal);
  record.signal_number = decision.stop_signal;
  record.rank = decision.stop_rank;
  int64_t steps_done = 0;
  if (point != nullptr) {
    steps_done = point->steps_done;
    record.epoch = point->epoch;
    record.step = steps_done / config_.train.accumulate;
    record.epoch_samples = epoch_samples(steps_done);
    if (options_.enabled) record.checkpoint = save_inside_epoch(*point);
    record.saved = options_.enabled;
  }
  set_phase(Phase::kFinishing, record.epoch, steps_done);
  saver_.flush();  // rank 0: the checkpoint is on disk, or its failure ends the run here
  if (!record.saved && restored_) record.checkpoint = restored_->path;
  // From the signal, where rank 0 received it; else from the step boundary where it learnt of it.
  const double since_signal = seconds_since_stop_signal();
  record.stop_s = since_signal > 0 && decision.stop_rank == 0 ? since_signal : watch.elapsed_s();
  logger_.stopped(record);
  // No rank leaves before rank 0's checkpoint and record are written: under mpirun, the first rank to
  // exit ends the job.
  comm_.barrier();
  throw StoppedBySignal(decision.stop_signal,
                        "stopped by " + record.signal + " (received by rank " + std::to_string(record.rank) + ")");
}

}  // namespace dtrain
