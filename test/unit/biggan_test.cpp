// The biggan workload's parts: the networks against the reference implementation's sizes, spectral
// normalisation against an exact SVD, the per-sample latent draws, the sample grid's PNG, and training
// with checkpoints and resume through the real trainer.
#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/data/image_decode.h"
#include "runtime/log/image_grid.h"
#include "runtime/nn/batch_norm.h"
#include "runtime/nn/spectral_norm.h"
#include "runtime/train/workload.h"
#include "runtime/util/error.h"
#include "test/support/params.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"
#include "workloads/biggan/biggan.h"
#include "workloads/biggan/biggan_workload.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

int64_t parameter_count(torch::nn::Module& m) {
  int64_t n = 0;
  for (const at::Tensor& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST_CASE("BigGAN's networks have the reference implementation's shapes and parameter counts", "[biggan]") {
  // The counts of ajbrock/BigGAN-PyTorch's BigGAN.py (Generator and Discriminator with G_ch = D_ch = 64,
  // dim_z 128, G_shared with shared_dim 128, no hierarchical z, no attention, 10 classes), counted with
  // Debian's python3-torch: 32x32 G 4,668,163, D 4,207,361; 64x64 G 33,237,507, D 19,552,961.
  at::manual_seed(1);
  BigGanOptions options;
  BigGanGenerator g(options);
  BigGanDiscriminator d(options);
  CHECK(parameter_count(*g) == 4668163);
  CHECK(parameter_count(*d) == 4207361);

  const at::Tensor z = at::randn({4, 128});
  const at::Tensor classes = at::tensor({0, 3, 9, 3}, at::kLong);
  const at::Tensor images = g->forward(z, classes);
  CHECK(images.sizes() == at::IntArrayRef{4, 3, 32, 32});
  CHECK(images.abs().max().item<float>() <= 1.0f);  // tanh
  const at::Tensor scores = d->forward(images, classes);
  CHECK(scores.sizes() == at::IntArrayRef{4});
  CHECK(at::isfinite(scores).all().item<bool>());

  options.resolution = 64;
  BigGanGenerator g64(options);
  BigGanDiscriminator d64(options);
  CHECK(parameter_count(*g64) == 33237507);
  CHECK(parameter_count(*d64) == 19552961);
  at::NoGradGuard no_grad;
  g64->eval();
  CHECK(g64->forward(z.narrow(0, 0, 2), classes.narrow(0, 0, 2)).sizes() == at::IntArrayRef{2, 3, 64, 64});

  options.resolution = 48;
  CHECK_THROWS_WITH(BigGanGenerator(options), Contains("has layouts for 32x32 and 64x64 images"));
}

TEST_CASE("spectral norm: power iteration finds the largest singular value; eval forwards keep u", "[nn][biggan]") {
  at::manual_seed(3);
  SNLinear layer(12, 7, /*bias=*/true);
  const double exact = at::linalg_svdvals(layer->weight.detach()).max().item<double>();
  // One step per training forward, as in training: the estimate climbs towards sigma_max from below.
  const at::Tensor x = at::randn({5, 12});
  layer->train();
  for (int i = 0; i < 60; ++i) layer->forward(x);
  CHECK(layer->sv.item<double>() == Approx(exact).epsilon(1e-5));
  // The layer applies W / sigma: its output is that of the normalised weight.
  const at::Tensor expected = at::linear(x, layer->weight / exact, layer->bias);
  const at::Tensor u_before = layer->u.clone();
  layer->eval();
  CHECK(at::allclose(layer->forward(x), expected, 1e-4, 1e-5));
  CHECK(at::equal(layer->u, u_before));

  // Gradients flow through sigma too (d sigma / dW = u v^T): checked against finite differences.
  SNConv2d conv(2, 3, 3, 1);
  conv->train();
  const at::Tensor input = at::randn({1, 2, 4, 4}, at::kDouble);
  conv->to(at::kDouble);
  for (int i = 0; i < 40; ++i) conv->forward(input);  // converge u, so that the estimate is stationary
  conv->eval();
  const at::Tensor w = conv->weight.detach().clone().requires_grad_(true);
  at::Tensor u = conv->u.clone();
  at::Tensor sv = conv->sv.clone();
  auto loss = [&](const at::Tensor& weight) {
    at::Tensor uu = u.clone();
    at::Tensor ss = sv.clone();
    return at::conv2d(input, spectral_normalized(weight, uu, ss, false, {}), conv->bias.detach(), 1, 1).pow(2).sum();
  };
  loss(w).backward();
  const at::Tensor direction = at::randn_like(w);
  const double h = 1e-6;
  const double numeric = (loss(w.detach() + h * direction) - loss(w.detach() - h * direction)).item<double>() / (2 * h);
  CHECK((w.grad() * direction).sum().item<double>() == Approx(numeric).epsilon(1e-3));
}

TEST_CASE("BatchNorm without affine parameters normalises only", "[nn][batchnorm]") {
  BatchNormOptions options{3};
  options.affine = false;
  BatchNorm bn(options);
  CHECK(bn->parameters().empty());
  CHECK(bn->buffers().size() == 3);
  const at::Tensor x = at::randn({4, 3, 2, 2}) * 3 + 1;
  const at::Tensor expected = at::batch_norm(x, {}, {}, at::zeros({3}), at::ones({3}), true, 0.1, 1e-5, false);
  CHECK(at::allclose(bn->forward(x), expected, 1e-5, 1e-6));
}

TEST_CASE("latent draws are a function of the seed and the sample index only", "[biggan]") {
  const Latents all = draw_latents(7, {1, 5, 7, 9}, 128, 10);
  const Latents some = draw_latents(7, {9, 5}, 128, 10);
  CHECK(at::equal(some.z[0], all.z[3]));
  CHECK(at::equal(some.z[1], all.z[1]));
  CHECK(some.classes[0].item<int64_t>() == all.classes[3].item<int64_t>());
  CHECK_FALSE(at::equal(draw_latents(8, {9}, 128, 10).z[0], some.z[0]));

  std::vector<int64_t> many(4000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(i);
  const Latents large = draw_latents(11, many, 64, 10);
  CHECK(std::abs(large.z.mean().item<double>()) < 0.01);
  CHECK(large.z.std().item<double>() == Approx(1.0).epsilon(0.01));
  CHECK(large.classes.min().item<int64_t>() == 0);
  CHECK(large.classes.max().item<int64_t>() == 9);
  // Every class about equally often.
  const at::Tensor counts = at::bincount(large.classes);
  CHECK(counts.min().item<int64_t>() > 330);
}

TEST_CASE("image grids tile the images row by row and round-trip through PNG exactly", "[log]") {
  // Image i is filled with the value -1 + i / 2: grey levels 0, 64, 128, 191, 255 (round((x + 1) x 127.5)).
  at::Tensor images = at::empty({5, 3, 4, 6});
  for (int64_t i = 0; i < 5; ++i) images[i].fill_(-1.0 + 0.5 * static_cast<double>(i));
  const at::Tensor grid = image_grid(images, 3, 2);
  REQUIRE(grid.sizes() == at::IntArrayRef{2 * (4 + 2) + 2, 3 * (6 + 2) + 2, 3});
  const std::vector<int64_t> levels{0, 64, 128, 191, 255};
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t top = 2 + (i / 3) * 6;
    const int64_t left = 2 + (i % 3) * 8;
    const at::Tensor tile = grid.narrow(0, top, 4).narrow(1, left, 6);
    CHECK(tile.min().item<int64_t>() == levels[static_cast<size_t>(i)]);
    CHECK(tile.max().item<int64_t>() == levels[static_cast<size_t>(i)]);
  }
  CHECK(grid[0].sum().item<int64_t>() == 0);  // padding is black
  CHECK(grid.narrow(0, 8, 6).narrow(1, 18, 8).sum().item<int64_t>() == 0);  // the empty sixth cell

  const std::string png = encode_png(grid);
  const RgbImage decoded = decode_image(std::vector<uint8_t>(png.begin(), png.end()), "grid.png");
  REQUIRE(decoded.height == grid.size(0));
  REQUIRE(decoded.width == grid.size(1));
  CHECK(std::equal(decoded.pixels.begin(), decoded.pixels.end(), grid.data_ptr<uint8_t>()));
  CHECK_THROWS_WITH(image_grid(at::zeros({2, 1, 4, 4}), 2), Contains("[N, 3, H, W]"));
}

TEST_CASE("biggan trains, checkpoints both networks, both optimizers and the average, and resumes exactly",
          "[biggan][train][checkpoint]") {
  BigGanWorkloadOptions small;
  small.channels = 8;
  small.synthetic_train = 48;
  small.synthetic_test = 32;
  const auto workload = make_biggan_workload(small);
  auto configure = [&](const std::string& dir) {
    TrainConfig config = test::tiny_config(dir);
    config.workload = "biggan";
    workload->apply_defaults(config);
    config.data.synthetic = true;
    config.train.batch_size = 8;
    config.train.eval_batch_size = 16;
    config.train.epochs = 3;
    auto& gan = config.workload_options.edit<BigGanTrainOptions>();
    gan.d_steps = 2;
    gan.ema_start = 4;  // the average copies for four generator steps, then decays
    gan.ema_decay = 0.9;
    gan.sample_every = 2;
    config.log.interval = 0;
    return config;
  };
  test::TempDir whole_dir;
  const TrainConfig config = configure(whole_dir.path());
  const test::TrainRun whole = test::train_alone(config, *workload);
  REQUIRE(whole.result.epochs.size() == 3);
  for (const EpochStats& epoch : whole.result.epochs) {
    CHECK(epoch.train.all_finite());
    CHECK(epoch.test.all_finite());
  }
  std::vector<std::string> names;
  for (const auto& [name, params] : whole.module_params) names.push_back(name);
  CHECK(names == std::vector<std::string>{"discriminator", "generator", "generator_ema"});
  // The average moved away from the generator once it started decaying.
  CHECK_FALSE(at::equal(whole.module_params.at("generator"), whole.module_params.at("generator_ema")));
  // Samples after epochs 2 and 3 (the last), 10 classes x 10 images of 32x32 with 2-pixel gaps.
  int64_t grids = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(config.log.dir)) {
    if (entry.path().extension() != ".png") continue;
    ++grids;
    const RgbImage grid = decode_image_file(entry.path().string());
    CHECK(grid.width == 342);
    CHECK(grid.height == 342);
  }
  CHECK(grids == 2);
  CHECK_THAT(whole.console, Contains("samples of epoch 2: ") && Contains("epoch-000003.png"));

  test::TempDir split_dir;
  TrainConfig first = configure(split_dir.path());
  first.train.epochs = 1;
  test::train_alone(first, *workload);
  TrainConfig rest = first;
  rest.train.epochs = 3;
  rest.checkpoint.resume = true;
  const test::TrainRun resumed = test::train_alone(rest, *workload);
  REQUIRE(resumed.result.epochs.size() == 2);
  CHECK(at::equal(resumed.params, whole.params));
  CHECK(at::equal(resumed.buffers, whole.buffers));
}

TEST_CASE("biggan's configuration errors", "[biggan][config]") {
  const auto workload = make_biggan_workload();
  TrainConfig user;
  user.workload = "biggan";
  user.train.accumulate = 2;
  ConfigSources sources{{"train.accumulate", "--accumulate"}};
  WorkloadRegistry registry;
  register_biggan_workloads(registry);
  const ConfigSchema schema(registry.config_fields(), "mnist");
  CHECK_THROWS_AS(configure_workload(*workload, user, sources, schema), ConfigError);
  CHECK_THROWS_WITH(configure_workload(*workload, user, sources, schema), Contains("train.accumulate 2: the biggan step"));
}
