#include "runtime/train/run_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <sstream>
#include <vector>

#include "runtime/log/log_format.h"
#include "runtime/train/checkpoint_files.h"
#include "runtime/train/memory_copy.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

constexpr const char* kJobFile = "torchrun_job";
constexpr const char* kConfigFile = "config.yaml";
constexpr const char* kEventsFile = "events.jsonl";
// A run's config.yaml is a few KiB; a torchrun job id is a short string. Files larger than these in a
// directory of the log are not what dtrain wrote there, and are not read.
constexpr size_t kConfigFileMaxBytes = 1 << 20;
constexpr size_t kJobFileMaxBytes = 4096;

// `name` in `dir` when it is a small regular file (read_small_file), else "".
std::string small_file_or_empty(const Directory& dir, const char* name, size_t max_bytes) {
  try {
    return read_small_file(dir, name, max_bytes);
  } catch (const IoError&) {
    return "";
  }
}

// The workload a run directory's config.yaml names ("" when it has none that can be read).
std::string workload_of_run(const Directory& run) {
  std::istringstream in(small_file_or_empty(run, kConfigFile, kConfigFileMaxBytes));
  const std::string key = "workload: ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  }
  return "";
}

// The torchrun job recorded in `dir` ("" when none is): the whole file but its final newline, so that an
// id with a newline of its own reads back as it was written.
std::string job_of(const Directory& dir) {
  std::string job = small_file_or_empty(dir, kJobFile, kJobFileMaxBytes);
  if (!job.empty() && job.back() == '\n') job.pop_back();
  return job;
}

void record_job(const Directory& dir, const std::string& job) {
  if (!job.empty() && job_of(dir) != job) write_file_atomically(dir, kJobFile, job + "\n");
}

// Whether `name` in `dir` exists as anything (a link included, not followed).
bool entry_exists(const Directory& dir, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// The sentence that refuses `dir` (what `what` names, e.g. "the run directory") as shared, or "".
std::string shared_refusal(const Directory& dir, const std::string& what) {
  const std::string who = dir.shared_by();
  if (who.empty()) return "";
  return what + " '" + dir.path() + "' " + who +
         ": another user could plant links or files there that this run would then write through or read. "
         "Use a directory of your own (or remove the others' write access: chmod go-w), or pass "
         "--allow-shared-dirs (log.allow_shared_dirs) to use it all the same, trusting everyone who can "
         "write it not to replace what dtrain writes there (links named like dtrain's files are still never "
         "followed)";
}

// A directory that dtrain names inside another (the run directory in log.dir, checkpoints/ in it): never
// a link. Throws ConfigError naming it.
Directory sub_directory(const Directory& parent, const std::string& name, const std::string& what) {
  try {
    return parent.sub(name, true);
  } catch (const IoError& e) {
    throw ConfigError(what + ": " + e.message());
  }
}

// When the newest checkpoint of `checkpoint_dir` was written, on disk or in this node's copy in memory
// (a run killed during its first disk write has its only checkpoint there), if it has one.
std::optional<fs::file_time_type> newest_checkpoint_time(const std::string& checkpoint_dir, const std::string& memory) {
  std::vector<std::string> files;
  if (std::optional<std::string> on_disk = latest_checkpoint(checkpoint_dir)) files.push_back(*on_disk);
  std::string problem;
  if (const std::unique_ptr<MemoryCopy> copy = MemoryCopy::open(memory, checkpoint_dir, false, problem)) {
    const std::vector<CheckpointFile> in_memory = copy->list();
    if (!in_memory.empty()) files.push_back(in_memory.back().path);
  }
  std::optional<fs::file_time_type> newest;
  for (const std::string& file : files) {
    std::error_code ec;
    const fs::file_time_type written = fs::last_write_time(file, ec);
    if (!ec && (!newest || written > *newest)) newest = written;
  }
  return newest;
}

// The run of `workload` (and of torchrun job `job`, when given) in `log` whose newest checkpoint in its
// checkpoints/ (or in memory) was written last. Only real directories (no links), and with `own_only`
// only those no other user could have planted (Directory::shared_by), are candidates.
std::optional<std::string> newest_run_with_checkpoint(const Directory& log, const std::string& workload,
                                                      const std::string& job, const std::string& memory, bool own_only) {
  std::optional<std::string> newest;
  fs::file_time_type newest_time;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(log.path(), ec)) {
    if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    const std::string name = entry.path().filename().string();
    std::optional<Directory> run;
    try {
      run = log.sub(name, false);
      if (own_only && !run->shared_by().empty()) continue;
    } catch (const IoError&) {
      continue;
    }
    if (workload_of_run(*run) != workload) continue;
    if (!job.empty() && job_of(*run) != job) continue;
    const std::optional<fs::file_time_type> written = newest_checkpoint_time(run->shown("checkpoints"), memory);
    if (written && (!newest || *written > newest_time)) {
      newest = name;
      newest_time = *written;
    }
  }
  return newest;
}

}  // namespace

