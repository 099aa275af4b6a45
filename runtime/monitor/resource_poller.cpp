#include "runtime/monitor/resource_poller.h"

#include <unistd.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <fstream>
#include <sstream>

#include "runtime/monitor/nvml.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace

double process_cpu_seconds(const std::string& stat_text, long ticks_per_second) {
  // "pid (comm) state ppid ...": fields after the last ')' start with the state (field 3).
  const size_t close = stat_text.rfind(')');
  if (close == std::string::npos || ticks_per_second <= 0) return -1.0;
  std::istringstream fields(stat_text.substr(close + 1));
  std::string field;
  double utime = -1;
  double stime = -1;
  for (int number = 3; fields >> field; ++number) {
    if (number == 14) utime = std::strtod(field.c_str(), nullptr);
    if (number == 15) {
      stime = std::strtod(field.c_str(), nullptr);
      break;
    }
  }
  if (utime < 0 || stime < 0) return -1.0;
  return (utime + stime) / static_cast<double>(ticks_per_second);
}

int64_t host_memory_used_bytes(const std::string& meminfo_text) {
  std::istringstream lines(meminfo_text);
  std::string key;
  int64_t total = -1;
  int64_t available = -1;
  int64_t kib = 0;
  while (lines >> key >> kib) {
    if (key == "MemTotal:") total = kib;
    if (key == "MemAvailable:") available = kib;
    lines.ignore(1 << 10, '\n');
  }
  if (total < 0 || available < 0) return -1;
  return (total - available) * 1024;
}

NetBytes network_bytes(const std::string& net_dev_text, const std::vector<std::string>& interfaces) {
  // Two header lines, then "  name: rx_bytes rx_packets ... (8 receive fields) tx_bytes ...".
  NetBytes sum;
  std::istringstream lines(net_dev_text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(' ');
    const std::string name = line.substr(start, colon - start);
    bool counted = interfaces.empty() ? name != "lo" : false;
    for (const std::string& wanted : interfaces) counted = counted || name.compare(0, wanted.size(), wanted) == 0;
    if (!counted) continue;
    std::istringstream fields(line.substr(colon + 1));
    int64_t values[9] = {0};
    for (int64_t& v : values) fields >> v;
    if (!fields) continue;
    sum.rx += values[0];
    sum.tx += values[8];
  }
  return sum;
}

namespace {

constexpr int64_t kFields = 11;

void pack(const ResourceSample& s, double* row) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  row[0] = s.unix_time_s;
  row[1] = s.cpu_percent;
  row[2] = static_cast<double>(s.rss_bytes);  // byte counts below 2^53 are exact in a double
  row[3] = static_cast<double>(s.host_mem_used_bytes);
  row[4] = static_cast<double>(s.net_rx_bytes);
  row[5] = static_cast<double>(s.net_tx_bytes);
  row[6] = s.gpu_util_percent.value_or(nan);
  row[7] = s.gpu_mem_used_bytes ? static_cast<double>(*s.gpu_mem_used_bytes) : nan;
  row[8] = s.gpu_mem_bw_util_percent.value_or(nan);
  row[9] = s.gpu_power_w.value_or(nan);
  row[10] = s.gpu_sm_clock_mhz.value_or(nan);
}

ResourceSample unpack(const double* row) {
  auto present = [](double v) { return !std::isnan(v) ? std::optional<double>(v) : std::nullopt; };
  ResourceSample s;
  s.unix_time_s = row[0];
  s.cpu_percent = row[1];
  s.rss_bytes = static_cast<int64_t>(row[2]);
  s.host_mem_used_bytes = static_cast<int64_t>(row[3]);
  s.net_rx_bytes = static_cast<int64_t>(row[4]);
  s.net_tx_bytes = static_cast<int64_t>(row[5]);
  s.gpu_util_percent = present(row[6]);
  if (auto used = present(row[7])) s.gpu_mem_used_bytes = static_cast<int64_t>(*used);
  s.gpu_mem_bw_util_percent = present(row[8]);
  s.gpu_power_w = present(row[9]);
  s.gpu_sm_clock_mhz = present(row[10]);
  return s;
}

}  // namespace

