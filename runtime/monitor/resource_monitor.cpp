#include "runtime/monitor/resource_monitor.h"

#include <string>
#include <utility>
#include <vector>

namespace dtrain {

ResourceMonitor::ResourceMonitor(const LogOptions& log, Communicator& comm, RunLogger& logger, c10::Device device)
    : log_(log), comm_(comm), logger_(logger), device_(device) {}

void ResourceMonitor::run_started() {
  if (log_.sample_interval_s <= 0) return;
  ResourcePollerOptions options;
  options.interval_s = log_.sample_interval_s;
  options.interfaces = network_interfaces_from_environment();
  if (device_.is_cuda()) options.nvml_index = nvml_index_of_cuda_device(device_.index());
  poller_ = std::make_unique<ResourcePoller>(std::move(options));
  if (!poller_->nvml_note().empty()) logger_.info(poller_->nvml_note());
}

void ResourceMonitor::epoch_ended(const EpochStats&) { log_samples(); }

void ResourceMonitor::run_ending(RunSummary&) { log_samples(); }

void ResourceMonitor::log_samples() {
  if (!poller_) return;
  const std::vector<std::vector<ResourceSample>> by_rank = gather_samples(comm_, poller_->take());
  for (size_t rank = 0; rank < by_rank.size(); ++rank) logger_.resource_samples(static_cast<int>(rank), by_rank[rank]);
}

}  // namespace dtrain
