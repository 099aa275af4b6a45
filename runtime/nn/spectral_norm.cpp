#include "runtime/nn/spectral_norm.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <cmath>

#include "runtime/util/check.h"

namespace dtrain {
namespace {

// F.normalize of a [1, n] row: x / max(||x||, eps).
at::Tensor normalize_row(const at::Tensor& x, double eps) { return x / x.norm().clamp_min(eps); }

// torch.nn's default initialisation of a layer: weight kaiming_uniform(a = sqrt(5)), which is uniform in
// +-1/sqrt(fan_in), and the bias uniform in +-1/sqrt(fan_in). Models overwrite the weights with their own
// scheme (BigGAN: orthogonal).
void default_init(at::Tensor& weight, at::Tensor& bias) {
  at::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(weight.numel() / weight.size(0)));
    bias.uniform_(-bound, bound);
  }
}

void register_power_iteration_state(torch::nn::Module& layer, int64_t rows, at::Tensor& u, at::Tensor& sv,
                                    const SpectralNormOptions& options) {
  DTRAIN_CHECK(options.power_iterations >= 1, Error,
               "spectral norm needs at least one power iteration per step, got " << options.power_iterations);
  u = layer.register_buffer("u", at::randn({1, rows}));
  sv = layer.register_buffer("sv", at::ones({1}));
}

}  // namespace

at::Tensor spectral_normalized(const at::Tensor& weight, at::Tensor& u, at::Tensor& sv, bool update,
                               const SpectralNormOptions& options) {
  const at::Tensor w = weight.reshape({weight.size(0), -1});
  at::Tensor left = u;
  at::Tensor right;
  {
    at::NoGradGuard no_grad;
    const at::Tensor w_const = w.detach();
    for (int64_t i = 0; i < options.power_iterations; ++i) {
      right = normalize_row(left.to(w_const.scalar_type()).mm(w_const), options.eps);
      left = normalize_row(right.mm(w_const.t()), options.eps);
    }
    if (update) u.copy_(left);
  }
  // The estimate is differentiable in W: d sigma / d W = u^T v, as for the exact top singular value.
  const at::Tensor sigma = right.mm(w.t()).mm(left.t()).squeeze();
  if (update) {
    at::NoGradGuard no_grad;
    sv.copy_(sigma.detach().reshape({1}));
  }
  return weight / sigma;
}

SNConv2dImpl::SNConv2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t padding, bool bias_on,
                           SpectralNormOptions options)
    : padding_(padding), options_(options) {
  weight = register_parameter("weight", at::empty({out_channels, in_channels, kernel_size, kernel_size}));
  if (bias_on) bias = register_parameter("bias", at::empty({out_channels}));
  default_init(weight, bias);
  register_power_iteration_state(*this, out_channels, u, sv, options_);
}

at::Tensor SNConv2dImpl::forward(const at::Tensor& input) {
  return at::conv2d(input, spectral_normalized(weight, u, sv, is_training(), options_), bias, 1, padding_);
}

SNLinearImpl::SNLinearImpl(int64_t in_features, int64_t out_features, bool bias_on, SpectralNormOptions options)
    : options_(options) {
  weight = register_parameter("weight", at::empty({out_features, in_features}));
  if (bias_on) bias = register_parameter("bias", at::empty({out_features}));
  default_init(weight, bias);
  register_power_iteration_state(*this, out_features, u, sv, options_);
}

at::Tensor SNLinearImpl::forward(const at::Tensor& input) {
  return at::linear(input, spectral_normalized(weight, u, sv, is_training(), options_), bias);
}

SNEmbeddingImpl::SNEmbeddingImpl(int64_t num_embeddings, int64_t dim, SpectralNormOptions options) : options_(options) {
  // nn.Embedding's initialisation: standard normal.
  weight = register_parameter("weight", at::randn({num_embeddings, dim}));
  register_power_iteration_state(*this, num_embeddings, u, sv, options_);
}

at::Tensor SNEmbeddingImpl::forward(const at::Tensor& indices) {
  return at::embedding(spectral_normalized(weight, u, sv, is_training(), options_), indices);
}

}  // namespace dtrain
