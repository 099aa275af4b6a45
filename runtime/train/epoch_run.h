// An epoch's training in progress, as the trainer (trainer.cpp) keeps it between its steps.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/train/metrics.h"
#include "runtime/util/timer.h"

namespace dtrain {

// Metric sums stay on the device; reading them every step would
// synchronise a GPU. A group's sums (the micro-batches of one optimizer step) join the epoch's when its
// steps are taken, or, with skip-step, are dropped with a skipped step.
struct EpochRun {
  EpochRun(int64_t epoch, const std::vector<std::string>& metrics, const at::TensorOptions& options)
      : epoch(epoch), epoch_sums(metrics, options), interval_sums(metrics, options), group_sums(metrics, options) {}

  int64_t epoch;
  int64_t first_step = 0;       // steps before it were trained before a resume
  int64_t steps = 0;            // the epoch's last step + 1
  int64_t global_per_step = 0;  // samples per step over all ranks
  int64_t epoch_total = 0;      // global samples, for progress
  uint64_t sample_seed = 0;
  MetricSums epoch_sums;
  MetricSums interval_sums;  // since the last progress line
  MetricSums group_sums;
  int64_t samples_seen = 0;  // this rank's, in steps taken
  int64_t group_samples = 0;
  int64_t interval_first_step = 1;
  Stopwatch interval_watch;            // since the samples of the last progress line
  int64_t interval_begin_samples = 0;  // global samples of the epoch done then
  double current_lr = -1.0;
};

}  // namespace dtrain
