// Checkpoint files by name: where in training a checkpoint is, the name that says it, and the checkpoints
// of a directory in training order. checkpoint-epoch-NNNNNN.safetensors is the end of epoch NNNNNN;
// checkpoint-epoch-NNNNNN-step-SSSSSSSS.safetensors is SSSSSSSS optimizer steps into epoch NNNNNN. A
// write in progress is <name>.<12 random hex digits>.tmp until it is renamed. The same names ending in
// .pt are dtrain 0.1's checkpoints (format 4), listed so that a resume can name them, never read. Only regular files count: a link,
// a FIFO or a directory under such a name is never followed, read or waited on.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/util/directory.h"

namespace dtrain {

// The largest epoch, step, sample count or world size a checkpoint or progress mark may record: 2^40,
// far beyond any run and far enough below INT64_MAX that the position arithmetic of a resume (epoch + 1,
// epochs x samples per epoch) cannot overflow.
constexpr int64_t kMaxCheckpointCount = int64_t{1} << 40;

// (epoch, optimizer steps into it); the end of an epoch has kEpochEndSteps, after every step of it.
using CheckpointPosition = std::pair<int64_t, int64_t>;
constexpr int64_t kEpochEndSteps = std::numeric_limits<int64_t>::max();

// "epoch 3 (its end)" or "epoch 3, step 120", for messages.
std::string position_text(const CheckpointPosition& position);

// checkpoint-epoch-NNNNNN.safetensors or checkpoint-epoch-NNNNNN-step-SSSSSSSS.safetensors.
std::string checkpoint_file_name(const CheckpointPosition& position);

// The position a checkpoint file name (of format 5, or 4: *.pt) says, or nullopt for another name (a
// partial .tmp among them).
// Throws DataError for a checkpoint name whose numbers are too large for any run (naming `where`).
std::optional<CheckpointPosition> checkpoint_position(const std::string& name, const std::string& where);

// Whether `name` is a partial checkpoint: a write that never finished (<checkpoint name>.<hex>.tmp, or
// <checkpoint name>.tmp as dtrain before 0.9 named it).
bool is_partial_checkpoint(const std::string& name);

// Whether a checkpoint's name is one of format 4 (*.pt).
bool is_format4_checkpoint_name(const std::string& name);

struct CheckpointFile {
  CheckpointPosition position;
  std::string path;
  bool format4 = false;  // dtrain 0.1's (*.pt), which this dtrain does not read
};

// The checkpoints (regular files, links never followed) in `dir`, oldest position first; none when it
// is not a directory. Throws DataError as checkpoint_position does.
std::vector<CheckpointFile> list_checkpoints(const std::string& dir);

// An entry of a checkpoint directory named like a checkpoint (or its temporary) that is not a regular file.
struct CheckpointNameClash {
  std::string path;
  std::string kind;   // file_kind(): "a directory", "a symbolic link", ...
  bool directory = false;  // a rename of the checkpoint of its position could not replace it
};

// Such entries of `dir`, by path: a run passes them over (never reading or following one).
std::vector<CheckpointNameClash> checkpoint_name_clashes(const std::string& dir);

// The bytes of checkpoint `name` in `dir`, read only when it is a regular file (no link followed, no FIFO
// waited on) of at most `max_bytes` whose first 8 bytes give a header length the file can hold: a file
// that is none of these is refused from its size and those bytes, before it is read whole. Throws IoError (it cannot be opened
// or read) or DataError (what is wrong with it).
std::string read_checkpoint_file(const Directory& dir, const std::string& name, uint64_t max_bytes);

// The path of the newest checkpoint in `dir`, if any.
std::optional<std::string> latest_checkpoint(const std::string& dir);

// Removes the partial checkpoints of this user (regular files; no link is followed or removed) from
// `dir`, which this process has locked. Returns how many.
int remove_partial_checkpoints(const std::string& dir);

// Where training last was, written by rank 0 beside the checkpoints (<dir>/progress) at each progress
// line, so that a resume after a failure can tell how much work the failure cost.
struct ProgressMark {
  int64_t epoch = 0;
  int64_t epoch_samples = 0;  // global samples of `epoch` trained
  double unix_s = 0.0;
};

// Replaces <dir>/progress with `mark`. Best effort: a mark that cannot be written is skipped (the next
// checkpoint reports a full disk).
void write_progress_mark(const std::string& dir, const ProgressMark& mark);
// The mark in `dir`, if there is a readable one within any run's range (a regular file of at most 256
// bytes; a link, a FIFO or a larger file is not read).
std::optional<ProgressMark> read_progress_mark(const std::string& dir);

}  // namespace dtrain
