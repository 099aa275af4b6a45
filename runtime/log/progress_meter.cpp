#include "runtime/log/progress_meter.h"

#include <algorithm>
#include <utility>

#include "runtime/util/timer.h"

namespace dtrain {
namespace {

constexpr double kBarRedrawS = 0.2;  // five redraws a second: smooth, and cheap next to a small model's step
constexpr int kBarWidth = 24;

}  // namespace

ProgressMeter::ProgressMeter(ProgressStyle style, double line_interval_s, std::ostream& out,
                             std::function<double()> now_s)
    : style_(style), line_interval_s_(line_interval_s), out_(out), now_s_(now_s ? std::move(now_s) : steady_now_s) {}

void ProgressMeter::begin(std::string phase, int64_t done, int64_t total) {
  if (style_ == ProgressStyle::kOff) return;
  clear();
  active_ = true;
  phase_ = std::move(phase);
  done_ = done;
  begin_done_ = done;
  total_ = total;
  rate_from_done_ = -1;
  run_left_s_.reset();
  phase_start_s_ = now_s_();
  last_draw_s_ = phase_start_s_;
}

void ProgressMeter::update(int64_t done, std::optional<double> run_left_s) {
  if (!active_) return;
  done_ = done;
  const double now = now_s_();
  if (run_left_s) {
    run_left_s_ = run_left_s;
    run_left_at_s_ = now;
  }
  if (rate_from_done_ < 0) {
    rate_from_done_ = done;
    rate_from_s_ = now;
  }
  if (style_ == ProgressStyle::kBar) {
    if (bar_visible_ && now - last_draw_s_ < kBarRedrawS && done_ < total_) return;
  } else if (now - last_draw_s_ < line_interval_s_) {
    return;
  }
  last_draw_s_ = now;
  draw(now);
}

void ProgressMeter::end() {
  clear();
  active_ = false;
}

void ProgressMeter::clear() {
  if (!bar_visible_) return;
  out_ << "\r\033[K" << std::flush;
  bar_visible_ = false;
}

ProgressState ProgressMeter::state(double now) const {
  ProgressState s;
  s.phase = phase_;
  s.done = done_;
  s.total = total_;
  if (run_left_s_) s.run_left_s = std::max(0.0, *run_left_s_ - (now - run_left_at_s_));
  if (rate_from_done_ >= 0 && done_ > rate_from_done_ && now > rate_from_s_) {
    s.samples_per_s = static_cast<double>(done_ - rate_from_done_) / (now - rate_from_s_);
  } else if (done_ > begin_done_ && now > phase_start_s_) {
    // One update so far (a short evaluation): the only rate there is, from the phase's start.
    s.samples_per_s = static_cast<double>(done_ - begin_done_) / (now - phase_start_s_);
  }
  return s;
}

void ProgressMeter::draw(double now) {
  if (style_ == ProgressStyle::kBar) {
    // One insertion each, so that on an unbuffered stderr a line or a redraw is one write (terminal.h).
    out_ << ("\r" + progress_bar_text(state(now), kBarWidth) + "\033[K") << std::flush;
    bar_visible_ = true;
  } else {
    out_ << (progress_line_text(state(now)) + "\n") << std::flush;
  }
}

}  // namespace dtrain
