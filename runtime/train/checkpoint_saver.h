// Takes the trainer's checkpoints without stopping training for the write: at a step boundary rank 0
// copies the state into host memory (Checkpointer::snapshot), and a thread of its own serialises,
// writes, syncs and renames it (Checkpointer::persist) while the next steps run. checkpoint.async false
// writes on the training thread instead, as dtrain did before.
//
// One persist at a time. A checkpoint that falls due while the previous one is still being written
// waits for it, so that every checkpoint asked for is written (as torchtitan waits on its previous async
// save); the wait counts as training time the checkpoint took, its record's wait_s says how much, and
// the first wait of a run longer than 0.1 s warns. The run ends only after the last persist finished;
// a persist that failed (a full disk, a directory that went away) ends the run with its error at the
// next step boundary, from rank 0, as a failed write on the training thread does.
#pragma once

#include <atomic>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_logger.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/train_state.h"

namespace dtrain {

class CheckpointSaver final {
 public:
  CheckpointSaver(const CheckpointOptions& options, Communicator& comm, RunLogger& logger);
  // Waits for a persist in flight: a checkpoint being written is finished, even on the way out of a
  // failed run.
  ~CheckpointSaver();
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Rank 0, before training: prepares the host memory of the snapshots of `modules` on a thread of its
  // own (Checkpointer::prepare_host_copies), so that neither a step nor the first checkpoint waits for
  // its page faults. The next hold() waits for it.
  void prepare(const std::vector<TrainedModule>& modules);

  // At a step boundary, on every rank (only rank 0 does anything): checkpoints `modules` at `meta`'s
  // position and returns the path being (or already) written, "" on ranks > 0. Inside an epoch
  // (meta.epoch_samples > 0) it is logged as a `checkpoint` record once written. take(hold(...)).
  std::string take(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules);
  // The two halves of take(): hold() waits for the persist in flight and snapshots the state at once;
  // the snapshot may be completed (CheckpointSnapshot::set_meta) while training does not change the
  // state (an evaluation) and is then written by take(snapshot). Empty snapshot and "" on ranks > 0.
  CheckpointSnapshot hold(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules);
  std::string take(CheckpointSnapshot snapshot);
  // Rank 0, between steps: logs a persist that finished; rethrows the error of one that failed.
  void poll();
  // Waits for the persist in flight, logs it, and rethrows its error (a run that stops with its state
  // saved for a restart).
  void flush();
  // Waits for the persist in flight, logs it, and rethrows its error; then removes rank 0's copy in
  // memory (checkpoint.memory_dir): before a run that trained to its end reports that end.
  void finish();

 private:
  void start(CheckpointSnapshot snapshot, CheckpointRecord record);
  void wait_and_log();  // joins the persist in flight, logs it, rethrows its failure
  void warn_memory();   // once, when the copy in memory could not be written
  void join_prepare();

  const CheckpointOptions& options_;
  Communicator& comm_;
  RunLogger& logger_;
  Checkpointer checkpointer_;
  std::thread preparer_;
  std::thread writer_;
  std::atomic<bool> done_{false};
  std::exception_ptr failure_;
  CheckpointRecord pending_;  // the persist in flight, logged when it is done if inside an epoch
  double persist_s_ = 0.0;    // its write, on the writer's clock
  double held_wait_s_ = 0.0;  // of the snapshot held: waiting for the previous persist
  double held_save_s_ = 0.0;  // of the snapshot held: training time it took
  bool warned_wait_ = false;
  bool warned_memory_ = false;
};

}  // namespace dtrain