std::vector<std::vector<ResourceSample>> gather_samples(Communicator& comm, const std::vector<ResourceSample>& samples) {
  const auto mine = static_cast<int64_t>(samples.size());
  const at::Tensor counts = comm.allgather(at::tensor(mine, at::kLong));
  const int64_t most = counts.max().item<int64_t>();
  std::vector<std::vector<ResourceSample>> by_rank(comm.is_root() ? static_cast<size_t>(comm.world_size()) : 0);
  if (most == 0) return by_rank;
  at::Tensor rows = at::full({most, kFields}, std::numeric_limits<double>::quiet_NaN(), at::kDouble);
  for (int64_t i = 0; i < mine; ++i) pack(samples[static_cast<size_t>(i)], rows.data_ptr<double>() + i * kFields);
  const at::Tensor all = comm.allgather(rows).contiguous();  // [world, most, fields]
  if (!comm.is_root()) return by_rank;
  for (int r = 0; r < comm.world_size(); ++r) {
    const double* base = all.data_ptr<double>() + static_cast<int64_t>(r) * most * kFields;
    for (int64_t i = 0; i < counts[r].item<int64_t>(); ++i) by_rank[static_cast<size_t>(r)].push_back(unpack(base + i * kFields));
  }
  return by_rank;
}

NetBytes read_network_bytes(const std::vector<std::string>& interfaces) {
  return network_bytes(read_text("/proc/net/dev"), interfaces);
}

std::vector<std::string> network_interfaces_from_environment() {
  for (const char* variable : {"NCCL_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include"}) {
    const char* value = std::getenv(variable);
    if (value == nullptr || *value == '\0' || *value == '^') continue;
    std::string names = value;
    if (names.front() == '=') names.erase(0, 1);  // NCCL's "exact match" marker; prefixes are wider anyway
    return split_list(names);
  }
  return {};
}

std::optional<int> nvml_index_of_cuda_device(int cuda_device) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return cuda_device;
  const std::vector<std::string> listed = split_list(visible);
  if (cuda_device < 0 || cuda_device >= static_cast<int>(listed.size())) return std::nullopt;
  const std::string& entry = listed[static_cast<size_t>(cuda_device)];
  if (entry.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;  // a UUID or MIG name
  return std::stoi(entry);
}

ResourcePoller::ResourcePoller(ResourcePollerOptions options) : options_(std::move(options)) {
  if (options_.nvml_index) gpu_ = NvmlDevice::open(*options_.nvml_index, nvml_note_);
  const NetBytes net = read_network_bytes(options_.interfaces);
  rx_start_ = net.rx;
  tx_start_ = net.tx;
  last_cpu_s_ = process_cpu_seconds(read_text("/proc/self/stat"), sysconf(_SC_CLK_TCK));
  last_time_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { run(); });
}

ResourcePoller::~ResourcePoller() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_signal_.notify_all();
  thread_.join();
}

std::vector<ResourceSample> ResourcePoller::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ResourceSample> taken;
  taken.swap(taken_);
  return taken;
}

void ResourcePoller::run() {
  const auto interval = std::chrono::duration<double>(options_.interval_s);
  auto next = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval);
    if (stop_signal_.wait_until(lock, next, [this] { return stopping_; })) break;
    lock.unlock();
    ResourceSample s = sample();  // outside the lock: take() never waits for the /proc reads
    lock.lock();
    taken_.push_back(s);
  }
}

ResourceSample ResourcePoller::sample() {
  ResourceSample s;
  s.unix_time_s = unix_now_s();
  const auto now = std::chrono::steady_clock::now();
  const double cpu_s = process_cpu_seconds(read_text("/proc/self/stat"), sysconf(_SC_CLK_TCK));
  const double wall_s = std::chrono::duration<double>(now - last_time_).count();
  s.cpu_percent = wall_s > 0 && cpu_s >= 0 && last_cpu_s_ >= 0 ? 100.0 * (cpu_s - last_cpu_s_) / wall_s : 0.0;
  last_cpu_s_ = cpu_s;
  last_time_ = now;
  std::istringstream statm(read_text("/proc/self/statm"));
  int64_t pages = 0;
  int64_t resident = 0;
  statm >> pages >> resident;
  s.rss_bytes = resident * sysconf(_SC_PAGESIZE);
  s.host_mem_used_bytes = host_memory_used_bytes(read_text("/proc/meminfo"));
  const NetBytes net = read_network_bytes(options_.interfaces);
  s.net_rx_bytes = net.rx - rx_start_;
  s.net_tx_bytes = net.tx - tx_start_;
  if (gpu_) {
    const NvmlReading r = gpu_->read();
    s.gpu_util_percent = r.util_percent;
    if (r.mem_used_bytes) s.gpu_mem_used_bytes = static_cast<int64_t>(*r.mem_used_bytes);
    s.gpu_mem_bw_util_percent = r.mem_bw_util_percent;
    s.gpu_power_w = r.power_w;
    s.gpu_sm_clock_mhz = r.sm_clock_mhz;
  }
  return s;
}

}  // namespace dtrain
