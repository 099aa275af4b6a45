// log.profile_steps as a run observer: LibTorch's profiler (OpProfiler) on log.profile_rank from the
// window's first training step to its last (or to the end of a run that ends inside it); then the trace
// and the operations table go to rank 0's run directory (collective: the profiling rank may be on
// another node) with a `profile` record.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_logger.h"
#include "runtime/log/run_observer.h"
#include "runtime/monitor/op_profiler.h"

namespace dtrain {

class ProfileWindow final : public RunObserver {
 public:
  // Throws ConfigError when log.profile_rank is not a rank of this world.
  ProfileWindow(const LogOptions& log, Communicator& comm, RunLogger& logger, c10::Device device);
  ~ProfileWindow() override;

  void before_step(const StepRecord& step) override;
  void after_step(const StepRecord& step) override;
  void run_ending(RunSummary& summary) override;

 private:
  void finish();

  const LogOptions& log_;
  Communicator& comm_;
  RunLogger& logger_;
  c10::Device device_;
  enum class State { kBefore, kInside, kDone } state_ = State::kBefore;
  int64_t last_step_ = 0;                  // the run step the window reached
  std::unique_ptr<OpProfiler> profiler_;  // on log.profile_rank, inside the window
};

}  // namespace dtrain
