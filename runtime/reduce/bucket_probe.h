// Bucket sizes chosen from the network a run has (comm.bucket_sizing: network). A short allreduce probe at
// start-up measures the collective's latency, bandwidth and CPU cost; each reducer then cuts its gradients
// into the buckets that minimise what bucketing costs a step:
//
//   cost(k buckets) = G / (k x bandwidth)    the last bucket, sent after backward: exposed
//                   + k x per_bucket         each bucket's latency, and the CPU it takes from compute
//
// which is smallest at k = sqrt(G / (bandwidth x per_bucket)), buckets of sqrt(G x bandwidth x per_bucket)
// bytes. per_bucket = latency + the CPU of a small allreduce / the cores a rank computes on (on a CPU
// that computation fills, the communication's CPU is taken from it; under a quarter-core quota a
// millisecond of CPU is four of the step's). Measured on the emulated cluster: a latency-only rule that
// cut ResNet-18's 47 MB into 256 KiB buckets hid all but 0.04-0.09 s of communication and still made
// quarter-core nodes 11% slower (docs/benchmarks.md).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

#include "runtime/reduce/bucket_assignment.h"

namespace dtrain {

class Communicator;

// An allreduce of `bytes` takes latency_s + bytes / bytes_per_s (the line through two probed sizes), and
// one of small_bytes costs small_cpu_s of the process's CPU (all threads: the waiting one and MPI's
// progress thread). Every figure is the slowest rank's, so every rank holds the same.
struct AllreduceFit {
  double latency_s = 0.0;
  double bytes_per_s = 0.0;
  int64_t small_bytes = 0;  // the sizes probed and their median times
  double small_s = 0.0;
  double small_cpu_s = 0.0;
  int64_t large_bytes = 0;
  double large_s = 0.0;
  double probe_s = 0.0;  // the probe's own wall time
};

// Collective (every rank, same moment): times allreduces of 16 KiB (a warm-up, then 5) and of 2 MiB (a
// warm-up, then 3) of float32 on `device` through `comm`, on the same asynchronous path the gradients
// take, and fits the line through the medians. Costs 10 allreduces: 0.2 s for 2 nodes on 1 Gbit/s,
// 0.8 s on 200 Mbit/s.
AllreduceFit probe_allreduce(Communicator& comm, c10::Device device);

// The cost of one more bucket in a step: the fit's latency, plus the small allreduce's CPU divided by
// `compute_cores` (the cores each rank computes on; 0 where the computation is not on the CPU).
double per_bucket_s(const AllreduceFit& fit, double compute_cores);

// The bucket caps for `gradient_bytes` of gradients on that network (the square root above), at least
// 256 KiB (a guard for a probe that saw no cost at all) and at most `fixed`'s caps (what comm.bucket_mb
// and comm.first_bucket_mb allow); the first bucket no larger than the others.
BucketOptions buckets_for_network(const AllreduceFit& fit, double compute_cores, int64_t gradient_bytes,
                                  const BucketOptions& fixed);

}  // namespace dtrain
