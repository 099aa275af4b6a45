// A small convolutional classifier on generated 8x8 RGB images with the training transforms of the
// vision workloads (random crop of the 2-pixel padded image, flip): for tests of BatchNorm buffer sync
// and of distributed equivalence with per-sample augmentation.
#pragma once

#include <memory>

#include "runtime/config/config.h"
#include "runtime/train/workload.h"

namespace dtrain::test {

struct TinyCnnOptions {
  bool batch_norm = true;
  int64_t train_samples = 256;
  int64_t test_samples = 64;
  bool float64 = false;  // the model in float64 (test::Float64Model)
};

std::unique_ptr<ClassifierWorkload> make_tiny_cnn_workload(TinyCnnOptions options = {});

}  // namespace dtrain::test
