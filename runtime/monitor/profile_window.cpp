#include "runtime/monitor/profile_window.h"

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <cstring>
#include <string>

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
  at::Tensor sizes = at::tensor({static_cast<int64_t>(out.trace_json.size()), static_cast<int64_t>(out.table_csv.size()),
                                 static_cast<int64_t>(out.kineto), static_cast<int64_t>(out.cuda), out.events},
                                at::kLong);
  if (root != 0) {
    comm_.broadcast(sizes, root);
    at::Tensor bytes = at::empty({sizes[0].item<int64_t>() + sizes[1].item<int64_t>()}, at::kByte);
    if (comm_.rank() == root) {
      std::memcpy(bytes.data_ptr<uint8_t>(), out.trace_json.data(), out.trace_json.size());
      std::memcpy(bytes.data_ptr<uint8_t>() + out.trace_json.size(), out.table_csv.data(), out.table_csv.size());
    }
    comm_.broadcast(bytes, root);
    const char* data = reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>());
    out.trace_json.assign(data, static_cast<size_t>(sizes[0].item<int64_t>()));
    out.table_csv.assign(data + out.trace_json.size(), static_cast<size_t>(sizes[1].item<int64_t>()));
    out.kineto = sizes[2].item<int64_t>() != 0;
    out.cuda = sizes[3].item<int64_t>() != 0;
    out.events = sizes[4].item<int64_t>();
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
  record.trace_path = logger_.run_dir() + "/" + stem + ".trace.json";
  record.table_path = logger_.run_dir() + "/" + stem + "-ops.csv";
  write_file_atomically(record.trace_path, out.trace_json);
  write_file_atomically(record.table_path, out.table_csv);
  logger_.profile_written(record);
}

}  // namespace dtrain
