// Where a run keeps what it leaves behind: <log.dir>/<run name>/ with its run log (events.jsonl),
// config.yaml, profiles, samples and, unless checkpoint.dir names another directory, its checkpoints/.
// A run owns its directory: it is locked while the run lives, a run of an existing name continues it
// only when asked to (checkpoint.resume), and a directory of checkpoints that other runs may share
// (checkpoint.dir) is locked as well. So two runs never write into one place, and a run never
// overwrites an earlier run's checkpoints.
// Directories are other people's too: the run directory and the checkpoint directory are used only when
// this user owns them and nobody else can add or replace their entries (no group or world write, or the
// sticky bit), unless log.allow_shared_dirs says that those who can are trusted; a name dtrain uses in
// them (the run directory itself, checkpoints/, the lock, the run log, run_id) is never followed as a
// link, and what it reads back from them is bounded (file_io.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/config/config.h"
#include "runtime/util/directory.h"
#include "runtime/util/file_lock.h"

namespace dtrain {

class RunDirectory final {
 public:
  // Rank 0 only; the other ranks learn the paths from it. Chooses the run (log.run_name; else with
  // checkpoint.resume the newest run of the workload in log.dir that has a checkpoint; else a new
  // <UTC time>-<workload>), creates its directories and takes the locks, waiting up to `lock_wait_s` for
  // a lock another dtrain holds (under an elastic agent, the previous incarnation may still be going).
  // Throws ConfigError, naming what to change, when the run or checkpoint.dir is in use by another
  // dtrain, or when a run of log.run_name, or checkpoints in checkpoint.dir, exist and checkpoint.resume
  // is not set; when the run or checkpoint directory is shared (another user's, or writable by others
  // without the sticky bit) and log.allow_shared_dirs is not set, naming the path, who else can write
  // it and the option; when a name dtrain would use there is a link, a FIFO or another thing it did not
  // make (the lock, the run log, run_id, checkpoints/, a directory named like a checkpoint); IoError when
  // a directory cannot be created.
  //
  // `job`: under torchrun's agent, whose restarts resume without being asked, its job
  // (TORCHELASTIC_RUN_ID). The resume then chooses only among runs of that job, and a new run records
  // it (a file `torchrun_job` in the run directory, and in a shared checkpoint.dir): a new job started
  // in the same log.dir begins its own run instead of continuing an earlier job's, and one pointed at
  // a checkpoint.dir of another job's is refused (ConfigError) unless --resume says it is meant.
  static std::unique_ptr<RunDirectory> open(const TrainConfig& config, double lock_wait_s, const std::string& job = "");

  const std::string& path() const { return path_; }  // <log.dir>/<name>
  // The run directory, opened once: what rank 0 writes there (the run log, the config, profiles, samples)
  // goes through it.
  const Directory& directory() const { return *directory_; }
  const std::string& name() const { return name_; }
  // Where this run's checkpoints go and a resume reads them; "" when checkpoint.enabled is false.
  const std::string& checkpoint_dir() const { return checkpoint_dir_; }
  // How the run was chosen and what was cleaned up, when that is worth a console line; else "".
  const std::string& note() const { return note_; }

 private:
  RunDirectory() = default;
  void add_note(const std::string& note);
  // Under the checkpoint directory's lock: refuses entries named like checkpoints that are not regular
  // files and a run_id dtrain did not write, removes what killed checkpoint writes left, gives a run that
  // starts afresh (not `resume`) a new run id, and sweeps this user's copies in memory under `memory`
  // (memory_copy.h); says what it did in note_.
  void claim_checkpoints(bool resume, const std::string& memory);

  std::optional<Directory> directory_;
  std::string path_;
  std::string name_;
  std::string checkpoint_dir_;
  std::string note_;
  std::unique_ptr<DirectoryLock> run_lock_;
  std::unique_ptr<DirectoryLock> checkpoint_lock_;
};

}  // namespace dtrain
