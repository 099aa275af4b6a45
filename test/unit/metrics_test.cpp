#include "test/support/catch.h"

#include <ATen/ATen.h>

#include "runtime/comm/local_communicator.h"
#include "runtime/train/metrics.h"
#include "runtime/util/error.h"

using namespace dtrain;
using Catch::Matchers::Contains;

TEST_CASE("named metric sums give weighted means in the declared order", "[train]") {
  MetricSums sums({"accuracy", "loss"}, at::TensorOptions(at::kCPU));
  sums.add("loss", at::tensor(12.0f), 40);
  sums.add("accuracy", at::tensor(int64_t{30}), 40);
  const MetricValues values = sums.local();
  REQUIRE(values.all().size() == 2);
  CHECK(values.all()[0].name == "accuracy");
  CHECK(values.at("accuracy") == Approx(0.75));
  CHECK(values.at("loss") == Approx(0.3));
  CHECK(values.find("accuracy")->sum == 30.0);
  CHECK(values.find("accuracy")->weight == 40.0);
  CHECK(values.all_finite());
  CHECK_THROWS_WITH(values.at("fid"), Contains("no metric 'fid' among: accuracy, loss"));
  CHECK_THROWS_WITH(sums.add("fid", at::tensor(1.0), 1), Contains("metric 'fid' was not declared"));

  MetricSums none({"loss"}, at::TensorOptions(at::kCPU));
  CHECK(none.local().at("loss") == 0.0);  // no weight yet: 0, not NaN
}

TEST_CASE("metric sums add up, zero, and show non-finite values", "[train]") {
  MetricSums a({"d_loss", "g_loss"}, at::TensorOptions(at::kCPU));
  MetricSums b({"d_loss", "g_loss"}, at::TensorOptions(at::kCPU));
  a.add("d_loss", at::tensor(1.0), 2);
  b.add("d_loss", at::tensor(3.0), 2);
  b.add("g_loss", at::tensor(std::nan("")), 4);
  a.add(b);
  const MetricValues values = a.local();
  CHECK(values.at("d_loss") == Approx(1.0));
  CHECK_FALSE(values.all_finite());
  a.zero();
  CHECK(a.local().all_finite());
  CHECK(a.local().find("g_loss")->weight == 0.0);
  MetricSums other({"loss"}, at::TensorOptions(at::kCPU));
  CHECK_THROWS_AS(a.add(other), Error);
}

TEST_CASE("metric names must suit the logs and the analysis tools", "[train]") {
  CHECK_THROWS_WITH(MetricSums({"real_loss"}, at::TensorOptions(at::kCPU)), Contains("'real_loss'") && Contains("real"));
  CHECK_THROWS_WITH(MetricSums({"top 1"}, at::TensorOptions(at::kCPU)), Contains("'top 1'"));
  CHECK_THROWS_WITH(MetricSums({"loss", "loss"}, at::TensorOptions(at::kCPU)), Contains("twice"));
}

TEST_CASE("reducing several metric sets on one rank leaves them unchanged", "[train]") {
  LocalCommunicator comm;
  MetricSums train({"loss"}, at::TensorOptions(at::kCPU));
  MetricSums test({"accuracy", "loss"}, at::TensorOptions(at::kCPU));
  train.add("loss", at::tensor(1.5), 3);
  test.add("accuracy", at::tensor(7.0), 10);
  test.add("loss", at::tensor(2.0), 10);
  const std::vector<MetricValues> reduced = reduce_all(comm, {&train, &test});
  REQUIRE(reduced.size() == 2);
  CHECK(reduced[0].at("loss") == 0.5);
  CHECK(reduced[1].find("accuracy")->sum == 7.0);
  CHECK(reduced[1].at("loss") == 0.2);
}
