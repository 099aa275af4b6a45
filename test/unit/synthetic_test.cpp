// Generated datasets: the same (spec, seeds) give the same bytes, which is what lets runs with --synthetic
// be compared across builds, ranks and releases.
#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "runtime/data/synthetic.h"

using namespace dtrain;

TEST_CASE("synthetic data is each class's template plus noise, the same bits as the whole-tensor sum", "[data]") {
  // 10,000 samples: two full blocks of rows and a partial one in make_synthetic_dataset.
  const SyntheticSpec spec{{1, 28, 28}, 10, 10000, 0.5};
  const TensorDataset data = make_synthetic_dataset(spec, 7, 8);

  // The definition, written out as one expression (what the generator computed before it added the
  // templates in place): the random streams are drawn in the same order.
  at::Generator template_gen = at::detail::createCPUGenerator(7);
  at::Generator sample_gen = at::detail::createCPUGenerator(8);
  const at::Tensor templates = at::randn({10, 1, 28, 28}, template_gen, at::kFloat);
  const at::Tensor targets = at::randint(10, {10000}, sample_gen, at::kLong);
  const at::Tensor inputs =
      templates.index_select(0, targets) + at::randn({10000, 1, 28, 28}, sample_gen, at::kFloat).mul_(0.5);

  REQUIRE(data.inputs.sizes() == inputs.sizes());
  CHECK(at::equal(data.targets, targets));
  CHECK(at::equal(data.inputs, inputs));
  CHECK(at::equal(make_synthetic_dataset(spec, 7, 8).inputs, data.inputs));
  // Another sample seed: other samples of the same classes.
  CHECK_FALSE(at::equal(make_synthetic_dataset(spec, 7, 9).inputs, data.inputs));
}
