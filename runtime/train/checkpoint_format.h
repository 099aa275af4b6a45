// The bytes of a dtrain checkpoint: a LibTorch archive (a zip; what dtrain checks before LibTorch reads
// one is checkpoint_archive.h) of format 4, holding
//   format_version, epoch, seed, world_size, workload, optimizer_name   what run it is of
//   epoch_samples, epoch_steps, partial_train, partial_samples          its position inside an epoch
//   global_batch, saved_unix_s, data_labels (where the data has them)
//   metrics                                                             at an epoch's end: its figures
//   modules/<name>, optimizers/<name>                                   every trained module's state
// Only format 4 is read: formats 1 to 3 were written before dtrain 0.1.0 and are refused, saying so.
#pragma once

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/log/run_events.h"
#include "runtime/train/checkpoint_files.h"
#include "runtime/train/optimizer_copy.h"
#include "runtime/train/train_state.h"

namespace dtrain {

constexpr int64_t kCheckpointFormatVersion = 4;

struct CheckpointMeta {
  int64_t epoch = 0;  // last completed epoch
  int64_t seed = 0;
  std::string workload;
  std::string optimizer;
  int64_t world_size = 0;  // informational: a checkpoint resumes at any world size
  // The epoch's reduced metrics (epoch, epochs, lr, sample counts, the named training and evaluation
  // metrics): a checkpoint of an epoch's end has them, one inside an epoch not.
  std::optional<EpochStats> metrics;
  std::string path;  // where it was read from (restore only)
  std::string labels;  // WorkloadData::labels of the data it was trained on ("" when not recorded)
  // Inside an epoch: how far epoch `epoch + 1` had got. Zero for a checkpoint at an epoch's end.
  int64_t epoch_samples = 0;  // global samples of it trained: the sampler's position
  int64_t epoch_steps = 0;    // optimizer steps of it taken
  MetricValues partial_train;  // the training metrics of those samples, reduced over all ranks
  int64_t partial_samples = 0;  // the samples they cover (steps skipped for NaN/inf gradients excluded)
  int64_t global_batch = 0;    // samples per optimizer step over all ranks (0: not recorded)
  double saved_unix_s = 0.0;   // when it was written (0: not recorded)
  bool from_memory = false;    // restore only: read from checkpoint.memory_dir's copy, not from the disk
};

// Where a checkpoint with this metadata is in training (its file's name says the same).
CheckpointPosition checkpoint_position_of(const CheckpointMeta& meta);

// Where a checkpoint with this metadata is in training (its file's name says the same).
CheckpointPosition checkpoint_position_of(const CheckpointMeta& meta);

// Tensors written, by name ("parameter conv1.weight of generator"), for the check that no NaN or
// infinity is saved.
using CheckedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Writes `module` into `archive` as Module::save does (parameters, buffers, then each serialisable child
// as a nested archive), each tensor through `take`, listing what it wrote in `checked` with `suffix`
// after each name (" of generator" where a workload trains several modules).
void write_module_state(const torch::nn::Module& module, torch::serialize::OutputArchive& archive,
                        const TensorCopy& take, const std::string& suffix, CheckedTensors& checked);
// Writes every record of `meta` (the format version first).
void write_checkpoint_meta(torch::serialize::OutputArchive& archive, const CheckpointMeta& meta);

// Whether a floating-point tensor holds no NaN or infinity (other dtypes always do). A contiguous host
// tensor is scanned on the calling thread.
bool holds_only_finite(const at::Tensor& t);

// A checkpoint read and parsed: its archive and what it records, to be checked against this run.
struct DecodedCheckpoint {
  torch::serialize::InputArchive archive;
  CheckpointMeta meta;
};

// Parses a checkpoint's bytes, read from `path`: what dtrain checks before LibTorch reads it (a whole zip,
// only what a dtrain checkpoint holds), LibTorch's reader (tensors land on `device`), the records and
// their ranges, and that its name (when it has one of a checkpoint's) says the position it records.
// Throws DataError saying what is wrong (without the path); the same bytes give the same verdict
// everywhere.
DecodedCheckpoint decode_checkpoint(const std::string& path, const std::string& bytes, c10::Device device);

// Loads a decoded checkpoint's modules and optimizer state into `modules`, after checking every module
// against it (names, shapes, dtypes, finite values), so that a bad file changes nothing. Throws DataError
// naming the file, its workload and the first difference.
void load_checkpoint_modules(DecodedCheckpoint& decoded, std::vector<TrainedModule>& modules, const std::string& workload);

}  // namespace dtrain
