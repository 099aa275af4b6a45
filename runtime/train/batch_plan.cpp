#include "runtime/train/batch_plan.h"

#include <algorithm>
#include <utility>

#include "runtime/reduce/shard_tree_reducer.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace {

// The global batch a run holds, and where it came from: train.global_batch_size, else the checkpoint's,
// else batch_size x accumulate x ranks at this start.
std::pair<int64_t, const char*> held_global_batch(const TrainOptions& options, int world_size, int64_t restored_global) {
  if (options.global_batch_size > 0) return {options.global_batch_size, "train.global_batch_size"};
  if (restored_global > 0) return {restored_global, "the checkpoint's"};
  return {options.batch_size * options.accumulate * world_size, "batch_size x accumulate x ranks at this start"};
}

}  // namespace

std::string BatchPlan::text() const {
  const int64_t ranks = global_batch / (per_rank * accumulate);
  return "global batch " + std::to_string(global_batch) + " = " + std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") +
         " x " + std::to_string(per_rank) + (accumulate > 1 ? " x " + std::to_string(accumulate) + " passes" : "");
}

BatchPlan plan_global_batch(int64_t global_batch, int world_size, int64_t max_per_rank) {
  if (global_batch <= 0 || world_size <= 0 || max_per_rank <= 0) {
    throw ConfigError("cannot split a global batch of " + std::to_string(global_batch) + " over " +
                      std::to_string(world_size) + " ranks with at most " + std::to_string(max_per_rank) + " per rank");
  }
  if (global_batch % world_size != 0) {
    std::string sizes;
    int shown = 0;
    for (int64_t w = 1; w <= global_batch && shown < 8; ++w) {
      if (global_batch % w != 0) continue;
      sizes += (shown++ ? ", " : "") + std::to_string(w);
    }
    throw ConfigError("the global batch of " + std::to_string(global_batch) + " samples (train.global_batch_size, or the " +
                      "checkpoint's) cannot be split evenly over " + std::to_string(world_size) +
                      " ranks; it divides over " + sizes + (shown == 8 ? ", ..." : "") +
                      " ranks. Choose a global batch that the world sizes of the job divide (--global-batch-size), "
                      "or --elastic-batch per-rank");
  }
  const int64_t per_rank_total = global_batch / world_size;
  for (int64_t passes = 1; passes <= per_rank_total; ++passes) {
    if (per_rank_total % passes == 0 && per_rank_total / passes <= max_per_rank) {
      return BatchPlan{global_batch, per_rank_total / passes, passes};
    }
  }
  return BatchPlan{global_batch, 1, per_rank_total};  // unreachable: one sample per pass always fits
}

RunBatch plan_run_batch(TrainOptions& options, int world_size, int64_t restored_global, int64_t train_samples,
                        bool whole_input_passes) {
  if (options.deterministic) {
    return plan_deterministic_batch(options, world_size, restored_global, train_samples, whole_input_passes);
  }
  if (options.elastic_batch != ElasticBatch::kGlobal) {
    return {options.batch_size * options.accumulate * world_size, {}, world_size};
  }
  const auto [global, from] = held_global_batch(options, world_size, restored_global);
  const BatchPlan plan = plan_global_batch(global, world_size, options.batch_size);
  // train.max_steps counts backward passes at the configured accumulation: the same optimizer steps.
  if (options.max_steps > 0) {
    options.max_steps = (options.max_steps + options.accumulate - 1) / options.accumulate * plan.accumulate;
  }
  options.batch_size = plan.per_rank;
  options.accumulate = plan.accumulate;
  return {plan.global_batch, "elastic batch: " + plan.text() + " (" + from + "; train.elastic_batch global)", world_size};
}

RunBatch plan_deterministic_batch(TrainOptions& options, int world_size, int64_t restored_global, int64_t train_samples,
                                  bool whole_input_passes) {
  const auto [global, from] = held_global_batch(options, world_size, restored_global);
  // Optimizer steps: train.max_steps counts backward passes at the configured accumulation.
  if (options.max_steps > 0) options.max_steps = (options.max_steps + options.accumulate - 1) / options.accumulate;
  options.accumulate = 1;
  if (whole_input_passes) {
    options.shards = 1;
    options.batch_size = global;
    return {global, "deterministic: global batch " + std::to_string(global) + " (" + from + ") trained whole on each of the " +
                        std::to_string(world_size) + (world_size == 1 ? " rank" : " ranks") +
                        " in one pass: this workload computes its whole input in every pass, so shards would only "
                        "repeat it (train.shards does not apply); no gradient exchange; one thread per rank",
            1};
  }
  const int64_t shards = options.shards;
  const int64_t ranks = world_size;
  check_shard_split(shards, world_size);
  if (global % shards != 0) {
    throw ConfigError("train.deterministic: the global batch of " + std::to_string(global) + " samples (" + from +
                      ") is not a multiple of train.shards (" + std::to_string(shards) +
                      "); choose --global-batch-size " + std::to_string((global / shards + 1) * shards) + " or --shards");
  }
  const int64_t epoch_samples = options.max_steps > 0 ? std::min(train_samples, options.max_steps * global) : train_samples;
  const int64_t last = epoch_samples % global;
  if (last > 0 && last < shards) {
    throw ConfigError("train.deterministic: an epoch of " + std::to_string(epoch_samples) + " samples ends with a global "
                      "batch of " + std::to_string(last) + ", fewer than its " + std::to_string(shards) +
                      " shards (train.shards); choose a global batch that leaves none or at least " + std::to_string(shards) +
                      " samples, or --max-steps");
  }
  options.batch_size = global / ranks;
  return {global, "deterministic: global batch " + std::to_string(global) + " in " + std::to_string(shards) + " shards of " +
                      std::to_string(global / shards) + " samples, " + std::to_string(shards / ranks) + " per rank at " +
                      std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + " (" + from +
                      "), summed in one fixed order; one thread per rank",
          world_size};
}

}  // namespace dtrain
