// The bytes of a dtrain checkpoint, format 5: the safetensors layout (runtime/checkpoint/safetensors.h),
// which Python's `safetensors` and any other reader of the format opens, holding
//   <module>.<path>                        every parameter and buffer of every trained module, by its
//                                          path in the module ("model.conv1.weight",
//                                          "generator.blocks.0.bn.running_mean")
//   optimizer.<module>.<path>.<state key>  its optimizer's state by parameter name and key
//                                          ("optimizer.model.conv1.weight.exp_avg", "...step"): mapped
//                                          by name, so a checkpoint resumes on any LibTorch version
// and under __metadata__ (strings) format ("dtrain-checkpoint"), format_version, dtrain_version,
// workload, modules (JSON list), optimizer and optimizer_options (JSON: type and each parameter group's
// options, by module), epoch, seed, world_size, epoch_samples, epoch_steps, partial_train (JSON),
// partial_samples, global_batch, saved_unix_s, run_id, data_labels (where the data has them), metrics
// (JSON, at an epoch's end) and crc32 (JSON: each tensor's CRC-32 over its bytes).
// Format 4 (dtrain 0.1, a LibTorch archive named *.pt) is not read: scripts/convert_checkpoint.py
// converts it once. Formats 1 to 3 were written before dtrain 0.1.0.
#pragma once

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/log/run_events.h"
#include "runtime/train/checkpoint_files.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/train/optimizer_state.h"
#include "runtime/train/train_state.h"

namespace dtrain {

constexpr int64_t kCheckpointFormatVersion = 5;

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
  std::string run_id;          // <checkpoint.dir>/run_id of the run that wrote it ("" when there was none)
};

// Where a checkpoint with this metadata is in training (its file's name says the same).
CheckpointPosition checkpoint_position_of(const CheckpointMeta& meta);

// Tensors written, by name ("parameter conv1.weight of generator"), for the check that no NaN or
// infinity is saved.
using CheckedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// What a checkpoint holds besides its metadata: every tensor by its name in the file, and each
// optimizer's options (optimizer_options()) by module name.
struct CheckpointState {
  NamedTensors tensors;
  nlohmann::json optimizers = nlohmann::json::object();
  std::vector<std::string> modules;  // the trained modules' names, in the workload's order
  CheckedTensors checked;            // the parameters and buffers among `tensors`, as messages name them
};

// Adds `module`'s parameters, buffers and optimizer state to `state`, each tensor through `take`; the
// labels of `checked` carry `suffix` (" of generator" where a workload trains several modules).
void collect_module_state(const TrainedModule& module, const TensorCopy& take, const std::string& suffix,
                          CheckpointState& state);

// The checkpoint's bytes: `state` and every record of `meta`, each tensor's CRC-32 among them.
std::string encode_checkpoint(const CheckpointState& state, const CheckpointMeta& meta);

// Whether a floating-point tensor holds no NaN or infinity (other dtypes always do). A contiguous host
// tensor is scanned on the calling thread.
bool holds_only_finite(const at::Tensor& t);

// A checkpoint read and parsed: its bytes, their layout and what it records, to be checked against a run.
struct DecodedCheckpoint {
  std::shared_ptr<std::string> bytes;
  SafetensorsFile file;  // views *bytes: they must not change while it is used
  CheckpointMeta meta;
  nlohmann::json optimizers;
  std::vector<std::string> modules;
};

// Parses a checkpoint's bytes, read from `path`: the layout (every offset, dtype and shape against the
// file), the records and their ranges, each tensor's CRC-32, and that its name (when it has one of a
// checkpoint's) says the position it records. Throws DataError saying what is wrong (without the path);
// the same bytes give the same verdict everywhere.
DecodedCheckpoint decode_checkpoint(const std::string& path, std::string bytes);

// A checkpoint that does not fit the run's model (a module, parameter or buffer missing, extra or of
// another shape or type): the run's configuration, not the file, differs, and every older file of the
// run would differ alike. Other DataErrors of a load are the file's own fault.
class CheckpointMismatch : public DataError {
 public:
  using DataError::DataError;
};

// What a checked checkpoint loads where: each live tensor's entry, each optimizer's options and
// per-parameter state. Views the DecodedCheckpoint it was planned from.
struct CheckpointLoad {
  const SafetensorsFile* file = nullptr;
  std::vector<std::pair<at::Tensor, const SafetensorsEntry*>> tensors;
  std::vector<nlohmann::json> optimizer_options;  // one per module with an optimizer, in order
  std::vector<std::vector<std::pair<at::Tensor, std::map<std::string, at::Tensor>>>> optimizer_states;  // per module
};

// Checks all of a decoded checkpoint against `modules`, changing nothing: every name (a missing, extra
// or misshapen entry is named), shape, dtype and finite value, every optimizer-state tensor against its
// parameter, and the optimizers' options. Throws CheckpointMismatch (naming the file, its workload and
// the first difference) or DataError (what is wrong with the file, without its path).
CheckpointLoad plan_checkpoint_load(const DecodedCheckpoint& decoded, const std::vector<TrainedModule>& modules,
                                   const std::string& workload);
// Loads a plan into `modules` (onto their devices). Nothing of it can fail for the file's sake.
void apply_checkpoint_load(const CheckpointLoad& plan, std::vector<TrainedModule>& modules);
// The weights of a safetensors file for a new run (--init-from): what PyTorch's
// `safetensors.torch.save_file(model.state_dict())` writes, or a dtrain checkpoint (its optimizer state
// left out). Names map by this rule: a leading "module." (DistributedDataParallel's wrapper) is dropped;
// a name that starts with a trained module's name and a dot belongs to that module; any other belongs to
// the workload's only trained module (with several, it must start with one's name). Every parameter and
// buffer must be there once, with its shape; a floating-point tensor of another floating type is
// converted. Throws DataError naming each missing, extra or misshapen entry (up to 8 of each).
CheckpointLoad plan_initial_weights(const SafetensorsFile& file, const std::vector<TrainedModule>& modules);

// Both, with the path in a DataError's message.
void load_checkpoint_modules(const DecodedCheckpoint& decoded, std::vector<TrainedModule>& modules, const std::string& workload);

}  // namespace dtrain