std::unique_ptr<RunDirectory> RunDirectory::open(const TrainConfig& config, double lock_wait_s, const std::string& job) {
  std::unique_ptr<RunDirectory> run(new RunDirectory());
  const std::string& log_dir = config.log.dir;
  const CheckpointOptions& ck = config.checkpoint;
  const bool allow_shared = config.log.allow_shared_dirs;
  const bool shared_checkpoints = ck.enabled && !ck.dir.empty();
  const std::string memory = ck.enabled ? memory_root(ck.memory_dir) : "";
  // log.dir itself is where the user said (links on the way followed); what dtrain names in it is not.
  const Directory log = Directory::open(log_dir, true);

  run->name_ = config.log.run_name;
  if (run->name_.empty() && ck.resume && !shared_checkpoints) {
    if (std::optional<std::string> newest = newest_run_with_checkpoint(log, config.workload, job, memory, !allow_shared)) {
      run->name_ = *newest;
      run->note_ = "resuming run '" + *newest + "', the run of " + config.workload +
                   (job.empty() ? "" : " of torchrun job '" + job + "'") + " in '" + log_dir +
                   "' with the newest checkpoint (--run-name chooses another)";
    } else if (!job.empty() && newest_run_with_checkpoint(log, config.workload, "", memory, !allow_shared)) {
      run->note_ = "the runs of " + config.workload + " in '" + log_dir + "' with checkpoints are other jobs'; torchrun job '" +
                   job + "' starts a run of its own (--resume --run-name NAME continues one of them)";
    }
  }
  if (run->name_.empty()) {
    // A new run: the first free name of its second. mkdirat fails on any existing entry (a link
    // included), so two runs starting in the same second in one log.dir still get a directory each,
    // and a name another user planted is passed by.
    const std::string stem = format_utc(std::time(nullptr), "%Y%m%dT%H%M%SZ") + "-" + config.workload;
    for (int attempt = 1;; ++attempt) {
      const std::string name = attempt == 1 ? stem : stem + "-" + std::to_string(attempt);
      if (::mkdirat(log.fd(), name.c_str(), 0755) == 0) {
        run->name_ = name;
        break;
      }
      if (errno != EEXIST) {
        throw IoError("cannot create the run directory '" + log.shown(name) + "': " + errno_text(errno));
      }
    }
  }
  run->path_ = log.shown(run->name_);
  run->directory_ = sub_directory(log, run->name_, "log.run_name '" + run->name_ + "'");
  const Directory& run_dir = *run->directory_;
  if (!allow_shared) {
    if (const std::string refusal = shared_refusal(run_dir, "the run directory"); !refusal.empty()) throw ConfigError(refusal);
  }

  std::string holder;
  try {
    run->run_lock_ = DirectoryLock::try_lock(run_dir, lock_wait_s, holder);
  } catch (const IoError& e) {
    throw ConfigError(e.message());
  }
  if (!run->run_lock_) {
    throw ConfigError("run '" + run->name_ + "' in '" + log_dir + "' is in use by " + holder +
                      "; wait for it to end, or give this run another --run-name");
  }
  if (!ck.resume && entry_exists(run_dir, kEventsFile)) {
    throw ConfigError("log.run_name '" + run->name_ + "': a run of that name is already in '" + log_dir +
                      "'; continue it with --resume, or give this run another --run-name");
  }

  record_job(run_dir, job);

  if (!ck.enabled) return run;
  std::optional<Directory> checkpoints;
  if (shared_checkpoints) {
    std::error_code ec;
    if (fs::exists(ck.dir, ec) && !fs::is_directory(ck.dir, ec)) {
      throw ConfigError("checkpoint.dir '" + ck.dir + "' exists but is not a directory");
    }
    checkpoints = Directory::open(ck.dir, true);
    run->checkpoint_dir_ = ck.dir;
  } else {
    checkpoints = sub_directory(run_dir, "checkpoints", "the run's checkpoint directory");
    run->checkpoint_dir_ = checkpoints->path();
  }
  if (!allow_shared) {
    const std::string what = shared_checkpoints ? "checkpoint.dir" : "the run's checkpoint directory";
    if (const std::string refusal = shared_refusal(*checkpoints, what); !refusal.empty()) throw ConfigError(refusal);
  }
  if (!shared_checkpoints) {
    run->claim_checkpoints(ck.resume, memory);
    return run;
  }
  try {
    run->checkpoint_lock_ = DirectoryLock::try_lock(*checkpoints, lock_wait_s, holder);
  } catch (const IoError& e) {
    throw ConfigError(e.message());
  }
  if (!run->checkpoint_lock_) {
    throw ConfigError("checkpoint.dir '" + ck.dir + "' is in use by " + holder +
                      "; give this run its own --checkpoint-dir, or leave checkpoint.dir unset so that its "
                      "checkpoints go to its run directory");
  }
  if (!job.empty()) {
    // Resumed because torchrun restarts resume: only this job's checkpoints are this run's to continue.
    const std::optional<std::string> existing = latest_checkpoint(ck.dir);
    const std::string owner = job_of(*checkpoints);
    if (existing && owner != job) {
      throw ConfigError("checkpoint.dir '" + ck.dir + "' holds checkpoints of " +
                        (owner.empty() ? std::string("a run outside torchrun job '" + job + "'")
                                       : "torchrun job '" + owner + "'") +
                        " (" + *existing + "), which this job would continue; give this job another --checkpoint-dir, "
                        "or pass --resume to continue those checkpoints");
    }
    record_job(*checkpoints, job);
  }
  if (!ck.resume) {
    if (const std::optional<std::string> existing = latest_checkpoint(ck.dir)) {
      throw ConfigError("checkpoint.dir '" + ck.dir + "' holds checkpoints of an earlier run (" + *existing +
                        "), which this run would overwrite; continue that run with --resume, or give this run "
                        "another --checkpoint-dir");
    }
  }
  run->claim_checkpoints(ck.resume, memory);
  return run;
}

