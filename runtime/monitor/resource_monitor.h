// log.sample_interval_s as a run observer: a ResourcePoller on every rank from the run's start, and every
// rank's samples gathered into rank 0's run log after each epoch and at the end (collective).
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_logger.h"
#include "runtime/log/run_observer.h"
#include "runtime/monitor/resource_poller.h"

namespace dtrain {

class ResourceMonitor final : public RunObserver {
 public:
  ResourceMonitor(const LogOptions& log, Communicator& comm, RunLogger& logger, c10::Device device);

  void run_started() override;
  void epoch_ended(const EpochStats& stats) override;
  void run_ending(RunSummary& summary) override;

 private:
  void log_samples();

  const LogOptions& log_;
  Communicator& comm_;
  RunLogger& logger_;
  c10::Device device_;
  std::unique_ptr<ResourcePoller> poller_;  // nullptr when log.sample_interval_s is 0
};

}  // namespace dtrain
