// A small, fast workload for trainer, reducer and checkpoint tests: an MLP on generated data.
#pragma once

#include <memory>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/train/workload.h"

namespace dtrain::test {

struct TinyOptions {
  double dropout = 0.0;  // > 0 exercises the per-epoch RNG reseeding on resume
  int64_t train_samples = 256;
  int64_t test_samples = 64;
  int64_t hidden = 16;   // width of the hidden layer (another width: a model a checkpoint does not fit)
  std::vector<int64_t> nan_train_samples;  // training samples whose inputs are NaN
  bool nan_test_inputs = false;            // every test input NaN
  int64_t nan_test_from = -1;              // >= 0: test inputs from this index on are NaN
  bool float64 = false;  // the model in float64 (test::Float64Model), for comparing runs of another order
  bool batchnorm = false;  // a BatchNorm after the hidden layer: running statistics that evaluation uses
};

std::unique_ptr<ClassifierWorkload> make_tiny_workload(TinyOptions options = {});

// A config for the tiny workload whose checkpoints and logs go under `dir`.
TrainConfig tiny_config(const std::string& dir);

}  // namespace dtrain::test
