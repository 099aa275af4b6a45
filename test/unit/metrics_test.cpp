#include "test/support/catch.h"

#include "runtime/comm/local_communicator.h"
#include "runtime/train/metrics.h"

using namespace dtrain;

TEST_CASE("metric totals give sample-weighted means and accuracy", "[train]") {
  MetricTotals totals{12.0, 30.0, 40.0};
  CHECK(totals.mean_loss() == Approx(0.3));
  CHECK(totals.accuracy() == Approx(0.75));
  CHECK(MetricTotals{}.mean_loss() == 0.0);
  CHECK(MetricTotals{}.accuracy() == 0.0);
}

TEST_CASE("reducing totals on one rank leaves them unchanged", "[train]") {
  LocalCommunicator comm;
  MetricTotals train{1.5, 0.0, 3.0};
  MetricTotals test{2.0, 7.0, 10.0};
  reduce_totals(comm, train, test);
  CHECK(train.loss_sum == 1.5);
  CHECK(train.samples == 3.0);
  CHECK(test.correct == 7.0);
  CHECK(test.samples == 10.0);
}
