// The figures an epoch record carries beyond the loop's own: training FLOPs per sample (counted over the
// run's first steps), achieved TFLOP/s and MFU against one device's peak (--peak-tflops, else the GPU's
// data-sheet figure, peak_flops.h), rank 0's NIC bytes per step while training, and the allreduce's
// algorithm and bus bandwidth, and where the waiting went per rank (rank_waits.h). Also names the accelerator in the run_start record.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/config/config.h"
#include "runtime/log/run_logger.h"
#include "runtime/log/run_observer.h"
#include "runtime/monitor/flop_counter.h"
#include "runtime/monitor/resource_poller.h"

namespace dtrain {

class RunTelemetry final : public RunObserver {
 public:
  RunTelemetry(const TrainOptions& train, Communicator& comm, RunLogger& logger, c10::Device device);

  void run_starting(RunInfo& info) override;
  void run_started() override;
  void training_begins(int64_t epoch) override;
  void training_ended(int64_t epoch) override;
  void before_step(const StepRecord& step) override;
  void after_step(const StepRecord& step) override;
  void epoch_ending(EpochStats& stats) override;

 private:
  // The peak TFLOP/s of one device: train.peak_tflops, else the table's figure for this GPU and
  // precision, else 0 (with a note saying how to give it). Sets accelerator_ and peak_note_.
  double resolve_peak_tflops();

  const TrainOptions& train_;
  Communicator& comm_;  // epoch_ending() gathers the ranks' waits
  RunLogger& logger_;
  c10::Device device_;
  std::vector<std::string> interfaces_;  // whose bytes count (network_interfaces_from_environment)
  NetBytes net_before_;
  NetBytes net_after_;
  std::vector<std::string> rank_hosts_;
  std::string accelerator_;  // the GPU's product name, when NVML tells
  double peak_tflops_ = 0.0;
  std::string peak_note_;
  // FLOPs of this rank's first training steps and their samples (counting costs host time per op).
  std::optional<FlopCounter> counter_;
  int64_t counted_steps_ = 0;
  double counted_flops_ = 0.0;
  int64_t counted_samples_ = 0;
};

}  // namespace dtrain
