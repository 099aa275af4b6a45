// Rank 0's copy of the newest checkpoint in memory on its node (checkpoint.memory_dir), so that a restart
// there resumes without reading the disk, and from a checkpoint whose disk write a failure cut short.
// /dev/shm is shared by every user of the node, so the copy is private and tied to its run:
//   - Everything lives in one directory per user, <root>/dtrain-<euid>, created 0700 without following
//     links and used only while it is a real directory owned by this user with mode 0700 (else a
//     warning, and checkpoints go to disk only). In it, one directory per run,
//     <16 hex digits naming the checkpoint directory's path>-<the run's id>, created and checked alike,
//     holding an `owner` file (the checkpoint directory's path) and the newest checkpoint. Every access
//     goes through the descriptors of these directories, and files are created exclusively (0600, no
//     link followed): nothing another user placed can be followed, trusted or deleted.
//   - The run's id is a random number in <checkpoint dir>/run_id, written anew by every run that starts
//     afresh: a copy is used only while the checkpoint directory on disk is still its run's. A deleted
//     and restarted run, or another run in the same place, never resumes from an older run's copy.
//   - What is read from it is checked like any checkpoint, and against its name (Checkpointer::restore).
//   - A run's copy goes when the run ends; after a failure it stays only while it is newer than anything
//     on disk. Copies that can never be used again (their run's directory gone or now another run's, or
//     older than the disk's newest checkpoint) and partial files go at the next start of any of the
//     user's runs on the node (sweep_memory_copies), and with `dtrain --remove-memory-copies` (the end of
//     a batch job) every copy whose state the disk holds too. A live run holds a shared lock on its copy,
//     so no sweep removes what it is writing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/train/checkpoint_files.h"
#include "runtime/util/directory.h"

namespace dtrain {

// The directory checkpoint.memory_dir names: "" for "" (no copy); for "auto", $XDG_RUNTIME_DIR where it is
// a directory of this user with mode 0700 (systemd's per-user tmpfs, removed with the user's last
// session), else /dev/shm where it exists, else ""; any other value as it is.
std::string memory_root(const std::string& memory_dir);

// The run id in <dir>/run_id, "" when there is none or the file does not read as one. Throws IoError when
// the file is there but is not one dtrain wrote: a link, a FIFO or device, or more than 64 bytes (it is
// never followed, waited on or read whole).
std::string checkpoint_run_id(const std::string& dir);
// Rank 0, holding the directory's lock: writes a new random run id into <dir>/run_id (a run that starts
// afresh there, or the first of a directory without one) and returns it. Throws IoError.
std::string new_checkpoint_run_id(const std::string& dir);

class MemoryCopy final {
 public:
  // The copy of the checkpoints of `checkpoint_dir` (a directory with a run id) under `root`
  // (memory_root). With `create`, makes the directories where missing (a run that writes); without,
  // nullptr when there is no copy. nullptr with `problem` set when the place cannot be used safely (the
  // per-user or run directory is a link, another user's, or not mode 0700) or at all.
  static std::unique_ptr<MemoryCopy> open(const std::string& root, const std::string& checkpoint_dir, bool create,
                                          std::string& problem);
  ~MemoryCopy();  // releases the lock
  MemoryCopy(const MemoryCopy&) = delete;
  MemoryCopy& operator=(const MemoryCopy&) = delete;

  const std::string& path() const { return dir_.path(); }  // for messages
  // Its checkpoints, oldest position first; each path is <path()>/<name>.
  std::vector<CheckpointFile> list() const;
  // A checkpoint of it, by name, read as read_checkpoint_file() reads one (at most `max_bytes`). Throws
  // IoError (a missing file, a link, another owner's) or DataError (its size or end).
  std::string read(const std::string& name, uint64_t max_bytes) const;
  // Writes `bytes` as `name` and then removes every other checkpoint of it. Throws IoError (leaving the
  // older checkpoint where the write failed).
  void replace(const std::string& name, const std::string& bytes);
  // Removes the copy: its files and its directory.
  void remove();

 private:
  explicit MemoryCopy(Directory dir) : dir_(std::move(dir)) {}
  Directory dir_;
};

// What to do with a run's copy after a failure that no agent restarts (rank 0): removed when the disk
// holds a checkpoint at least as new; else kept, and the returned note says where and why (the disk
// could not take the newest checkpoint: a --resume on this node continues from it). "" when removed or
// there is none.
std::string retire_memory_copy(const std::string& root, const std::string& checkpoint_dir);

struct MemorySweep {
  int copies_removed = 0;    // whole run directories
  int files_removed = 0;     // checkpoints older than their disk's newest, and partial files
  uint64_t bytes_freed = 0;
  std::vector<std::string> kept_ahead;  // kUnneeded: copies kept because they are newer than their disk
  std::string problem;       // why the per-user directory could not be swept ("" when it could, or is absent)
};

enum class SweepScope {
  kStale,     // what can never be used again (a run's start)
  kUnneeded,  // that, and every copy whose state the disk holds too (`dtrain --remove-memory-copies`)
};

// Removes from this user's copies under `root` what `scope` names, but never a copy a live run holds.
MemorySweep sweep_memory_copies(const std::string& root, SweepScope scope = SweepScope::kStale);

}  // namespace dtrain
