// How a global batch is split over the ranks of the current world: the per-rank micro-batch and the
// backward passes per optimizer step. Holding the global batch when the world size changes (an elastic
// restart at fewer or more ranks) keeps the training math the same: every optimizer step averages the
// gradient over the same samples, whatever the number of ranks.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/config/config.h"

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

// The batch a run trains with at `world_size` ranks. With train.elastic_batch global, the global batch of
// train.global_batch_size, else the resumed checkpoint's (`restored_global`, 0 for none), else batch_size
// x accumulate x ranks, split by plan_global_batch: options.batch_size, accumulate and max_steps (which
// counts backward passes) are set to the plan's, and `note` says how it was split and why. Otherwise
// the per-rank batch as configured. Under train.deterministic, plan_deterministic_batch's, for an epoch of
// `train_samples` of a workload whose passes compute the whole input or not (`whole_input_passes`).
struct RunBatch {
  int64_t global_batch = 0;
  std::string note;  // empty unless the global batch is held
  // How many ranks share each global batch's samples: the world size, or 1 where every rank trains all
  // of them (train.deterministic with whole-input passes).
  int sharing_ranks = 1;
};
RunBatch plan_run_batch(TrainOptions& options, int world_size, int64_t restored_global, int64_t train_samples,
                        bool whole_input_passes = false);

// The batch of a train.deterministic run (runtime/reduce/shard_tree_reducer.h): the global batch as
// plan_run_batch holds it, each rank loading global / ranks samples per step (options.batch_size; no
// accumulation: its train.shards / ranks shards are the backward passes) and train.max_steps counting
// optimizer steps. Throws ConfigError, the same on every rank, when the world size is not a power of two
// dividing train.shards, when train.shards does not divide the global batch, or when an epoch of
// `train_samples` would end with a global batch of fewer samples than shards.
// With `whole_input_passes` (Workload::whole_input_passes) a pass costs the same whatever its batch, and
// every rank trains the whole global batch in one pass: one shard (options.shards becomes 1), sharing
// ranks 1, no gradient exchange, any world size. Every rank then computes what one rank alone computes.
RunBatch plan_deterministic_batch(TrainOptions& options, int world_size, int64_t restored_global, int64_t train_samples,
                                  bool whole_input_passes = false);

}  // namespace dtrain
