// What a rank uses while it trains, sampled by a thread of its own every interval: process CPU time (all
// threads), resident memory, the host's used memory, NIC bytes, and with a GPU its utilisation, memory,
// memory-bandwidth utilisation, power and SM clock (NVML, opened at run time: see nvml.h). The trainer
// takes each rank's samples at the end of every epoch and rank 0 writes them to the run log as `sample`
// events (docs/studies.md), so that studies get CPU, memory, GPU and network use over time from every
// node without per-node files.
//
// Cost: four small /proc reads (and with a GPU five NVML queries) per interval on a thread that sleeps in
// between; bench/sampler_overhead_bench.py measures its effect on epoch time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/log/run_events.h"

namespace dtrain {

class NvmlDevice;

struct ResourcePollerOptions {
  double interval_s = 1.0;
  // The network interfaces whose bytes count: names or name prefixes. Empty: every interface but the
  // loopback. See network_interfaces_from_environment().
  std::vector<std::string> interfaces;
  // NVML's device index of this rank's GPU; nullopt: no GPU keys.
  std::optional<int> nvml_index;
};

// The interfaces MPI and NCCL are told to use, from NCCL_SOCKET_IFNAME and OMPI_MCA_btl_tcp_if_include
// (comma-separated names or prefixes; an exclusion list, starting with '^', counts as "all"); empty when
// neither names any.
std::vector<std::string> network_interfaces_from_environment();

// NVML's index of CUDA device `cuda_device` of this process, through CUDA_VISIBLE_DEVICES when it lists
// indices (GPU UUIDs and MIG names are left to NVML: nullopt), else the CUDA index itself.
std::optional<int> nvml_index_of_cuda_device(int cuda_device);

class ResourcePoller final {
 public:
  // Starts the sampling thread, which takes a sample every interval from now on. An NVML that cannot be
  // opened or has no such device leaves the GPU keys out (nvml_note() says why).
  explicit ResourcePoller(ResourcePollerOptions options);
  ~ResourcePoller();
  ResourcePoller(const ResourcePoller&) = delete;
  ResourcePoller& operator=(const ResourcePoller&) = delete;

  // The samples taken since the last call, oldest first. Thread-safe.
  std::vector<ResourceSample> take();

  // Why there are no GPU keys although a GPU was asked for (NVML missing, device not found); "" otherwise.
  const std::string& nvml_note() const { return nvml_note_; }

 private:
  void run();
  ResourceSample sample();

  ResourcePollerOptions options_;
  std::unique_ptr<NvmlDevice> gpu_;
  std::string nvml_note_;
  int64_t rx_start_ = 0;
  int64_t tx_start_ = 0;
  double last_cpu_s_ = 0.0;
  std::chrono::steady_clock::time_point last_time_;

  std::mutex mutex_;
  std::condition_variable stop_signal_;
  bool stopping_ = false;
  std::vector<ResourceSample> taken_;
  std::thread thread_;
};

// Collective: every rank's `samples` on rank 0, indexed by rank (other ranks get an empty list). Two
// allgathers: the counts, then the samples as rows of doubles padded to the largest count.
std::vector<std::vector<ResourceSample>> gather_samples(Communicator& comm, const std::vector<ResourceSample>& samples);

// --- readers of /proc, public for tests --------------------------------------------------------------

// User + system CPU seconds of the process, from the text of /proc/self/stat (fields 14 and 15, after
// the parenthesised command name, which may hold spaces). -1 when the text does not parse.
double process_cpu_seconds(const std::string& stat_text, long ticks_per_second);

// MemTotal - MemAvailable in bytes from the text of /proc/meminfo; -1 when either is missing.
int64_t host_memory_used_bytes(const std::string& meminfo_text);

// Received and sent bytes summed over the interfaces of /proc/net/dev's text that `interfaces` selects
// (empty: all but "lo"; otherwise names equal to or starting with an entry).
struct NetBytes {
  int64_t rx = 0;
  int64_t tx = 0;
};
NetBytes network_bytes(const std::string& net_dev_text, const std::vector<std::string>& interfaces);

// network_bytes of this host's /proc/net/dev now (zeros where there is none).
NetBytes read_network_bytes(const std::vector<std::string>& interfaces);

}  // namespace dtrain
