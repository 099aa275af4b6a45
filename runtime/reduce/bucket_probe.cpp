#include "runtime/reduce/bucket_probe.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

// The small size is mostly latency (16 KiB take 0.16 ms at 100 MB/s), the large one mostly bandwidth.
// With 256 KiB as the small size the fitted latency of one 1 Gbit/s link ranged 0-3.4 ms over three runs:
// the latency was lost in the transfer's own noise.
constexpr int64_t kSmallBytes = 16 << 10;
constexpr int64_t kLargeBytes = 2 << 20;
constexpr int kSmallRepetitions = 5;
constexpr int kLargeRepetitions = 3;
constexpr size_t kMinBucketBytes = 256u << 10;

struct Timed {
  double wall_s = 0.0;  // the median
  double cpu_s = 0.0;   // the process's CPU per allreduce, on average
};

// This rank's times for one allreduce of `bytes`, after a warm-up (connections, buffers).
Timed time_allreduce(Communicator& comm, int64_t bytes, int repetitions, c10::Device device) {
  at::Tensor data = at::ones({bytes / 4}, at::TensorOptions().dtype(at::kFloat).device(device));
  std::vector<double> times;
  double cpu_before = 0.0;
  for (int i = 0; i <= repetitions; ++i) {
    if (i == 1) cpu_before = process_cpu_s();
    Stopwatch watch;
    comm.allreduce_async(data, ReduceOp::kSum)->wait();
    (void)data[0].item<float>();  // on a device, the result is there only once the host can read it
    if (i > 0) times.push_back(watch.elapsed_s());
  }
  Timed timed;
  timed.cpu_s = (process_cpu_s() - cpu_before) / repetitions;
  std::nth_element(times.begin(), times.begin() + repetitions / 2, times.end());
  timed.wall_s = times[repetitions / 2];
  return timed;
}

}  // namespace

AllreduceFit probe_allreduce(Communicator& comm, c10::Device device) {
  Stopwatch total;
  AllreduceFit fit;
  fit.small_bytes = kSmallBytes;
  fit.large_bytes = kLargeBytes;
  const Timed small = time_allreduce(comm, kSmallBytes, kSmallRepetitions, device);
  const Timed large = time_allreduce(comm, kLargeBytes, kLargeRepetitions, device);
  // The slowest rank's figures, so that every rank derives the same buckets.
  const at::Tensor all = comm.allgather(at::tensor({small.wall_s, small.cpu_s, large.wall_s}, at::kDouble));
  const at::Tensor slowest = std::get<0>(all.max(0));
  fit.small_s = slowest[0].item<double>();
  fit.small_cpu_s = slowest[1].item<double>();
  fit.large_s = slowest[2].item<double>();
  if (fit.large_s > fit.small_s) {
    fit.bytes_per_s = static_cast<double>(kLargeBytes - kSmallBytes) / (fit.large_s - fit.small_s);
    fit.latency_s = std::max(0.0, fit.small_s - static_cast<double>(kSmallBytes) / fit.bytes_per_s);
  } else {
    // No measurable growth with size (a noisy or latency-bound network): all of it is latency.
    fit.bytes_per_s = static_cast<double>(kLargeBytes) / fit.large_s;
    fit.latency_s = fit.small_s;
  }
  fit.probe_s = total.elapsed_s();
  return fit;
}

double per_bucket_s(const AllreduceFit& fit, double compute_cores) {
  return fit.latency_s + (compute_cores > 0 ? fit.small_cpu_s / compute_cores : 0.0);
}

BucketOptions buckets_for_network(const AllreduceFit& fit, double compute_cores, int64_t gradient_bytes,
                                  const BucketOptions& fixed) {
  const double wanted =
      std::sqrt(std::max(0.0, static_cast<double>(gradient_bytes) * fit.bytes_per_s * per_bucket_s(fit, compute_cores)));
  BucketOptions options;
  const size_t floor = std::min(kMinBucketBytes, fixed.bucket_bytes);
  options.bucket_bytes =
      std::clamp(static_cast<size_t>(std::min(wanted, static_cast<double>(fixed.bucket_bytes))), floor, fixed.bucket_bytes);
  options.first_bucket_bytes = std::min(fixed.first_bucket_bytes, options.bucket_bytes);
  return options;
}

}  // namespace dtrain
