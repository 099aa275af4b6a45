// What a workload supplies to the one training loop: a model, its data, a loss and a correctness count.
// Workloads never run their own epoch loop.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "runtime/config/config.h"
#include "runtime/data/tensor_dataset.h"

namespace dtrain {

// A model maps a batch of inputs to a batch of outputs. Parameters and buffers are registered as usual
// in torch::nn::Module.
class Model : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& inputs) = 0;
};

struct WorkloadData {
  TensorDataset train;
  TensorDataset test;
  std::string description;  // where the data came from, for the run log
};

class Workload {
 public:
  virtual ~Workload() = default;

  virtual std::string name() const = 0;

  // Local. A freshly initialised model (from torch's global RNG); the reducer then copies rank 0's
  // parameters to every rank.
  virtual std::shared_ptr<Model> make_model() const = 0;

  // Local. Loads or generates both splits. Throws DataError saying what is missing and how to get it.
  virtual WorkloadData load_data(const DataOptions& options, uint64_t seed) const = 0;

  // Mean loss over the batch, differentiable.
  virtual at::Tensor loss(const at::Tensor& outputs, const at::Tensor& targets) const = 0;

  // Number of correct predictions in the batch, as a 0-dim int64 tensor on the outputs' device (no sync).
  virtual at::Tensor count_correct(const at::Tensor& outputs, const at::Tensor& targets) const = 0;
};

}  // namespace dtrain