void RunDirectory::add_note(const std::string& note) { note_ += (note_.empty() ? "" : "\n") + note; }

void RunDirectory::claim_checkpoints(bool resume, const std::string& memory) {
  // A directory under a checkpoint's name would make the write of that position fail (a rename cannot
  // replace it): named at the start, not when an epoch's checkpoint fails. Anything else that is no
  // regular file (a link, a FIFO) is passed over, never read or followed, and a write replaces it.
  std::string blocking;
  std::string passed;
  for (const CheckpointNameClash& clash : checkpoint_name_clashes(checkpoint_dir_)) {
    std::string& list = clash.directory ? blocking : passed;
    list += (list.empty() ? "'" : ", '") + clash.path + "' (" + clash.kind + ")";
  }
  if (!blocking.empty()) {
    throw ConfigError("checkpoint directory '" + checkpoint_dir_ + "' holds " + blocking +
                      " under a checkpoint's name, which no checkpoint of that position could replace: rename or "
                      "remove it, or give this run another --checkpoint-dir");
  }
  if (!passed.empty()) {
    add_note("passed over " + passed + " in " + checkpoint_dir_ +
             ": named like checkpoints, but not regular files; dtrain never reads or follows them");
  }
  const int removed = remove_partial_checkpoints(checkpoint_dir_);
  if (removed > 0) {
    add_note("removed " + std::to_string(removed) + " partial checkpoint file(s) (*.tmp) from " + checkpoint_dir_ +
             ", left by a write that never finished");
  }
  // A run that starts afresh gets an id of its own: no copy in memory of an earlier run here (or of a run
  // deleted and started again under the same name) is ever taken for its state.
  std::string run_id;
  if (resume) {
    try {
      run_id = checkpoint_run_id(checkpoint_dir_);
    } catch (const IoError& e) {
      throw ConfigError("checkpoint directory '" + checkpoint_dir_ + "': " + e.message() +
                        "; dtrain writes run_id itself (32 hex digits): remove it, and the resume gives the run a "
                        "new one");
    }
  }
  if (run_id.empty()) new_checkpoint_run_id(checkpoint_dir_);
  // (A per-user directory that cannot be swept safely is not used at all: the checkpoint saver says so.)
  const MemorySweep sweep = sweep_memory_copies(memory);
  if (sweep.copies_removed + sweep.files_removed > 0) {
    char freed[32];
    std::snprintf(freed, sizeof freed, "%.1f MiB", static_cast<double>(sweep.bytes_freed) / (1 << 20));
    add_note("removed " + std::to_string(sweep.copies_removed) + " checkpoint copies in memory that no run can resume from and " +
             std::to_string(sweep.files_removed) + " stale or partial file(s) from " + memory + "/dtrain-" +
             std::to_string(::geteuid()) + " (" + freed + ")");
  }
}

}  // namespace dtrain
