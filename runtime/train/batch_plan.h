// How a global batch is split over the ranks of the current world: the per-rank micro-batch and the
// backward passes per optimizer step. Holding the global batch when the world size changes (an elastic
// restart at fewer or more ranks) keeps the training math the same: every optimizer step averages the
// gradient over the same samples, whatever the number of ranks.
#pragma once

#include <cstdint>
#include <string>

namespace dtrain {

struct BatchPlan {
  int64_t global_batch = 0;  // samples per optimizer step over all ranks
  int64_t per_rank = 0;      // samples per backward pass on each rank
  int64_t accumulate = 1;    // backward passes per optimizer step
  std::string text() const;  // "global batch 96 = 2 ranks x 24 x 2 passes"
};

// The plan with the fewest backward passes whose micro-batch is at most `max_per_rank` (the batch that
// fits on one device). Throws ConfigError when `global_batch` cannot be split evenly over `world_size`
// ranks, naming the world sizes it can run at.
BatchPlan plan_global_batch(int64_t global_batch, int world_size, int64_t max_per_rank);

}  // namespace dtrain
