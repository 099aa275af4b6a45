// Deterministic generated classification data: each class is a fixed random template plus noise, so a
// model can learn it (loss goes down) and every run with the same seed sees the same bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/data/tensor_dataset.h"

namespace dtrain {

struct SyntheticSpec {
  std::vector<int64_t> sample_shape;  // e.g. {1, 28, 28}
  int64_t num_classes = 10;
  int64_t num_samples = 0;
  double noise = 0.5;  // standard deviation of the per-sample noise around the class template
};

// Same (spec, seed) -> same tensors. Templates depend on `template_seed` only, so a train and a test set
// generated with different sample seeds share their classes.
TensorDataset make_synthetic_dataset(const SyntheticSpec& spec, uint64_t template_seed, uint64_t sample_seed);

}  // namespace dtrain
