#include "runtime/nn/batch_norm.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/nn/modules/batchnorm.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/util/check.h"

namespace dtrain {
namespace {

using torch::autograd::variable_list;

std::vector<int64_t> reduced_dims(const at::Tensor& input) {  // every dimension but the channels
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

at::Tensor per_channel(const at::Tensor& values, int64_t input_dim) {  // [C] -> [1, C, 1, ...]
  std::vector<int64_t> shape(static_cast<size_t>(input_dim), 1);
  shape[1] = values.size(0);
  return values.view(shape);
}

// Statistics and their gradients in float (double for double inputs), whatever the activations' type.
at::ScalarType math_type(const at::Tensor& input) {
  return input.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// The backward of a synced BatchNorm. With xmu = x - mean over the global batch of N values per channel:
//   grad_input  = weight * invstd * (dy - sum(dy) / N - xmu * invstd^2 * sum(dy * xmu) / N)
// where both sums run over every rank's samples (one allreduce of 2C values), and
//   grad_weight = sum(dy * xmu) * invstd,  grad_bias = sum(dy)
// over this rank's samples only: the reducer then averages them like any other gradient. Each rank's dy
// is the gradient of its own mean loss, so grad_input is world_size times its share of the gradient of
// the loss averaged over ranks, which is what the reducer's averaging expects of every local gradient.
class SyncBatchNormBackward final : public torch::autograd::Node {
 public:
  SyncBatchNormBackward(Communicator& comm, const at::Tensor& input, const at::Tensor& weight, at::Tensor mean,
                        at::Tensor invstd, at::Tensor count)
      : comm_(comm),
        input_(input, /*is_output=*/false),
        weight_(weight, /*is_output=*/false),
        mean_(std::move(mean)),
        invstd_(std::move(invstd)),
        count_(std::move(count)) {}

  std::string name() const override { return "dtrain::SyncBatchNormBackward"; }

  variable_list apply(variable_list&& grads) override {
    const at::Tensor input = input_.unpack();
    const at::Tensor weight = weight_.unpack();
    const at::ScalarType type = mean_.scalar_type();
    const int64_t dim = input.dim();
    const std::vector<int64_t> dims = reduced_dims(input);
    const at::Tensor x = input.to(type);
    // Every rank must take part in the allreduce below, so a missing gradient counts as zeros.
    const at::Tensor dy = grads[0].defined() ? grads[0].to(type) : at::zeros_like(x);
    const at::Tensor xmu = x - per_channel(mean_, dim);
    const at::Tensor sum_dy = dy.sum(dims);
    const at::Tensor sum_dy_xmu = (dy * xmu).sum(dims);

    variable_list result(3);
    if (should_compute_output(0)) {
      const int64_t channels = mean_.size(0);
      at::Tensor sums = at::cat({sum_dy, sum_dy_xmu});
      comm_.allreduce(sums, ReduceOp::kSum);
      const at::Tensor mean_dy = sums.slice(0, 0, channels) / count_;
      const at::Tensor mean_dy_xmu = sums.slice(0, channels) / count_;
      const at::Tensor scale = weight.defined() ? weight.to(type) * invstd_ : invstd_;
      result[0] = ((dy - per_channel(mean_dy, dim) - xmu * per_channel(invstd_ * invstd_ * mean_dy_xmu, dim)) *
                   per_channel(scale, dim))
                      .to(input.scalar_type());
    }
    if (weight.defined() && should_compute_output(1)) result[1] = (sum_dy_xmu * invstd_).to(weight.scalar_type());
    if (weight.defined() && should_compute_output(2)) result[2] = sum_dy.to(weight.scalar_type());
    return result;
  }

  void release_variables() override {
    input_.reset_data();
    weight_.reset_data();
  }

 private:
  Communicator& comm_;
  torch::autograd::SavedVariable input_;
  torch::autograd::SavedVariable weight_;
  at::Tensor mean_;    // [C], global batch
  at::Tensor invstd_;  // [C], 1 / sqrt(global biased variance + eps)
  at::Tensor count_;   // 0-dim: values per channel in the global batch
};

}  // namespace

BatchNormImpl::BatchNormImpl(const BatchNormOptions& options) : options_(options) {
  DTRAIN_CHECK(options.num_features > 0, Error, "BatchNorm needs a positive channel count, got " << options.num_features);
  const int64_t c = options.num_features;
  if (options.affine) {
    weight = register_parameter("weight", at::ones({c}));
    bias = register_parameter("bias", at::zeros({c}));
  }
  running_mean = register_buffer("running_mean", at::zeros({c}));
  running_var = register_buffer("running_var", at::ones({c}));
  num_batches_tracked = register_buffer("num_batches_tracked", at::zeros({}, at::kLong));
}

void BatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << "dtrain::BatchNorm(" << options_.num_features << ", eps=" << options_.eps << ", momentum=" << options_.momentum
         << (options_.affine ? "" : ", affine=false") << (comm_ != nullptr ? ", synced across ranks" : "") << ")";
}

at::Tensor BatchNormImpl::forward(const at::Tensor& input) {
  DTRAIN_CHECK(input.dim() >= 2 && input.size(1) == options_.num_features, Error,
               "BatchNorm(" << options_.num_features << ") needs input [N, " << options_.num_features
                            << ", ...], got " << input.sizes());
  // PyTorch's Python BatchNorm refuses this too; ATen's kernel would not: the batch variance of a single
  // value is 0, the running variance's unbiased update divides by 0, and the NaN shows up only when the
  // model is evaluated. Statistics synced over several ranks always have more than one value.
  const int64_t values = input.numel() / options_.num_features;
  DTRAIN_CHECK(!is_training() || values > 1 || (comm_ != nullptr && comm_->world_size() > 1), ConfigError,
               "BatchNorm(" << options_.num_features << ") in training got input " << input.sizes()
                            << ": one value per channel, whose batch variance is undefined (the running variance "
                               "would become NaN). A batch on each rank must give every BatchNorm layer at least "
                               "two values per channel: a batch size of 2 or more per rank (an epoch's last batch "
                               "holds what is left of the rank's share, and may be the one of size 1), images "
                               "large enough that the layer's maps are bigger than 1x1, or, with several ranks, "
                               "--sync-batchnorm");
  if (is_training()) num_batches_tracked.add_(1);
  if (is_training() && comm_ != nullptr) return forward_synced(input);
  return at::batch_norm(input, weight, bias, running_mean, running_var, is_training(), options_.momentum,
                        options_.eps, at::globalContext().userEnabledCuDNN());
}

at::Tensor BatchNormImpl::forward_synced(const at::Tensor& input) {
  const at::ScalarType type = math_type(input);
  const std::vector<int64_t> dims = reduced_dims(input);
  const int64_t channels = options_.num_features;
  at::Tensor output;
  at::Tensor mean;
  at::Tensor invstd;
  at::Tensor count;
  {
    at::NoGradGuard no_grad;  // the backward node below is the gradient of all of this
    const at::Tensor x = input.to(type);
    at::Tensor local_var;
    at::Tensor local_mean;
    std::tie(local_var, local_mean) = at::var_mean(x, dims, /*unbiased=*/false, /*keepdim=*/false);
    // One allreduce (in double) of each rank's count and its sums of d and d^2, d = x - running mean: the
    // shift is the same on every rank and near the batch mean once training has started, which keeps
    // E[d^2] - E[d]^2 free of cancellation. Each rank's own moments come from var_mean (Welford).
    const double n = static_cast<double>(x.numel() / channels);
    const at::Tensor shift = running_mean.to(at::kDouble);
    const at::Tensor d = local_mean.to(at::kDouble) - shift;
    at::Tensor sums = at::cat({d * n, (local_var.to(at::kDouble) + d * d) * n, at::full({1}, n, shift.options())});
    comm_->allreduce(sums, ReduceOp::kSum);
    const at::Tensor total = sums.slice(0, 2 * channels);  // [1]
    const at::Tensor mean_shift = sums.slice(0, 0, channels) / total;
    const at::Tensor var = (sums.slice(0, channels, 2 * channels) / total - mean_shift * mean_shift).clamp_min(0.0);
    const at::Tensor global_mean = shift + mean_shift;

    const double m = options_.momentum;
    running_mean.mul_(1.0 - m).add_(global_mean.to(running_mean.scalar_type()), m);
    // The unbiased variance, as torch's BatchNorm keeps; a global batch of one value keeps the biased one.
    const at::Tensor unbiased = var * total / (total - 1.0).clamp_min(1.0);
    running_var.mul_(1.0 - m).add_(unbiased.to(running_var.scalar_type()), m);

    mean = global_mean.to(type);
    invstd = (var + options_.eps).rsqrt().to(type);
    count = total.to(type).squeeze();
    const at::Tensor scale = weight.defined() ? weight.to(type) * invstd : invstd;
    const at::Tensor offset = bias.defined() ? bias.to(type) - mean * scale : -mean * scale;
    output = at::addcmul(per_channel(offset, input.dim()), x, per_channel(scale, input.dim())).to(input.scalar_type());
  }
  if (torch::autograd::compute_requires_grad(input, weight, bias)) {
    std::shared_ptr<SyncBatchNormBackward> node(
        new SyncBatchNormBackward(*comm_, input, weight, std::move(mean), std::move(invstd), std::move(count)),
        torch::autograd::deleteNode);
    node->set_next_edges(torch::autograd::collect_next_edges(input, weight, bias));
    torch::autograd::set_history(output, node);
  }
  return output;
}

int64_t sync_batchnorm_statistics(torch::nn::Module& module, Communicator* comm) {
  int64_t synced = 0;
  // apply() visits the module itself too, whether or not it lives in a shared_ptr.
  module.apply([&](const std::string& name, torch::nn::Module& layer) {
    if (auto* bn = layer.as<BatchNormImpl>()) {
      bn->sync_statistics(comm);
      ++synced;
    } else if (layer.as<torch::nn::BatchNorm1dImpl>() || layer.as<torch::nn::BatchNorm2dImpl>() ||
               layer.as<torch::nn::BatchNorm3dImpl>()) {
      std::string type = layer.name();  // "torch::nn::BatchNorm2dImpl"
      if (type.size() > 4 && type.compare(type.size() - 4, 4, "Impl") == 0) type.resize(type.size() - 4);
      throw ConfigError("train.sync_batchnorm: layer '" + name + "' is " + type +
                        ", which keeps per-rank batch statistics; build the model with dtrain::BatchNorm "
                        "(runtime/nn/batch_norm.h) to sync them");
    }
  });
  return synced;
}

}  // namespace dtrain
