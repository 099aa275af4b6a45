#include "runtime/data/synthetic.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace dtrain {

TensorDataset make_synthetic_dataset(const SyntheticSpec& spec, uint64_t template_seed, uint64_t sample_seed) {
  at::Generator template_gen = at::detail::createCPUGenerator(template_seed);
  at::Generator sample_gen = at::detail::createCPUGenerator(sample_seed);
  std::vector<int64_t> template_shape{spec.num_classes};
  template_shape.insert(template_shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  std::vector<int64_t> sample_shape{spec.num_samples};
  sample_shape.insert(sample_shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());

  const at::Tensor templates = at::randn(template_shape, template_gen, at::kFloat);
  TensorDataset data;
  data.targets = at::randint(spec.num_classes, {spec.num_samples}, sample_gen, at::kLong);
  data.inputs = templates.index_select(0, data.targets) +
                at::randn(sample_shape, sample_gen, at::kFloat).mul_(spec.noise);
  return data;
}

}  // namespace dtrain
