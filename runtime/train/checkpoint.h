// Checkpoints that do not depend on world size: every trained module and its optimizer state, epoch,
// seed and the epoch's metrics, written at epoch ends and, with checkpoint.every_steps/every_s, inside
// epochs (with the epoch's position in global samples, so a resume at any world size continues it). Rank 0 writes them atomically (temporary file, fsync, rename); a restore reads the
// newest one on rank 0 and broadcasts its bytes, so every rank loads identical state whatever its
// filesystem sees, and reaches the same verdict on a bad file.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/train/checkpoint_files.h"
#include "runtime/train/checkpoint_format.h"
#include "runtime/train/memory_copy.h"
#include "runtime/train/train_state.h"

namespace dtrain {

// What Checkpointer::restore found.
struct Restored {
  std::optional<CheckpointMeta> checkpoint;  // loaded into the modules; none: nothing to resume
  // Newer checkpoints passed over, each "<path>: <what is wrong>": damaged (a bad CRC, truncated, empty),
  // not a dtrain checkpoint, named for another position than it records, or a copy in memory that is
  // not this run's.
  std::vector<std::string> passed_over;
};

// The training state at one step boundary, ready to be written (Checkpointer::persist). Taken with
// copies, it holds the parameters, buffers and optimizer state as host-memory copies that training no
// longer touches, so that a thread of its own can serialise and write it while training goes on; taken
// without, it refers to the live tensors and must be written before the next step.
class CheckpointSnapshot final {
 public:
  CheckpointSnapshot() = default;
  CheckpointSnapshot(CheckpointSnapshot&&) = default;
  CheckpointSnapshot& operator=(CheckpointSnapshot&&) = default;

  bool empty() const { return !taken_; }
  const std::string& path() const { return path_; }  // where persist() writes it
  // What persist() records, and so where it writes: the caller may complete it until then (the epoch's
  // metrics once it is evaluated; the position of an epoch whose evaluation a stop cut short).
  const CheckpointMeta& meta() const { return meta_; }
  void set_meta(CheckpointMeta meta);
  // Refers to the live tensors (taken without copies): persist it before training goes on.
  bool live() const { return live_; }

 private:
  friend class Checkpointer;
  bool taken_ = false;
  CheckpointState state_;  // what it holds, by name in the file
  CheckpointMeta meta_;
  std::string dir_;
  std::string path_;
  bool live_ = true;
};

// Whether a snapshot copies the state (for a write behind training) or refers to it.
enum class SnapshotCopy { kLive, kHostCopy };

class Checkpointer final {
 public:
  Checkpointer(CheckpointOptions options, Communicator& comm);
  ~Checkpointer();

  // Rank 0: the state of `modules` at `meta`'s position, for persist(); empty on other ranks. With
  // kHostCopy every tensor is copied to host memory (pinned, from a GPU) before it returns. Throws Error
  // for an optimizer whose state a checkpoint cannot name (optimizer_state.h: SGD, Adam, AdamW, Adadelta).
  // The copies are kept for the next snapshot, which copies into them once this one is persisted:
  // memory already mapped takes a memcpy, fresh memory its page faults too (resnet50's 183 MiB on a
  // 2-core VM: 45-59 ms with fresh copies, see docs/benchmarks.md).
  CheckpointSnapshot snapshot(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules,
                              SnapshotCopy copy);
  // Rank 0, before training and off its thread if the caller likes (nothing else of the checkpointer may
  // run meanwhile): allocates and touches the host memory that kHostCopy snapshots of `modules` copy into
  // (parameters, buffers, and the optimizer state each parameter will have), so that the first snapshot
  // of a run takes no page faults.
  void prepare_host_copies(const std::vector<TrainedModule>& modules);
  // Rank 0: writes `snapshot` as save() does and returns its path. Touches no live tensor of a
  // kHostCopy snapshot, so it may run on another thread than training's. Throws as save() does.
  // With checkpoint.memory_dir it first writes the same bytes into this run's MemoryCopy (no fsync:
  // memory) and removes the copy before it there; that copy is best effort: when it cannot be written
  // (a small /dev/shm, as containers have; a directory another user made), memory_problem() says why
  // and later persists skip it.
  std::string persist(CheckpointSnapshot snapshot);
  // Why the copy in memory was not written ("" when it was, or is off). Read it after persist().
  const std::string& memory_problem() const { return memory_problem_; }
  // Rank 0, before the first persist: opens (makes) this run's copy in memory, so that a place that
  // cannot be used shows in memory_problem() from the start.
  void open_memory_copy();
  // Rank 0: removes this run's copy in memory (a run that ended: the disk holds its last state).
  void remove_memory_copy();

