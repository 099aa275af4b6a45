// Splits a dataset across ranks: each epoch a permutation seeded by (seed, epoch), identical on every
// rank, padded to a multiple of world_size by repeating its first indices (as torch's
// DistributedSampler does), then dealt out round-robin. Every rank gets the same number of samples, the
// shards are disjoint up to that padding, and rank r's i-th sample is the permutation's (i*W + r)-th, so
// W ranks with batch b see exactly the samples one rank with batch W*b sees. Positions in that order are
// global (samples of all ranks), so an epoch stopped after g samples continues at any world size from
// position g: the global batches that follow are the ones the uninterrupted run would have taken.
#pragma once

#include <cstdint>
#include <vector>

namespace dtrain {

class DistributedSampler final {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, uint64_t seed, bool shuffle = true);

  int64_t samples_per_rank() const { return samples_per_rank_; }
  int64_t padding() const { return samples_per_rank_ * world_size_ - dataset_size_; }

  // This rank's indices for `epoch` (1-based), deterministic for (seed, epoch, rank, world_size): from
  // global position `start` of the epoch's order (0 <= start < dataset size) on, the rest padded to a
  // multiple of world_size by repeating its first indices and dealt out round-robin.
  std::vector<int64_t> indices(int64_t epoch, int64_t start = 0) const;

 private:
  int64_t dataset_size_;
  int rank_;
  int world_size_;
  uint64_t seed_;
  bool shuffle_;
  int64_t samples_per_rank_;
};

// The permutation used by DistributedSampler: a Fisher-Yates shuffle driven by SplitMix64, so it is the
// same on every platform and standard library (std::shuffle is not).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

// Contiguous evaluation shard [begin, end) of rank r: no padding, so each test sample counts exactly once.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
};
Range eval_shard(int64_t dataset_size, int rank, int world_size);

}  // namespace dtrain
