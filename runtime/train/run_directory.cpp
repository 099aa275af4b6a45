#include "runtime/train/run_directory.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include "runtime/log/log_format.h"
#include "runtime/train/checkpoint_files.h"
#include "runtime/train/memory_copy.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"

namespace dtrain {
namespace fs = std::filesystem;
namespace {

// The workload a run directory's config.yaml names ("" when it has none that can be read).
std::string workload_of_run(const fs::path& run) {
  std::ifstream in(run / "config.yaml");
  std::string line;
  const std::string key = "workload: ";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  }
  return "";
}

constexpr const char* kJobFile = "torchrun_job";

// The torchrun job recorded in `dir` ("" when none is): the whole file but its final newline, so that an
// id with a newline of its own reads back as it was written.
std::string job_of(const fs::path& dir) {
  std::ifstream in(dir / kJobFile, std::ios::binary);
  std::string job((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!job.empty() && job.back() == '\n') job.pop_back();
  return job;
}

void record_job(const fs::path& dir, const std::string& job) {
  if (!job.empty() && job_of(dir) != job) write_file_atomically((dir / kJobFile).string(), job + "\n");
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

// The run of `workload` (and of torchrun job `job`, when given) in `log_dir` whose newest checkpoint in its
// checkpoints/ (or in memory) was written last.
std::optional<std::string> newest_run_with_checkpoint(const std::string& log_dir, const std::string& workload,
                                                      const std::string& job, const std::string& memory) {
  std::optional<std::string> newest;
  fs::file_time_type newest_time;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(log_dir, ec)) {
    if (!entry.is_directory(ec) || workload_of_run(entry.path()) != workload) continue;
    if (!job.empty() && job_of(entry.path()) != job) continue;
    const std::optional<fs::file_time_type> written = newest_checkpoint_time((entry.path() / "checkpoints").string(), memory);
    if (written && (!newest || *written > newest_time)) {
      newest = entry.path().filename().string();
      newest_time = *written;
    }
  }
  return newest;
}

void create_directories(const std::string& dir, const char* what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create " + std::string(what) + " '" + dir + "': " + ec.message());
}

}  // namespace

std::unique_ptr<RunDirectory> RunDirectory::open(const TrainConfig& config, double lock_wait_s, const std::string& job) {
  std::unique_ptr<RunDirectory> run(new RunDirectory());
  const std::string& log_dir = config.log.dir;
  const CheckpointOptions& ck = config.checkpoint;
  const bool shared_checkpoints = ck.enabled && !ck.dir.empty();
  const std::string memory = ck.enabled ? memory_root(ck.memory_dir) : "";
  create_directories(log_dir, "log.dir");

  run->name_ = config.log.run_name;
  if (run->name_.empty() && ck.resume && !shared_checkpoints) {
    if (std::optional<std::string> newest = newest_run_with_checkpoint(log_dir, config.workload, job, memory)) {
      run->name_ = *newest;
      run->note_ = "resuming run '" + *newest + "', the run of " + config.workload +
                   (job.empty() ? "" : " of torchrun job '" + job + "'") + " in '" + log_dir +
                   "' with the newest checkpoint (--run-name chooses another)";
    } else if (!job.empty() && newest_run_with_checkpoint(log_dir, config.workload, "", memory)) {
      run->note_ = "the runs of " + config.workload + " in '" + log_dir + "' with checkpoints are other jobs'; torchrun job '" +
                   job + "' starts a run of its own (--resume --run-name NAME continues one of them)";
    }
  }
  if (run->name_.empty()) {
    // A new run: the first free name of its second. create_directory fails on an existing directory, so
    // two runs starting in the same second in one log.dir still get a directory each.
    const std::string stem = format_utc(std::time(nullptr), "%Y%m%dT%H%M%SZ") + "-" + config.workload;
    for (int attempt = 1;; ++attempt) {
      const std::string name = attempt == 1 ? stem : stem + "-" + std::to_string(attempt);
      std::error_code ec;
      if (fs::create_directory(fs::path(log_dir) / name, ec)) {
        run->name_ = name;
        break;
      }
      if (ec) throw IoError("cannot create the run directory '" + (fs::path(log_dir) / name).string() + "': " + ec.message());
    }
  }
  run->path_ = (fs::path(log_dir) / run->name_).string();
  create_directories(run->path_, "the run directory");

  std::string holder;
  run->run_lock_ = DirectoryLock::try_lock(run->path_, lock_wait_s, holder);
  if (!run->run_lock_) {
    throw ConfigError("run '" + run->name_ + "' in '" + log_dir + "' is in use by " + holder +
                      "; wait for it to end, or give this run another --run-name");
  }
  std::error_code ec;
  if (!ck.resume && fs::exists(fs::path(run->path_) / "events.jsonl", ec)) {
    throw ConfigError("log.run_name '" + run->name_ + "': a run of that name is already in '" + log_dir +
                      "'; continue it with --resume, or give this run another --run-name");
  }

  record_job(run->path_, job);

  if (!ck.enabled) return run;
  run->checkpoint_dir_ = shared_checkpoints ? ck.dir : (fs::path(run->path_) / "checkpoints").string();
  if (fs::exists(run->checkpoint_dir_, ec) && !fs::is_directory(run->checkpoint_dir_, ec)) {
    throw ConfigError("checkpoint.dir '" + run->checkpoint_dir_ + "' exists but is not a directory");
  }
  create_directories(run->checkpoint_dir_, "checkpoint.dir");
  if (!shared_checkpoints) {
    run->claim_checkpoints(ck.resume, memory);
    return run;
  }
  run->checkpoint_lock_ = DirectoryLock::try_lock(run->checkpoint_dir_, lock_wait_s, holder);
  if (!run->checkpoint_lock_) {
    throw ConfigError("checkpoint.dir '" + ck.dir + "' is in use by " + holder +
                      "; give this run its own --checkpoint-dir, or leave checkpoint.dir unset so that its "
                      "checkpoints go to its run directory");
  }
  if (!job.empty()) {
    // Resumed because torchrun restarts resume: only this job's checkpoints are this run's to continue.
    const std::optional<std::string> existing = latest_checkpoint(ck.dir);
    const std::string owner = job_of(ck.dir);
    if (existing && owner != job) {
      throw ConfigError("checkpoint.dir '" + ck.dir + "' holds checkpoints of " +
                        (owner.empty() ? std::string("a run outside torchrun job '" + job + "'")
                                       : "torchrun job '" + owner + "'") +
                        " (" + *existing + "), which this job would continue; give this job another --checkpoint-dir, "
                        "or pass --resume to continue those checkpoints");
    }
    record_job(ck.dir, job);
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
  const int removed = remove_partial_checkpoints(checkpoint_dir_);
  if (removed > 0) {
    add_note("removed " + std::to_string(removed) + " partial checkpoint file(s) (*.pt.tmp) from " + checkpoint_dir_ +
             ", left by a write that never finished");
  }
  // A run that starts afresh gets an id of its own: no copy in memory of an earlier run here (or of a run
  // deleted and started again under the same name) is ever taken for its state.
  if (!resume || checkpoint_run_id(checkpoint_dir_).empty()) new_checkpoint_run_id(checkpoint_dir_);
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
