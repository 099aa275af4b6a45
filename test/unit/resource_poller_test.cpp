// The resource sampler: its /proc readers on fixed texts, the live thread on this process, and the
// gathering of samples into rank 0's list.
#include "test/support/catch.h"

#include <chrono>
#include <cstdlib>

#include "runtime/comm/local_communicator.h"
#include "runtime/monitor/resource_poller.h"

using namespace dtrain;

TEST_CASE("the /proc readers parse what Linux writes", "[monitor]") {
  // A command name with spaces and a parenthesis; utime 250 and stime 50 ticks (fields 14 and 15).
  const std::string stat = "4242 (my (odd) prog) R 1 4242 4242 0 -1 4194304 1000 0 0 0 250 50 0 0 20 0 9 0 100 0";
  CHECK(process_cpu_seconds(stat, 100) == Approx(3.0));
  CHECK(process_cpu_seconds("garbage", 100) == -1.0);

  const std::string meminfo =
      "MemTotal:       24683820 kB\nMemFree:        20000000 kB\nMemAvailable:   21683820 kB\nBuffers: 1 kB\n";
  CHECK(host_memory_used_bytes(meminfo) == int64_t{3000000} * 1024);
  CHECK(host_memory_used_bytes("MemTotal: 5 kB\n") == -1);

  const std::string net =
      "Inter-|   Receive                                                |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
      "    lo: 1000       10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n"
      "  eth0: 2000       20    0    0    0     0          0         0     3000      30    0    0    0     0       0          0\n"
      "  ib0: 40000      400    0    0    0     0          0         0    50000     500    0    0    0     0       0          0\n";
  const NetBytes all = network_bytes(net, {});
  CHECK(all.rx == 42000);  // every interface but the loopback
  CHECK(all.tx == 53000);
  const NetBytes eth = network_bytes(net, {"eth"});
  CHECK(eth.rx == 2000);
  CHECK(eth.tx == 3000);
}

TEST_CASE("interfaces and the GPU come from the launcher's environment", "[monitor]") {
  setenv("NCCL_SOCKET_IFNAME", "=eth0,ib", 1);
  CHECK(network_interfaces_from_environment() == std::vector<std::string>{"eth0", "ib"});
  setenv("NCCL_SOCKET_IFNAME", "^docker,lo", 1);  // an exclusion list: every interface counts
  setenv("OMPI_MCA_btl_tcp_if_include", "eth1", 1);
  CHECK(network_interfaces_from_environment() == std::vector<std::string>{"eth1"});
  unsetenv("NCCL_SOCKET_IFNAME");
  unsetenv("OMPI_MCA_btl_tcp_if_include");
  CHECK(network_interfaces_from_environment().empty());

  unsetenv("CUDA_VISIBLE_DEVICES");
  CHECK(nvml_index_of_cuda_device(3) == 3);
  setenv("CUDA_VISIBLE_DEVICES", "5,2", 1);
  CHECK(nvml_index_of_cuda_device(1) == 2);
  CHECK_FALSE(nvml_index_of_cuda_device(2).has_value());
  setenv("CUDA_VISIBLE_DEVICES", "GPU-8f6b2c1e-0000-0000-0000-000000000000", 1);
  CHECK_FALSE(nvml_index_of_cuda_device(0).has_value());
  unsetenv("CUDA_VISIBLE_DEVICES");
}

TEST_CASE("the resource poller records this process's CPU and memory use every interval", "[monitor]") {
  ResourcePollerOptions options;
  options.interval_s = 0.02;
  options.nvml_index = 0;  // no NVML on a machine without a driver: noted, no GPU keys
  ResourcePoller sampler(options);
  // Keep one core busy for 0.3 s.
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile double sink = 0;
  while (std::chrono::steady_clock::now() < end) sink = sink + 1.0;
  const std::vector<ResourceSample> samples = sampler.take();
  REQUIRE(samples.size() >= 5);
  CHECK(samples.size() <= 16);
  double busiest = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const ResourceSample& s = samples[i];
    busiest = std::max(busiest, s.cpu_percent);
    CHECK(s.rss_bytes > (1 << 20));
    CHECK(s.host_mem_used_bytes >= s.rss_bytes);
    CHECK(s.net_rx_bytes >= 0);
    if (i > 0) CHECK(s.unix_time_s > samples[i - 1].unix_time_s);
    if (sampler.nvml_note().empty()) continue;  // a machine with a GPU driver
    CHECK_FALSE(s.gpu_util_percent.has_value());
  }
  CHECK(busiest > 50.0);
  CHECK(sampler.take().size() <= 1);  // taken: only what came since
}

TEST_CASE("gathered samples keep every field, GPU fields only where present", "[monitor]") {
  LocalCommunicator comm;
  ResourceSample plain;
  plain.unix_time_s = 1795496014.646;
  plain.cpu_percent = 187.5;
  plain.rss_bytes = (int64_t{5} << 40) + 3;  // large byte counts survive the trip through doubles
  plain.host_mem_used_bytes = 123456789;
  plain.net_rx_bytes = 7;
  plain.net_tx_bytes = 9;
  ResourceSample gpu = plain;
  gpu.gpu_util_percent = 97;
  gpu.gpu_mem_used_bytes = int64_t{70} << 30;
  gpu.gpu_mem_bw_util_percent = 41;
  gpu.gpu_power_w = 612.25;
  gpu.gpu_sm_clock_mhz = 1980;
  const auto by_rank = gather_samples(comm, {plain, gpu});
  REQUIRE(by_rank.size() == 1);
  REQUIRE(by_rank[0].size() == 2);
  const ResourceSample& a = by_rank[0][0];
  CHECK(a.unix_time_s == plain.unix_time_s);
  CHECK(a.cpu_percent == 187.5);
  CHECK(a.rss_bytes == plain.rss_bytes);
  CHECK(a.net_tx_bytes == 9);
  CHECK_FALSE(a.gpu_util_percent.has_value());
  CHECK_FALSE(a.gpu_mem_used_bytes.has_value());
  const ResourceSample& b = by_rank[0][1];
  CHECK(*b.gpu_util_percent == 97);
  CHECK(*b.gpu_mem_used_bytes == int64_t{70} << 30);
  CHECK(*b.gpu_power_w == 612.25);
  CHECK(*b.gpu_sm_clock_mhz == 1980);
  CHECK(gather_samples(comm, {}).at(0).empty());
}
