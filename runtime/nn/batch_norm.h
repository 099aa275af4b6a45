// BatchNorm that can take its batch statistics over every rank (SyncBatchNorm). Models use it in place of
// torch::nn::BatchNorm2d: the same parameters, buffers, names, initialisation and results; with
// --sync-batchnorm the trainer hands it the communicator, and in training mode the mean and variance are
// those of the global batch (every rank's samples), as if one process trained on all of them.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <ostream>

namespace dtrain {

class Communicator;

struct BatchNormOptions {
  int64_t num_features = 0;  // channels: dimension 1 of the input
  double eps = 1e-5;
  double momentum = 0.1;     // running = (1 - momentum) * running + momentum * batch statistic
  bool affine = true;        // false: no weight and bias (a conditional BatchNorm scales and shifts itself)
};

// Input [N, C, ...] (any rank >= 2); statistics per channel over every other dimension. Parameters
// weight (ones) and bias (zeros) unless options.affine is false, buffers running_mean, running_var,
// num_batches_tracked: torchvision's state_dict keys. In eval mode the running statistics normalise, with
// no communication.
class BatchNormImpl final : public torch::nn::Module {
 public:
  explicit BatchNormImpl(int64_t num_features) : BatchNormImpl(BatchNormOptions{num_features}) {}
  explicit BatchNormImpl(const BatchNormOptions& options);

  // Local on one process; collective once sync_statistics() set a communicator: in training mode every
  // rank of it must run this forward (and its backward) in the same order, as they do the same step.
  // Throws ConfigError in training for an input with one value per channel (a batch of one at 1x1), as
  // PyTorch's BatchNorm does, unless the statistics are synced over several ranks.
  at::Tensor forward(const at::Tensor& input);

  // Takes the training-mode batch statistics over all ranks of `comm` (nullptr: this rank's batch only).
  // Every rank then updates its running statistics with the same values, so they stay identical.
  // `comm` must outlive every forward and backward that follows.
  void sync_statistics(Communicator* comm) { comm_ = comm; }
  bool syncs_statistics() const { return comm_ != nullptr; }

  const BatchNormOptions& options() const { return options_; }
  void pretty_print(std::ostream& stream) const override;

  at::Tensor weight;
  at::Tensor bias;
  at::Tensor running_mean;
  at::Tensor running_var;
  at::Tensor num_batches_tracked;

 private:
  at::Tensor forward_synced(const at::Tensor& input);

  BatchNormOptions options_;
  Communicator* comm_ = nullptr;
};
TORCH_MODULE(BatchNorm);

// Hands `comm` to every BatchNorm inside `module` (see BatchNormImpl::sync_statistics; nullptr, as on one
// rank, keeps per-rank statistics) and returns how many there are. Throws ConfigError naming the first
// torch::nn BatchNorm layer it finds, whose statistics cannot be synced.
int64_t sync_batchnorm_statistics(torch::nn::Module& module, Communicator* comm);

}  // namespace dtrain
