// Checkpoint files by name: where in training a checkpoint is, the name that says it, and the checkpoints
// of a directory in training order. checkpoint-epoch-NNNNNN.pt is the end of epoch NNNNNN;
// checkpoint-epoch-NNNNNN-step-SSSSSSSS.pt is SSSSSSSS optimizer steps into epoch NNNNNN. A write in
// progress is <name>.tmp until it is renamed.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

// (epoch, optimizer steps into it); the end of an epoch has kEpochEndSteps, after every step of it.
using CheckpointPosition = std::pair<int64_t, int64_t>;
constexpr int64_t kEpochEndSteps = std::numeric_limits<int64_t>::max();

// "epoch 3 (its end)" or "epoch 3, step 120", for messages.
std::string position_text(const CheckpointPosition& position);

// checkpoint-epoch-NNNNNN.pt or checkpoint-epoch-NNNNNN-step-SSSSSSSS.pt.
std::string checkpoint_file_name(const CheckpointPosition& position);

// The position a checkpoint file name says, or nullopt for another name (a partial .tmp among them).
// Throws DataError for a checkpoint name whose numbers are too large for any run (naming `where`).
std::optional<CheckpointPosition> checkpoint_position(const std::string& name, const std::string& where);

// Whether `name` is a partial checkpoint: a write that never finished (<checkpoint name>.tmp).
bool is_partial_checkpoint(const std::string& name);

struct CheckpointFile {
  CheckpointPosition position;
  std::string path;
};

// The checkpoints (regular files) in `dir`, oldest position first; none when it is not a directory.
// Throws DataError as checkpoint_position does.
std::vector<CheckpointFile> list_checkpoints(const std::string& dir);

// The path of the newest checkpoint in `dir`, if any.
std::optional<std::string> latest_checkpoint(const std::string& dir);

// Removes the partial checkpoints from `dir`, which this process has locked. Returns how many.
int remove_partial_checkpoints(const std::string& dir);

}  // namespace dtrain
