// Bucket sizes chosen from the network a run has (comm.bucket_sizing: network): a short allreduce probe at
// start-up fits the collective's latency and bandwidth, and the buckets are made as small as that latency
// allows. Small buckets start communicating sooner and leave less for after backward (the last bucket is
// always exposed); each one pays the latency once.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

#include "runtime/reduce/bucket_assignment.h"

namespace dtrain {

class Communicator;

// An allreduce of `bytes` takes latency_s + bytes / bytes_per_s (the fit through two probed sizes).
struct AllreduceFit {
  double latency_s = 0.0;
  double bytes_per_s = 0.0;
  int64_t small_bytes = 0;  // the sizes probed and their times: the median of the repetitions, the slowest
  double small_s = 0.0;     // rank's (every rank holds the same figures)
  int64_t large_bytes = 0;
  double large_s = 0.0;
  double probe_s = 0.0;  // the probe's own wall time
};

// The share of a bucket's allreduce time its latency may take: with 0.1, a bucket's transfer outlasts its
// latency nine times, so cutting gradients into buckets of this size costs at most a tenth more than one
// allreduce of all of them.
constexpr double kBucketLatencyShare = 0.1;

// Collective (every rank, same moment): times allreduces of 256 KiB and 4 MiB of float32 on `device`
// through `comm` (a warm-up, then 3 each; the same asynchronous path the gradients take), fits the line,
// and returns the same fit on every rank. Costs 8 allreduces: 0.3 s at 8 nodes on 1 Gbit/s.
AllreduceFit probe_allreduce(Communicator& comm, c10::Device device);

// The bucket caps for that network: latency * bandwidth * (1 - share) / share, at least 256 KiB (below it
// the per-bucket work in the hooks and the backend outweighs any overlap) and at most `fixed`'s caps (what
// comm.bucket_mb and comm.first_bucket_mb allow); the first bucket no larger than the others.
BucketOptions buckets_for_network(const AllreduceFit& fit, const BucketOptions& fixed);

}  // namespace dtrain
