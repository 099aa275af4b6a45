#include "runtime/train/shard_steps.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "runtime/reduce/shard_tree_reducer.h"
#include "runtime/train/draw_seeds.h"

namespace dtrain {

Batch shard_rows(const Batch& batch, int64_t m, int64_t k) {
  Batch shard;
  const int64_t size = batch.size;
  shard.inputs = batch.inputs.slice(0, m, size, k).contiguous();
  shard.targets = batch.targets.slice(0, m, size, k).contiguous();
  for (size_t i = static_cast<size_t>(m); i < batch.indices.size(); i += static_cast<size_t>(k)) {
    shard.indices.push_back(batch.indices[i]);
  }
  shard.size = size > m ? (size - m + k - 1) / k : 0;
  return shard;
}

int64_t unpadded_samples(int64_t samples, int64_t start, int rank, int ranks) {
  const int64_t left = samples - start - rank;
  return left > 0 ? (left + ranks - 1) / ranks : 0;
}

ShardedStep sharded_step(const TrainOptions& options, int64_t step, int64_t global_batch, int64_t train_samples, int rank,
                         int ranks) {
  return ShardedStep{step, std::min(global_batch, train_samples - step * global_batch), rank, ranks, options.shards / ranks};
}

std::optional<DeterministicRecord> deterministic_record(const TrainOptions& options, int ranks, int64_t global_batch) {
  if (!options.deterministic) return std::nullopt;
  return DeterministicRecord{options.shards, options.shards / ranks, global_batch, global_batch / options.shards};
}

void train_shards(TrainStep& step, TrainState& state, const Batch& batch, MicroBatch micro, const ShardedStep& where,
                  MetricSums& sums) {
  const std::vector<int64_t> order = shard_order(where.shards_per_rank);
  micro.group_size = where.shards_per_rank;
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t m = order[i];
    const Batch shard = shard_rows(batch, m, where.shards_per_rank);
    micro.first = i == 0;
    micro.last = i + 1 == order.size();
    micro.weight = static_cast<double>(shard.size) / static_cast<double>(where.global_samples);
    at::manual_seed(shard_seed(micro.sample_seed, where.step, where.rank + where.ranks * m));
    state.begin_micro_batch(micro);
    step.train(shard, state, sums);
  }
}

}  // namespace dtrain
