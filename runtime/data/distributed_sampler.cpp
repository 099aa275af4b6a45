#include "runtime/data/distributed_sampler.h"

#include <numeric>

#include "runtime/data/sample_random.h"
#include "runtime/util/check.h"

namespace dtrain {
namespace {

// Uniform in [0, bound) without modulo bias (rejection of the short last interval).
uint64_t bounded(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  for (;;) {
    const uint64_t x = splitmix64(state);
    if (x < limit) return x % bound;
  }
}

}  // namespace

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t state = seed;
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(bounded(state, static_cast<uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size, uint64_t seed, bool shuffle)
    : dataset_size_(dataset_size), rank_(rank), world_size_(world_size), seed_(seed), shuffle_(shuffle) {
  DTRAIN_CHECK(dataset_size > 0, DataError, "cannot sample from an empty dataset");
  DTRAIN_CHECK(world_size > 0 && rank >= 0 && rank < world_size, Error,
               "DistributedSampler: rank " << rank << " out of range for world size " << world_size);
  samples_per_rank_ = (dataset_size + world_size - 1) / world_size;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch, int64_t start) const {
  DTRAIN_CHECK(start >= 0 && start < dataset_size_, Error,
               "DistributedSampler: start position " << start << " out of range [0, " << dataset_size_ << ")");
  // Mixing the epoch into the seed with a large odd multiplier keeps (seed, epoch) pairs from colliding.
  std::vector<int64_t> order;
  if (shuffle_) {
    order = seeded_permutation(dataset_size_, seed_ * 0x2545f4914f6cdd1dULL + static_cast<uint64_t>(epoch));
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t rest = dataset_size_ - start;
  const int64_t per_rank = (rest + world_size_ - 1) / world_size_;
  const int64_t total = per_rank * world_size_;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  for (int64_t i = rank_; i < total; i += world_size_) mine.push_back(order[static_cast<size_t>(start + i % rest)]);
  return mine;
}

Range eval_shard(int64_t dataset_size, int rank, int world_size) {
  const int64_t base = dataset_size / world_size;
  const int64_t extra = dataset_size % world_size;
  Range range;
  range.begin = rank * base + std::min<int64_t>(rank, extra);
  range.end = range.begin + base + (rank < extra ? 1 : 0);
  return range;
}

}  // namespace dtrain
