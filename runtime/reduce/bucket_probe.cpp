#include "runtime/reduce/bucket_probe.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

constexpr int64_t kSmallBytes = 256 << 10;
constexpr int64_t kLargeBytes = 4 << 20;
constexpr int kRepetitions = 3;
constexpr size_t kMinBucketBytes = 256u << 10;

// This rank's median time for one allreduce of `bytes`, after a warm-up (connections, buffers).
double time_allreduce(Communicator& comm, int64_t bytes, c10::Device device) {
  at::Tensor data = at::ones({bytes / 4}, at::TensorOptions().dtype(at::kFloat).device(device));
  std::vector<double> times;
  for (int i = 0; i <= kRepetitions; ++i) {
    Stopwatch watch;
    comm.allreduce_async(data, ReduceOp::kSum)->wait();
    (void)data[0].item<float>();  // on a device, the result is there only once the host can read it
    if (i > 0) times.push_back(watch.elapsed_s());
  }
  std::nth_element(times.begin(), times.begin() + kRepetitions / 2, times.end());
  return times[kRepetitions / 2];
}

}  // namespace

AllreduceFit probe_allreduce(Communicator& comm, c10::Device device) {
  Stopwatch total;
  AllreduceFit fit;
  fit.small_bytes = kSmallBytes;
  fit.large_bytes = kLargeBytes;
  const double own[2] = {time_allreduce(comm, kSmallBytes, device), time_allreduce(comm, kLargeBytes, device)};
  // The slowest rank's figures, so that every rank derives the same buckets.
  const at::Tensor all = comm.allgather(at::tensor({own[0], own[1]}, at::kDouble));
  const at::Tensor slowest = std::get<0>(all.max(0));
  fit.small_s = slowest[0].item<double>();
  fit.large_s = slowest[1].item<double>();
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

BucketOptions buckets_for_network(const AllreduceFit& fit, const BucketOptions& fixed) {
  const double wanted = fit.latency_s * fit.bytes_per_s * (1.0 - kBucketLatencyShare) / kBucketLatencyShare;
  BucketOptions options;
  options.bucket_bytes = std::max(std::min(kMinBucketBytes, fixed.bucket_bytes),
                                  std::min(fixed.bucket_bytes, static_cast<size_t>(std::max(0.0, wanted))));
  options.first_bucket_bytes = std::min(fixed.first_bucket_bytes, options.bucket_bytes);
  return options;
}

}  // namespace dtrain
