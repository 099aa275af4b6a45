#include "runtime/monitor/run_telemetry.h"

#include "runtime/monitor/nvml.h"
#include "runtime/monitor/peak_flops.h"
#include "runtime/monitor/rank_waits.h"
#include "runtime/util/strings.h"

namespace dtrain {
namespace {

// Training FLOPs are counted over this many steps at the start of a run (enough for a GAN's generator
// step to come round), then per sample for the rest.
constexpr int64_t kFlopCountSteps = 8;

// A rank that costs the others this share of the training time is named on the console.
constexpr double kStragglerNote = 0.10;

}  // namespace

RunTelemetry::RunTelemetry(const TrainOptions& train, Communicator& comm, RunLogger& logger, c10::Device device)
    : train_(train), comm_(comm), logger_(logger), device_(device), interfaces_(network_interfaces_from_environment()) {}

void RunTelemetry::run_starting(RunInfo& info) {
  peak_tflops_ = resolve_peak_tflops();
  info.accelerator = accelerator_;
  info.peak_tflops = peak_tflops_;
  rank_hosts_ = info.rank_hosts;
}

void RunTelemetry::run_started() {
  if (!peak_note_.empty()) logger_.info(peak_note_);
}

double RunTelemetry::resolve_peak_tflops() {
  if (device_.is_cuda()) {
    if (std::optional<int> index = nvml_index_of_cuda_device(device_.index())) {
      std::string why;
      if (std::unique_ptr<NvmlDevice> gpu = NvmlDevice::open(*index, why)) accelerator_ = gpu->name();
    }
  }
  if (train_.peak_tflops > 0) return train_.peak_tflops;
  if (!device_.is_cuda()) return 0.0;
  const std::optional<GpuPeak> peak = gpu_peak_tflops(accelerator_, train_.precision);
  if (!peak) {
    peak_note_ = "mfu: no peak TFLOP/s known for " + (accelerator_.empty() ? std::string("this GPU") : "'" + accelerator_ + "'") +
                 " at " + to_string(train_.precision) + "; give it with --peak-tflops";
    return 0.0;
  }
  peak_note_ = "mfu against the " + peak->model + "'s data-sheet peak of " + format_number(peak->tflops) + " TFLOP/s (" +
               to_string(train_.precision) + ", dense)";
  return peak->tflops;
}

void RunTelemetry::training_begins(int64_t) { net_before_ = read_network_bytes(interfaces_); }

void RunTelemetry::training_ended(int64_t) { net_after_ = read_network_bytes(interfaces_); }

void RunTelemetry::before_step(const StepRecord&) {
  if (counted_steps_ < kFlopCountSteps) counter_.emplace();
}

void RunTelemetry::after_step(const StepRecord& step) {
  if (!counter_) return;
  counted_flops_ += counter_->flops();
  counter_.reset();
  counted_samples_ += step.samples;
  ++counted_steps_;
}

void RunTelemetry::epoch_ending(EpochStats& stats) {
  if (stats.steps > 0) {
    stats.bytes_allreduced_per_step = stats.bytes_allreduced / stats.steps;
    stats.net_tx_bytes_per_step = (net_after_.tx - net_before_.tx) / stats.steps;
    stats.net_rx_bytes_per_step = (net_after_.rx - net_before_.rx) / stats.steps;
  }
  if (stats.comm_s > 0) {
    const double n = comm_.world_size();
    stats.algbw_gbps = static_cast<double>(stats.bytes_allreduced) / stats.comm_s / 1e9;
    stats.busbw_gbps = stats.algbw_gbps * 2.0 * (n - 1.0) / n;
  }
  if (comm_.world_size() > 1) {
    RankWaits waits = gather_rank_waits(comm_, stats.exposed_comm_s, stats.comm_wait_cpu_s, stats.train_s);
    const std::string note = straggler_note(waits.straggler, rank_hosts_, kStragglerNote);
    if (!note.empty()) logger_.info("epoch " + std::to_string(stats.epoch) + ": " + note);
    stats.exposed_comm_s_by_rank = std::move(waits.exposed_comm_s);
    stats.comm_wait_cpu_s_by_rank = std::move(waits.wait_cpu_s);
    stats.straggler_by_rank = std::move(waits.straggler);
  }
  stats.flops_per_sample = counted_samples_ > 0 ? counted_flops_ / static_cast<double>(counted_samples_) : 0.0;
  stats.tflops_achieved = stats.flops_per_sample * stats.samples_per_s / 1e12;
  if (peak_tflops_ > 0) stats.mfu = stats.tflops_achieved / (peak_tflops_ * comm_.world_size());
}

}  // namespace dtrain
