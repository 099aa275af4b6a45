// Spectral normalisation (Miyato et al. 2018) as BigGAN applies it: a layer's weight W, viewed as a
// [rows, everything else] matrix, is divided by an estimate of its largest singular value. The estimate
// comes from power iteration on a persistent left singular vector u (buffer "u", [1, rows]): each
// training forward runs one step, v = normalise(u W), u = normalise(v W^T), sigma = v W^T u^T, and keeps
// the new u; eval-mode forwards compute sigma the same way without keeping u. Gradients flow through
// sigma into W (u and v are constants), as in torch.nn.utils.spectral_norm. The last sigma is kept in
// buffer "sv" for inspection.
//
// Across ranks: W is identical on every rank after each optimizer step, and u starts identical (the
// modules are built from the same seed and rank 0's buffers are broadcast before each step), so every
// rank runs the same power iteration and u stays identical without any communication of its own.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace dtrain {

struct SpectralNormOptions {
  int64_t power_iterations = 1;  // per training forward
  double eps = 1e-8;             // floor of the norms the vectors are divided by (BigGAN's SN_eps)
};

// W / sigma(W) for `weight` ([rows, ...]), advancing `u` ([1, rows]) in place when `update` and storing
// sigma in `sv` ([1]) then. A free function so that every spectrally normalised layer shares it.
at::Tensor spectral_normalized(const at::Tensor& weight, at::Tensor& u, at::Tensor& sv, bool update,
                               const SpectralNormOptions& options);

// Conv2d with a spectrally normalised weight [out, in, k, k]; stride 1.
class SNConv2dImpl final : public torch::nn::Module {
 public:
  SNConv2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t padding, bool bias = true,
               SpectralNormOptions options = {});
  at::Tensor forward(const at::Tensor& input);

  at::Tensor weight;
  at::Tensor bias;
  at::Tensor u;
  at::Tensor sv;

 private:
  int64_t padding_;
  SpectralNormOptions options_;
};
TORCH_MODULE(SNConv2d);

// Linear with a spectrally normalised weight [out, in].
class SNLinearImpl final : public torch::nn::Module {
 public:
  SNLinearImpl(int64_t in_features, int64_t out_features, bool bias = true, SpectralNormOptions options = {});
  at::Tensor forward(const at::Tensor& input);

  at::Tensor weight;
  at::Tensor bias;
  at::Tensor u;
  at::Tensor sv;

 private:
  SpectralNormOptions options_;
};
TORCH_MODULE(SNLinear);

// Embedding with a spectrally normalised table [num_embeddings, dim] (BigGAN's projection discriminator).
class SNEmbeddingImpl final : public torch::nn::Module {
 public:
  SNEmbeddingImpl(int64_t num_embeddings, int64_t dim, SpectralNormOptions options = {});
  at::Tensor forward(const at::Tensor& indices);

  at::Tensor weight;
  at::Tensor u;
  at::Tensor sv;

 private:
  SpectralNormOptions options_;
};
TORCH_MODULE(SNEmbedding);

}  // namespace dtrain
