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

namespace dtrain {

struct SyntheticImageSpec {
  int64_t num_classes = 10;
  int64_t image_size = 32;
  int64_t num_samples = 50000;  // nominal: the size of an epoch
  // Distinct images kept in memory (uint8); sample i is image i mod pool, so 224-pixel datasets of any
  // nominal size take at most pool x 147 KiB.
  int64_t pool = 2048;
};

// Learnable generated RGB images: each class has its own colour and coarse texture, each image adds
// noise. uint8 pixels normalised per batch like a real image dataset. Same (spec, seeds) -> same data.
TensorDataset make_synthetic_images(const SyntheticImageSpec& spec, uint64_t template_seed, uint64_t sample_seed);

}  // namespace dtrain
