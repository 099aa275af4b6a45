// BigGAN (Brock, Donahue and Simonyan 2019) for class-conditional 32x32 and 64x64 images, with the
// layer layout of the authors' BigGAN-PyTorch code (BigGAN.py, layers.py) at G_ch = D_ch = ch:
// - Generator: a shared class embedding y = shared(class); z through a spectrally normalised linear
//   layer to a 4x4 map; residual up-blocks (conditional BatchNorm, ReLU, nearest x2 upsampling, 3x3
//   convolutions, a 1x1 shortcut), each BatchNorm's gain 1 + W_g y and bias W_b y; then BatchNorm, ReLU,
//   a 3x3 convolution to RGB and tanh.
// - Discriminator: residual down-blocks (pre-activation after the first, 2x2 average pooling), ReLU and
//   a sum over space, a linear output plus the projection <embed(class), features>.
// Every convolution, linear layer and D's embedding is spectrally normalised (runtime/nn/spectral_norm.h);
// G's shared embedding is not, as in the reference. Weights are initialised orthogonally (the
// reference's default), biases as torch.nn does. No self-attention (BigGAN-PyTorch's CIFAR setting).
// Parameter counts equal the reference's: at 32x32, ch 64 and 10 classes G has 4,668,163 and D 4,207,361.
//
// The BatchNorms are dtrain::BatchNorm, so --sync-batchnorm takes G's batch statistics over all ranks
// (the reference's cross-replica BatchNorm).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "runtime/nn/batch_norm.h"
#include "runtime/nn/spectral_norm.h"

namespace dtrain {

struct BigGanOptions {
  int64_t resolution = 32;  // 32 or 64
  int64_t channels = 64;    // the width multiplier (G_ch, D_ch)
  int64_t classes = 10;
  int64_t dim_z = 128;
  int64_t shared_dim = 128;  // the shared class embedding fed to every conditional BatchNorm
  double bn_eps = 1e-5;
  double sn_eps = 1e-8;
};

// Throws ConfigError unless the resolution has a layout (32 or 64) and the sizes are positive.
void check_biggan_options(const BigGanOptions& options);

// BatchNorm without affine parameters, then a per-sample gain 1 + W_g y and bias W_b y from the
// conditioning vector y ([N, cond]).
class ConditionalBatchNormImpl final : public torch::nn::Module {
 public:
  ConditionalBatchNormImpl(int64_t channels, int64_t cond_dim, const BigGanOptions& options);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& y);

 private:
  BatchNorm bn_{nullptr};
  SNLinear gain_{nullptr};
  SNLinear bias_{nullptr};
};
TORCH_MODULE(ConditionalBatchNorm);

class GeneratorBlockImpl final : public torch::nn::Module {
 public:
  GeneratorBlockImpl(int64_t in_channels, int64_t out_channels, const BigGanOptions& options);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& y);

 private:
  ConditionalBatchNorm bn1_{nullptr};
  SNConv2d conv1_{nullptr};
  ConditionalBatchNorm bn2_{nullptr};
  SNConv2d conv2_{nullptr};
  SNConv2d shortcut_{nullptr};
};
TORCH_MODULE(GeneratorBlock);

class BigGanGeneratorImpl final : public torch::nn::Module {
 public:
  explicit BigGanGeneratorImpl(const BigGanOptions& options);
  // Images in [-1, 1], [N, 3, resolution, resolution], for latents z [N, dim_z] and classes [N] (int64).
  at::Tensor forward(const at::Tensor& z, const at::Tensor& classes);
  const BigGanOptions& options() const { return options_; }
  // The type of its weights, which latents are given in (float, or double in tests).
  at::ScalarType weight_type() const { return linear_->weight.scalar_type(); }

 private:
  BigGanOptions options_;
  int64_t bottom_channels_ = 0;
  torch::nn::Embedding shared_{nullptr};
  SNLinear linear_{nullptr};
  torch::nn::ModuleList blocks_;
  BatchNorm out_bn_{nullptr};
  SNConv2d out_conv_{nullptr};
};
TORCH_MODULE(BigGanGenerator);

class DiscriminatorBlockImpl final : public torch::nn::Module {
 public:
  DiscriminatorBlockImpl(int64_t in_channels, int64_t out_channels, bool preactivation, bool downsample,
                         const BigGanOptions& options);
  at::Tensor forward(const at::Tensor& x);

 private:
  bool preactivation_;
  bool downsample_;
  SNConv2d conv1_{nullptr};
  SNConv2d conv2_{nullptr};
  SNConv2d shortcut_{nullptr};  // when the channels change or the block downsamples
};
TORCH_MODULE(DiscriminatorBlock);

class BigGanDiscriminatorImpl final : public torch::nn::Module {
 public:
  explicit BigGanDiscriminatorImpl(const BigGanOptions& options);
  // Scores [N] (real > 0 > fake under the hinge loss) of images [N, 3, R, R] of classes [N].
  at::Tensor forward(const at::Tensor& images, const at::Tensor& classes);

 private:
  torch::nn::ModuleList blocks_;
  SNLinear linear_{nullptr};
  SNEmbedding embed_{nullptr};
};
TORCH_MODULE(BigGanDiscriminator);

}  // namespace dtrain
