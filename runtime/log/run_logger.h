// The run's output: console lines on rank 0 (per-epoch metrics in the chosen format, progress lines, a
// progress bar on terminals) and the JSON-lines run log plus the effective config in a run directory.
// On every other rank each method returns at once, so callers need not check the rank. Every write is
// checked: a full disk or a closed stdout throws IoError instead of losing the record that cross-platform
// comparisons rely on. Thread-safe: warnings and errors may come from the heartbeat thread.
#pragma once

#include <ctime>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/util/activity.h"
#include "runtime/util/file_io.h"
#include "runtime/util/timer.h"

namespace dtrain {

class RunLogger final {
 public:
  // On rank 0 creates <options.dir>/<UTC time>-<workload>/ with events.jsonl. Throws IoError if the
  // directory or the log cannot be created. Console lines go to `console` (stdout by default); the
  // progress bar goes to stderr.
  RunLogger(const LogOptions& options, bool is_root, const std::string& workload, std::ostream& console = std::cout);

  void run_start(const RunInfo& info);  // also writes config.yaml beside the log
  void info(const std::string& message);  // a one-off console line, e.g. where a resume started
  void train_progress(const ProgressInfo& progress);
  void step_progress(int64_t epoch, int64_t step, int64_t steps);  // the terminal progress bar only
  void epoch_end(const EpochStats& stats);
  // A resumed run whose checkpoint already reached train.epochs: its last epoch's metrics, printed as an
  // epoch end is (with the Katib line) but logged as `finished_run` since this run trained nothing.
  void finished_run(const EpochStats& last);
  void run_end(const RunSummary& summary);
  // Files a step wrote for `epoch` (a GAN's sample grid): a `samples` record with their paths and a
  // console line.
  void samples_written(int64_t epoch, const std::vector<std::string>& paths);

  // A `profile` record with the trace and table paths of a --profile-steps window, and a console line.
  void profile_written(const ProfileRecord& record);
  void checkpoint_written(const CheckpointRecord& record);  // inside an epoch
  void resumed(const ResumeRecord& record);

  // One `sample` record per entry of `samples`, rank `rank`'s resource use over time.
  void resource_samples(int rank, const std::vector<ResourceSample>& samples);

  // Rank 0: the run directory (the run log, the config, samples); "" on other ranks.
  const std::string& run_dir() const { return run_dir_; }

  // "dtrain: warning: <message>" on stderr and a `warning` record in the run log.
  void warning(const std::string& message);
  // An `error` record: the message that ends the run, the rank it came from and where that rank was.
  // Never throws: it runs on the way out, possibly on the very disk that filled up; a record that cannot
  // be written is reported on stderr instead.
  void error(const std::string& message, int rank, const ActivitySnapshot& where) noexcept;


 private:
  void write_event(const std::string& json_line);  // mutex held
  void flush_console();                            // mutex held
  void clear_bar();                                // mutex held

  std::mutex mutex_;
  LogOptions options_;
  bool is_root_;
  bool draw_bar_ = false;
  bool bar_visible_ = false;
  Stopwatch since_bar_;
  std::string run_dir_;
  std::unique_ptr<AppendFile> events_;
  std::ostream& out_;
};

}  // namespace dtrain
