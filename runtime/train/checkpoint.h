// Checkpoints that do not depend on world size: every trained module and its optimizer state, epoch,
// seed and the epoch's metrics, written at epoch ends and, with checkpoint.every_steps/every_s, inside
// epochs (with the epoch's position in global samples, so a resume at any world size continues it). Rank 0 writes them atomically (temporary file, fsync, rename); a restore reads the
// newest one on rank 0 and broadcasts its bytes, so every rank loads identical state whatever its
// filesystem sees, and reaches the same verdict on a bad file.
#pragma once

#include <optional>
#include <string>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/train/train_state.h"

namespace dtrain {

struct CheckpointMeta {
  int64_t epoch = 0;  // last completed epoch
  int64_t seed = 0;
  std::string workload;
  std::string optimizer;
  int64_t world_size = 0;  // informational: a checkpoint resumes at any world size
  // The epoch's reduced metrics (epoch, epochs, lr, sample counts, the named training and evaluation
  // metrics). Absent in checkpoints of format 1, which did not store them.
  std::optional<EpochStats> metrics;
  std::string path;  // where it was read from (restore only)
  // Inside an epoch (format 4): how far epoch `epoch + 1` had got. Zero for a checkpoint at an epoch's end.
  int64_t epoch_samples = 0;  // global samples of it trained: the sampler's position
  int64_t epoch_steps = 0;    // optimizer steps of it taken
  MetricValues partial_train;  // the training metrics of those samples, reduced over all ranks
  int64_t partial_samples = 0;  // the samples they cover (steps skipped for NaN/inf gradients excluded)
  int64_t global_batch = 0;    // samples per optimizer step over all ranks (0: not recorded)
  double saved_unix_s = 0.0;   // when it was written (0: not recorded)
};

// Where training last was, written by rank 0 beside the checkpoints at each progress line, so that a
// resume after a failure can tell how much work the failure cost.
struct ProgressMark {
  int64_t epoch = 0;
  int64_t epoch_samples = 0;  // global samples of `epoch` trained
  double unix_s = 0.0;
};

class Checkpointer final {
 public:
  Checkpointer(CheckpointOptions options, Communicator& comm);

  // Rank 0 writes <dir>/checkpoint-epoch-NNNNNN.pt (NNNNNN = meta.epoch) or, inside an epoch,
  // checkpoint-epoch-NNNNNN-step-SSSSSSSS.pt (the epoch in progress and its optimizer steps), then prunes
  // older ones to the newest `keep` (never the file just written, never a later one); returns its path
  // ("" on other ranks).
  // Throws NonFiniteError, writing nothing, when a parameter or buffer is NaN or infinite, and IoError
  // when the file cannot be written (no partial file is left; existing checkpoints are untouched).
  std::string save(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules) const;

  // Collective. Loads the newest checkpoint of <dir> into every module and its optimizer, on every rank,
  // and returns its metadata, or nullopt if the directory holds none. Throws DataError (the same on every
  // rank) for an unreadable file, another workload or optimizer, a module the file lacks, parameters
  // whose names, shapes or dtypes differ from the module's (checked before anything is loaded), or
  // non-finite values. Checkpoints of formats 1 and 2 hold one module, which loads as "model".
  std::optional<CheckpointMeta> restore(std::vector<TrainedModule>& modules, const std::string& workload,
                                        const std::string& optimizer_name) const;

  // Rank 0: replaces <dir>/progress with `mark`. Best effort: a mark that cannot be written is skipped (the
  // next checkpoint reports a full disk).
  void write_progress(const ProgressMark& mark) const;
  // The mark in `dir`, if there is a readable one.
  static std::optional<ProgressMark> read_progress(const std::string& dir);

  // Path of the newest checkpoint in `dir` (the latest position in training), if any. Throws DataError for a checkpoint file name whose
  // epoch number is out of range.
  static std::optional<std::string> latest(const std::string& dir);

 private:
  CheckpointOptions options_;
  Communicator& comm_;
};

}  // namespace dtrain
