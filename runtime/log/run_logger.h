// The run's output: console lines on rank 0 (per-epoch metrics in the chosen format, progress lines, a
// progress bar on terminals) and the JSON-lines run log plus the effective config in a run directory.
// On every other rank each method returns at once, so callers need not check the rank.
#pragma once

#include <ctime>
#include <fstream>
#include <iostream>
#include <string>

#include "runtime/config/config.h"
#include "runtime/log/run_events.h"
#include "runtime/util/timer.h"

namespace dtrain {

class RunLogger final {
 public:
  // On rank 0 creates <options.dir>/<UTC time>-<workload>/ with events.jsonl and config.yaml.
  // Throws Error if the directory cannot be created.
  // Console lines go to `console` (stdout by default); the progress bar goes to stderr.
  RunLogger(const LogOptions& options, bool is_root, const std::string& workload, std::ostream& console = std::cout);

  void run_start(const RunInfo& info);
  void info(const std::string& message);  // a one-off console line, e.g. where a resume started
  void train_progress(const ProgressInfo& progress);
  void step_progress(int64_t epoch, int64_t step, int64_t steps);  // the terminal progress bar only
  void epoch_end(const EpochStats& stats);
  void run_end(const RunSummary& summary);

 private:
  void write_event(const std::string& json_line);
  void clear_bar();

  LogOptions options_;
  bool is_root_;
  bool draw_bar_ = false;
  bool bar_visible_ = false;
  Stopwatch since_bar_;
  std::string run_dir_;
  std::ofstream events_;
  std::ostream& out_;
};

}  // namespace dtrain
