// Rank 0's live progress through one phase of a run at a time (an epoch's training, an evaluation): how
// far, how fast and how long until the phase ends. Drawn as a bar redrawn in place where a terminal
// shows it, printed as a plain line every few seconds where output goes to a file or a pod's log, or
// not at all. Not thread-safe: the RunLogger calls it with its mutex held.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "runtime/log/log_format.h"

namespace dtrain {

enum class ProgressStyle { kBar, kLines, kOff };

class ProgressMeter final {
 public:
  // `out` receives the bar or the lines (stderr in a run). `now_s` is a monotonic clock in seconds
  // (tests pass their own); by default the steady clock.
  ProgressMeter(ProgressStyle style, double line_interval_s, std::ostream& out,
                std::function<double()> now_s = nullptr);

  // A new phase of `total` samples (over all ranks), of which `done` are done before it starts (an epoch
  // resumed inside itself): its rate counts what this run does.
  void begin(std::string phase, int64_t done, int64_t total);
  // `done` samples of the phase so far. Cheap when nothing is due: the bar is redrawn at most five times a
  // second, a line printed at most every line_interval_s.
  // `run_left_s`: the whole run's time left, shown after the phase's when given.
  void update(int64_t done, std::optional<double> run_left_s = std::nullopt);
  // The phase is over: the bar is cleared (the epoch's line follows).
  void end();
  // Clears the bar before other output, which the next update draws it under.
  void clear();


 private:
  ProgressState state(double now) const;
  void draw(double now);

  ProgressStyle style_;
  double line_interval_s_;
  std::ostream& out_;
  std::function<double()> now_s_;
  bool active_ = false;
  bool bar_visible_ = false;
  std::string phase_;
  int64_t total_ = 0;
  int64_t done_ = 0;
  int64_t begin_done_ = 0;
  std::optional<double> run_left_s_;  // as last given, at run_left_at_s_ (counted down to each draw)
  double run_left_at_s_ = 0.0;
  // The rate counts from the first update after begin(), so that a phase's first step (start-up work,
  // FLOP counting) does not weigh on the estimate.
  int64_t rate_from_done_ = -1;
  double rate_from_s_ = 0.0;
  double phase_start_s_ = 0.0;
  double last_draw_s_ = 0.0;
};

}  // namespace dtrain
