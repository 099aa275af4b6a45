#include "runtime/train/checkpoint_schedule.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>

namespace dtrain {
namespace {

// With checkpoint.every_s, rank 0's clock is consulted (one small broadcast) every this many optimizer
// steps: the checkpoint comes at most this many steps late, and the steps between pay nothing.
constexpr int64_t kCheckpointClockSteps = 10;

}  // namespace

CheckpointSchedule::CheckpointSchedule(const CheckpointOptions& options, Communicator& comm, int64_t check_steps)
    : options_(options), comm_(comm), check_steps_(std::max<int64_t>(1, check_steps)) {}

bool CheckpointSchedule::inside_epochs() const {
  return options_.enabled && (options_.every_steps > 0 || options_.every_s > 0);
}

StepDecision CheckpointSchedule::after_step() {
  ++steps_since_checkpoint_;
  ++steps_since_agreement_;
  const bool clock = inside_epochs() && options_.every_s > 0;
  StepDecision decision;
  if (clock || local_signal_) {
    const int64_t every = local_signal_ ? check_steps_ : kCheckpointClockSteps;
    if (steps_since_agreement_ >= every) decision = agree(clock);
  }
  if (inside_epochs() && options_.every_steps > 0 && steps_since_checkpoint_ >= options_.every_steps) {
    decision.checkpoint = true;
  }
  return decision;
}

StepDecision CheckpointSchedule::agree_stop() { return local_signal_ ? agree(false) : StepDecision{}; }

StepDecision CheckpointSchedule::agree(bool clock) {
  steps_since_agreement_ = 0;
  at::Tensor mine = at::zeros({2}, at::kLong);
  mine[0] = local_signal_ ? local_signal_() : 0;
  mine[1] = clock && comm_.is_root() && clock_.elapsed_s() - last_checkpoint_s_ >= options_.every_s ? 1 : 0;
  const at::Tensor all = comm_.allgather(mine).contiguous();
  const int64_t* values = all.data_ptr<int64_t>();
  StepDecision decision;
  decision.checkpoint = values[1] != 0;
  for (int rank = 0; rank < comm_.world_size(); ++rank) {
    if (values[2 * rank] == 0) continue;
    decision.stop_signal = static_cast<int>(values[2 * rank]);
    decision.stop_rank = rank;
    break;
  }
  return decision;
}

void CheckpointSchedule::saved() {
  steps_since_checkpoint_ = 0;
  last_checkpoint_s_ = clock_.elapsed_s();
}

void CheckpointSchedule::mark_progress(int64_t epoch, int64_t epoch_samples) const {
  if (!comm_.is_root() || !inside_epochs()) return;
  Checkpointer(options_, comm_).write_progress(ProgressMark{epoch, epoch_samples, unix_now_s()});
}

ResumeRecord CheckpointSchedule::resume_record(const CheckpointMeta& restored, int restart_count, double restore_s,
                                               StartTimes start, int64_t samples_per_epoch,
                                               int64_t global_batch) const {
  ResumeRecord resume;
  resume.checkpoint = restored.path;
  resume.from_memory = restored.from_memory;
  resume.restart_count = restart_count;
  resume.from_world_size = restored.world_size;
  resume.world_size = comm_.world_size();
  resume.epoch = restored.epoch + 1;
  resume.step = restored.epoch_steps;
  resume.epoch_samples = restored.epoch_samples;
  const double now = unix_now_s();
  resume.unix_time_s = now;
  resume.restore_s = restore_s;
  if (restored.saved_unix_s > 0) resume.lost_s = now - restored.saved_unix_s;
  if (!comm_.is_root()) return resume;
  const std::optional<ProgressMark> mark = Checkpointer::read_progress(options_.dir);
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

}  // namespace dtrain
