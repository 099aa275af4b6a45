// Loss and accuracy totals, reduced over all ranks before anything is printed: per-epoch metrics are
// always those of the global dataset, never of rank 0's shard.
#pragma once

#include <cstdint>

#include "runtime/comm/communicator.h"

namespace dtrain {

struct MetricTotals {
  double loss_sum = 0.0;  // sum of per-sample losses
  double correct = 0.0;
  double samples = 0.0;

  double mean_loss() const { return samples > 0 ? loss_sum / samples : 0.0; }
  double accuracy() const { return samples > 0 ? correct / samples : 0.0; }
};

// Collective: sums `train` and `test` totals over all ranks in one allreduce.
void reduce_totals(Communicator& comm, MetricTotals& train, MetricTotals& test);

}  // namespace dtrain
