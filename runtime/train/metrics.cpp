#include "runtime/train/metrics.h"

#include <ATen/ATen.h>

namespace dtrain {

void reduce_totals(Communicator& comm, MetricTotals& train, MetricTotals& test) {
  // Doubles: float sums of 60000 per-sample losses would lose digits the 4-decimal output shows.
  at::Tensor sums = at::tensor(std::vector<double>{train.loss_sum, train.correct, train.samples, test.loss_sum,
                                                   test.correct, test.samples},
                               at::kDouble);
  comm.allreduce(sums, ReduceOp::kSum);
  const double* v = sums.data_ptr<double>();
  train = MetricTotals{v[0], v[1], v[2]};
  test = MetricTotals{v[3], v[4], v[5]};
}

}  // namespace dtrain