  // Rank 0 writes <dir>/checkpoint-epoch-NNNNNN.safetensors (NNNNNN = meta.epoch) or, inside an epoch,
  // checkpoint-epoch-NNNNNN-step-SSSSSSSS.safetensors (the epoch in progress and its optimizer steps), then prunes
  // older ones to the newest `keep` (never the file just written, never a later one); returns its path
  // ("" on other ranks).
  // Throws NonFiniteError, writing nothing, when a parameter or buffer is NaN or infinite, and IoError
  // when the file cannot be written (no partial file is left; existing checkpoints are untouched).
  std::string save(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules);

  // Collective. Loads the newest usable checkpoint of <dir> into every module and its optimizer, on every
  // rank, and returns its metadata (none if there is none). Where rank 0's node holds a copy in memory
  // (checkpoint.memory_dir) of this run at least as new as the newest file on disk, that copy is read
  // instead (meta.from_memory): a worker restarted on the same node does not read the disk. Newer files
  // that are damaged (checkpoint_format.h: every check before a tensor is made), not dtrain checkpoints,
  // or named for another position than they record are passed over, as is a copy in memory that does not
  // belong to this run (Restored::passed_over). Throws DataError (the same on every rank) when every file
  // on disk is passed over, or the newest is of another workload or optimizer, lacks a module, holds
  // parameters whose names, shapes or dtypes differ from the module's (checked before anything is
  // loaded) or non-finite values, or was trained on data whose `labels` (WorkloadData::labels) differ.
  // Only checkpoints of format 5 load (checkpoint_format.h); the newest being of format 4 (dtrain 0.1's
  // LibTorch archives, *.pt) throws DataError naming scripts/convert_checkpoint.py.
  Restored restore(std::vector<TrainedModule>& modules, const std::string& workload, const std::string& optimizer_name,
                   const std::string& labels = "") const;

  // Collective: loads the weights of the safetensors file `path` (checkpoint.init_from: PyTorch's
  // save_file(model.state_dict()), or a dtrain checkpoint) into `modules` on every rank, mapped by
  // plan_initial_weights' rule; the optimizers keep their fresh state. Rank 0 reads the file and sends its
  // bytes, so every rank loads the same and reaches the same verdict. Returns how many tensors it
  // loaded. Throws DataError (the same on every rank) naming the file and each mismatch; nothing is
  // loaded then.
  int64_t init_from(const std::string& path, std::vector<TrainedModule>& modules) const;

  // Path of the newest checkpoint in `dir` (the latest position in training), if any. Throws DataError for a checkpoint file name whose
  // epoch number is out of range.
  static std::optional<std::string> latest(const std::string& dir);

 private:
  CheckpointOptions options_;
  Communicator& comm_;
  std::string memory_root_;  // memory_root(options_.memory_dir)
  std::unique_ptr<MemoryCopy> memory_;  // rank 0's, from its first persist
  std::unordered_map<const void*, at::Tensor> host_copies_;  // by the live tensor they copy
  std::vector<at::Tensor> spare_copies_;  // prepared for optimizer state that did not exist yet
  std::string memory_problem_;
  std::optional<std::string> run_id_;  // <dir>/run_id, read at the first persist
};

}  // namespace dtrain
