#include "workloads/biggan/biggan.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <string>
#include <vector>

#include "runtime/util/error.h"

namespace dtrain {
namespace {

// BigGAN-PyTorch's G_arch and D_arch without attention: channel multipliers of ch per block.
struct Layout {
  std::vector<int64_t> g_in, g_out;
  std::vector<int64_t> d_in, d_out;  // d_in[0] == 0 stands for the 3 image channels
  std::vector<bool> d_downsample;
};

Layout layout(int64_t resolution) {
  if (resolution == 32) return {{4, 4, 4}, {4, 4, 4}, {0, 4, 4, 4}, {4, 4, 4, 4}, {true, true, false, false}};
  return {{16, 16, 8, 4}, {16, 8, 4, 2}, {0, 1, 2, 4, 8}, {1, 2, 4, 8, 16}, {true, true, true, true, false}};
}

SpectralNormOptions sn(const BigGanOptions& options) { return SpectralNormOptions{1, options.sn_eps}; }

// BigGAN's 'ortho' initialisation of every convolution, linear layer and embedding weight.
void init_orthogonal(torch::nn::Module& model) {
  at::NoGradGuard no_grad;
  for (const std::shared_ptr<torch::nn::Module>& m : model.modules(/*include_self=*/false)) {
    at::Tensor* weight = nullptr;
    if (auto* conv = m->as<SNConv2dImpl>()) weight = &conv->weight;
    if (auto* linear = m->as<SNLinearImpl>()) weight = &linear->weight;
    if (auto* embed = m->as<SNEmbeddingImpl>()) weight = &embed->weight;
    if (auto* embed = m->as<torch::nn::EmbeddingImpl>()) weight = &embed->weight;
    if (weight != nullptr) torch::nn::init::orthogonal_(*weight);
  }
}

at::Tensor upsample2x(const at::Tensor& x) { return at::upsample_nearest2d(x, {2 * x.size(2), 2 * x.size(3)}); }

}  // namespace

void check_biggan_options(const BigGanOptions& options) {
  if (options.resolution != 32 && options.resolution != 64) {
    throw ConfigError("data.image_size " + std::to_string(options.resolution) +
                      ": the biggan workload has layouts for 32x32 and 64x64 images; use 32 or 64");
  }
  if (options.channels < 1 || options.classes < 1 || options.dim_z < 1 || options.shared_dim < 1) {
    throw ConfigError("BigGAN needs positive channels, classes, latent and embedding sizes");
  }
}

ConditionalBatchNormImpl::ConditionalBatchNormImpl(int64_t channels, int64_t cond_dim, const BigGanOptions& options) {
  BatchNormOptions bn_options{channels};
  bn_options.eps = options.bn_eps;
  bn_options.affine = false;
  bn_ = register_module("bn", BatchNorm(bn_options));
  gain_ = register_module("gain", SNLinear(cond_dim, channels, /*bias=*/false, sn(options)));
  bias_ = register_module("bias", SNLinear(cond_dim, channels, /*bias=*/false, sn(options)));
}

at::Tensor ConditionalBatchNormImpl::forward(const at::Tensor& x, const at::Tensor& y) {
  const int64_t n = x.size(0);
  const at::Tensor gain = (gain_->forward(y) + 1.0).view({n, -1, 1, 1});
  const at::Tensor bias = bias_->forward(y).view({n, -1, 1, 1});
  return bn_->forward(x) * gain + bias;
}

GeneratorBlockImpl::GeneratorBlockImpl(int64_t in_channels, int64_t out_channels, const BigGanOptions& options) {
  bn1_ = register_module("bn1", ConditionalBatchNorm(in_channels, options.shared_dim, options));
  conv1_ = register_module("conv1", SNConv2d(in_channels, out_channels, 3, 1, true, sn(options)));
  bn2_ = register_module("bn2", ConditionalBatchNorm(out_channels, options.shared_dim, options));
  conv2_ = register_module("conv2", SNConv2d(out_channels, out_channels, 3, 1, true, sn(options)));
  shortcut_ = register_module("conv_sc", SNConv2d(in_channels, out_channels, 1, 0, true, sn(options)));
}

at::Tensor GeneratorBlockImpl::forward(const at::Tensor& x, const at::Tensor& y) {
  at::Tensor h = upsample2x(at::relu(bn1_->forward(x, y)));
  h = conv1_->forward(h);
  h = conv2_->forward(at::relu(bn2_->forward(h, y)));
  return h + shortcut_->forward(upsample2x(x));
}

BigGanGeneratorImpl::BigGanGeneratorImpl(const BigGanOptions& options) : options_(options) {
  check_biggan_options(options);
  const Layout arch = layout(options.resolution);
  const int64_t ch = options.channels;
  bottom_channels_ = arch.g_in.front() * ch;
  shared_ = register_module("shared", torch::nn::Embedding(options.classes, options.shared_dim));
  linear_ = register_module("linear", SNLinear(options.dim_z, bottom_channels_ * 4 * 4, true, sn(options)));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (size_t i = 0; i < arch.g_in.size(); ++i) {
    blocks_->push_back(GeneratorBlock(arch.g_in[i] * ch, arch.g_out[i] * ch, options));
  }
  BatchNormOptions bn_options{arch.g_out.back() * ch};
  bn_options.eps = options.bn_eps;
  out_bn_ = register_module("output_bn", BatchNorm(bn_options));
  out_conv_ = register_module("output_conv", SNConv2d(arch.g_out.back() * ch, 3, 3, 1, true, sn(options)));
  init_orthogonal(*this);
}

at::Tensor BigGanGeneratorImpl::forward(const at::Tensor& z, const at::Tensor& classes) {
  const at::Tensor y = shared_->forward(classes);
  at::Tensor h = linear_->forward(z).view({z.size(0), bottom_channels_, 4, 4});
  for (const std::shared_ptr<torch::nn::Module>& block : *blocks_) h = block->as<GeneratorBlockImpl>()->forward(h, y);
  return at::tanh(out_conv_->forward(at::relu(out_bn_->forward(h))));
}

DiscriminatorBlockImpl::DiscriminatorBlockImpl(int64_t in_channels, int64_t out_channels, bool preactivation,
                                               bool downsample, const BigGanOptions& options)
    : preactivation_(preactivation), downsample_(downsample) {
  // A wide block: the hidden width is the output width (BigGAN, SA-GAN).
  conv1_ = register_module("conv1", SNConv2d(in_channels, out_channels, 3, 1, true, sn(options)));
  conv2_ = register_module("conv2", SNConv2d(out_channels, out_channels, 3, 1, true, sn(options)));
  if (in_channels != out_channels || downsample) {
    shortcut_ = register_module("conv_sc", SNConv2d(in_channels, out_channels, 1, 0, true, sn(options)));
  }
}

at::Tensor DiscriminatorBlockImpl::forward(const at::Tensor& x) {
  at::Tensor h = conv1_->forward(preactivation_ ? at::relu(x) : x);
  h = conv2_->forward(at::relu(h));
  if (downsample_) h = at::avg_pool2d(h, 2);
  // The shortcut convolves before pooling after a pre-activated block and after it in the first block
  // (the cheaper order where the channels grow), as the reference does.
  at::Tensor s = x;
  if (preactivation_) {
    if (shortcut_) s = shortcut_->forward(s);
    if (downsample_) s = at::avg_pool2d(s, 2);
  } else {
    if (downsample_) s = at::avg_pool2d(s, 2);
    if (shortcut_) s = shortcut_->forward(s);
  }
  return h + s;
}

BigGanDiscriminatorImpl::BigGanDiscriminatorImpl(const BigGanOptions& options) {
  check_biggan_options(options);
  const Layout arch = layout(options.resolution);
  const int64_t ch = options.channels;
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (size_t i = 0; i < arch.d_in.size(); ++i) {
    const int64_t in = arch.d_in[i] == 0 ? 3 : arch.d_in[i] * ch;
    blocks_->push_back(DiscriminatorBlock(in, arch.d_out[i] * ch, /*preactivation=*/i > 0, arch.d_downsample[i], options));
  }
  const int64_t features = arch.d_out.back() * ch;
  linear_ = register_module("linear", SNLinear(features, 1, true, sn(options)));
  embed_ = register_module("embed", SNEmbedding(options.classes, features, sn(options)));
  init_orthogonal(*this);
}

at::Tensor BigGanDiscriminatorImpl::forward(const at::Tensor& images, const at::Tensor& classes) {
  at::Tensor h = images;
  for (const std::shared_ptr<torch::nn::Module>& block : *blocks_) h = block->as<DiscriminatorBlockImpl>()->forward(h);
  h = at::relu(h).sum({2, 3});  // [N, features]
  const at::Tensor projection = (embed_->forward(classes) * h).sum(1);
  return linear_->forward(h).squeeze(1) + projection;
}

}  // namespace dtrain
