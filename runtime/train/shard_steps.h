// train.deterministic's side of the loop: one optimizer step's batch on this rank split into its shards
// (runtime/reduce/shard_tree_reducer.h), each trained as a micro-batch with random draws of its own.
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/config/config.h"
#include "runtime/data/dataset.h"
#include "runtime/log/run_events.h"
#include "runtime/train/metrics.h"
#include "runtime/train/train_state.h"
#include "runtime/train/train_step.h"

namespace dtrain {

// Rows m, m + k, m + 2k, ... of `batch`, rank r's local shard m of k: the global batch's positions p with
// p mod (k x ranks) == r + ranks x m, since rank r holds the positions p mod ranks == r in order.
Batch shard_rows(const Batch& batch, int64_t m, int64_t k);

// How many of an epoch's global positions [start, samples) rank `rank` of `ranks` holds (start + q x ranks +
// rank < samples): its samples without the padding DistributedSampler adds to even the ranks out.
int64_t unpadded_samples(int64_t samples, int64_t start, int rank, int ranks);

// Where a step's shards are: `step` 0-based within the epoch, `global_samples` the step's samples over all
// ranks, and the world that splits them.
struct ShardedStep {
  int64_t step = 0;
  int64_t global_samples = 0;
  int rank = 0;
  int ranks = 1;
  int64_t shards_per_rank = 1;
};

// Step `step` of an epoch of `train_samples` under `options` (train.shards) at global batch `global_batch`:
// the last step of an epoch may hold fewer samples.
ShardedStep sharded_step(const TrainOptions& options, int64_t step, int64_t global_batch, int64_t train_samples, int rank,
                         int ranks);

// The run log's account of the split (run_start's `deterministic`); none without train.deterministic.
std::optional<DeterministicRecord> deterministic_record(const TrainOptions& options, int ranks, int64_t global_batch);

// Trains this rank's shards of `batch`, in shard_order(), each a micro-batch of `micro`'s step whose loss
// weighs its share of the global samples; before each, torch's generator (dropout) is seeded from the
// epoch's sample seed, the step and the global shard index, so a shard draws the same at any world size.
void train_shards(TrainStep& step, TrainState& state, const Batch& batch, MicroBatch micro, const ShardedStep& where,
                  MetricSums& sums);

}  // namespace dtrain
