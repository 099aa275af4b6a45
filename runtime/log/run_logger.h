// The run's output: console lines on rank 0 (per-epoch metrics in the chosen format, Train Epoch lines,
// the live progress of log.progress on stderr) and the JSON-lines run log plus the effective config in
// the run directory (runtime/train/run_directory.h chooses and creates it), and the same figures as
// TensorBoard event files there (log.tensorboard).
// On every other rank each method returns at once, so callers need not check the rank. Every write is
// checked: a full disk or a closed stdout throws IoError instead of losing the record that cross-platform
// comparisons rely on. Thread-safe: warnings and errors may come from the heartbeat thread.
#pragma once

#include <ctime>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/log/json_line.h"
#include "runtime/log/progress_meter.h"
#include "runtime/log/run_events.h"
#include "runtime/log/tensorboard_writer.h"
#include "runtime/util/activity.h"
#include "runtime/util/file_io.h"

namespace dtrain {

class RunLogger final {
 public:
  // On rank 0 appends to events.jsonl in `run_dir` (a continued run adds to its log), creating it; throws
  // IoError if it cannot (a link, a FIFO or another user's file under that name included). Other ranks
  // pass nullopt and write nothing. Console lines go to `console` (stdout by default), the live progress
  // to `progress` (stderr by default) in the style log.progress asks for (auto: a bar where a terminal
  // shows stderr, else lines).
  RunLogger(const LogOptions& options, bool is_root, std::optional<Directory> run_dir, std::ostream& console = std::cout,
            std::ostream& progress = std::cerr);

  void run_start(const RunInfo& info);  // also writes config.yaml beside the log
  void info(const std::string& message);  // a one-off console line, e.g. where a resume started
  void train_progress(const ProgressInfo& progress);  // a Train Epoch line
  // The live progress of one phase (see ProgressMeter): `total` global samples, `done` of them before it
  // began; then how many are done; then its end, before the epoch's lines.
  void begin_progress(const std::string& phase, int64_t done, int64_t total);
  // `run_left_s`: the estimate of the whole run's time left, when there is one.
  void progress(int64_t done, std::optional<double> run_left_s = std::nullopt);
  void end_progress();
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
  // The run stopped for a signal: a console line and a `stopped` record, synced.
  void stopped(const StopRecord& record);
  // The `stopped` record of a stop that could not wait for a step boundary (StopRecord::at_once), from
  // the stop watchdog's thread: written even when another thread holds the logger (after a second).
  void stopped_at_once(const StopRecord& record) noexcept;

  // One `sample` record per entry of `samples`, rank `rank`'s resource use over time.
  void resource_samples(int rank, const std::vector<ResourceSample>& samples);

  // Rank 0: the run directory (the run log, the config, samples); "" on other ranks.
  const std::string& run_dir() const { return run_dir_; }
  // Rank 0: the run directory, open, for what else a run writes there (profiles, samples). Other ranks
  // have none: calling it there throws Error.
  const Directory& run_directory() const;

  // "dtrain: warning: <message>" on stderr and a `warning` record in the run log.
  void warning(const std::string& message);
  // What one rank found on its own (a file its share of the data could not decode): on every rank,
  // "dtrain: warning: rank <rank>: <message>" on stderr; rank 0's also as a `warning` record.
  void rank_warning(int rank, const std::string& message);
  // An `error` record: the message that ends the run, the rank it came from and where that rank was.
  // Never throws: it runs on the way out, possibly on the very disk that filled up; a record that cannot
  // be written is reported on stderr instead.
  void error(const std::string& message, int rank, const ActivitySnapshot& where) noexcept;


 private:
  void write_event(const JsonRecord& record);  // mutex held
  void flush_console();                            // mutex held

  std::mutex mutex_;
  LogOptions options_;
  bool is_root_;
  std::string run_dir_;
  std::optional<Directory> directory_;  // rank 0's run directory
  std::unique_ptr<AppendFile> events_;
  std::ostream& out_;
  std::unique_ptr<ProgressMeter> meter_;  // rank 0
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0 with log.tensorboard, from run_start
};

}  // namespace dtrain
