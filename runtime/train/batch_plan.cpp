#include "runtime/train/batch_plan.h"

#include "runtime/util/error.h"

namespace dtrain {

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

RunBatch plan_run_batch(TrainOptions& options, int world_size, int64_t restored_global) {
  if (options.elastic_batch != ElasticBatch::kGlobal) {
    return {options.batch_size * options.accumulate * world_size, {}};
  }
  int64_t global = options.global_batch_size;
  const char* from = "train.global_batch_size";
  if (global == 0 && restored_global > 0) {
    global = restored_global;
    from = "the checkpoint's";
  }
  if (global == 0) {
    global = options.batch_size * options.accumulate * world_size;
    from = "batch_size x accumulate x ranks at this start";
  }
  const BatchPlan plan = plan_global_batch(global, world_size, options.batch_size);
  // train.max_steps counts backward passes at the configured accumulation: the same optimizer steps.
  if (options.max_steps > 0) {
    options.max_steps = (options.max_steps + options.accumulate - 1) / options.accumulate * plan.accumulate;
  }
  options.batch_size = plan.per_rank;
  options.accumulate = plan.accumulate;
  return {plan.global_batch, "elastic batch: " + plan.text() + " (" + from + "; train.elastic_batch global)"};
}

}  // namespace dtrain
