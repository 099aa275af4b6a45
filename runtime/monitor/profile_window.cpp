#include "runtime/monitor/profile_window.h"

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/util/check.h"
#include "runtime/util/file_io.h"

namespace dtrain {

ProfileWindow::ProfileWindow(const LogOptions& log, Communicator& comm, RunLogger& logger, c10::Device device)
    : log_(log), comm_(comm), logger_(logger), device_(device) {
  DTRAIN_CHECK(log_.profile_rank < comm_.world_size(), ConfigError,
               "log.profile_rank is " << log_.profile_rank << ", but the run has ranks 0 to " << comm_.world_size() - 1);
}

ProfileWindow::~ProfileWindow() = default;

void ProfileWindow::before_step(const StepRecord& step) {
  const StepRange& window = log_.profile_steps;
  if (window.empty() || state_ != State::kBefore || step.run_step != window.first) return;
  state_ = State::kInside;
  if (comm_.rank() == log_.profile_rank) profiler_ = std::make_unique<OpProfiler>(device_.is_cuda());
}

void ProfileWindow::after_step(const StepRecord& step) {
  if (state_ != State::kInside) return;
  last_step_ = step.run_step;
  if (step.run_step == log_.profile_steps.last) finish();
}

void ProfileWindow::run_ending(RunSummary&) { finish(); }

void ProfileWindow::finish() {
  if (state_ != State::kInside) return;
  state_ = State::kDone;
  const int root = static_cast<int>(log_.profile_rank);
  ProfileOutput out;
  if (profiler_) {
    if (device_.is_cuda()) at::detail::getCUDAHooks().deviceSynchronize(device_.index());  // the window's kernels
    out = profiler_->stop();
    profiler_.reset();
  }
  // The profiling rank's files go to rank 0, which holds the run directory (possibly on another node).
  if (root != 0) {
    std::vector<std::string> parts{std::move(out.trace_json), std::move(out.table_csv),
                                   std::to_string(out.kineto) + " " + std::to_string(out.cuda) + " " +
                                       std::to_string(out.events)};
    comm_.broadcast_bytes(parts, root);
    out.trace_json = std::move(parts[0]);
    out.table_csv = std::move(parts[1]);
    std::istringstream flags(parts[2]);
    int kineto = 0;
    int cuda = 0;
    flags >> kineto >> cuda >> out.events;
    out.kineto = kineto != 0;
    out.cuda = cuda != 0;
  }
  if (!comm_.is_root()) return;
  ProfileRecord record;
  record.rank = root;
  record.first_step = log_.profile_steps.first;
  record.last_step = std::min(log_.profile_steps.last, last_step_);
  record.kineto = out.kineto;
  record.cuda = out.cuda;
  record.events = out.events;
  const std::string stem = "profile-rank" + std::to_string(root);
  const Directory& run = logger_.run_directory();
  record.trace = run.shown(stem + ".trace.json");
  record.table = run.shown(stem + "-ops.csv");
  write_file_atomically(run, stem + ".trace.json", out.trace_json);
  write_file_atomically(run, stem + "-ops.csv", out.table_csv);
  logger_.profile_written(record);
}

}  // namespace dtrain
