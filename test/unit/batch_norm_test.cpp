#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <string>
#include <vector>

#include "runtime/comm/local_communicator.h"
#include "runtime/nn/batch_norm.h"
#include "runtime/util/error.h"
#include "workloads/vision/resnet.h"

using namespace dtrain;

namespace {

// One training-mode forward and backward of `forward` on `input` (double), with a fixed upstream gradient.
struct Pass {
  at::Tensor output;
  at::Tensor grad_input;
  at::Tensor grad_weight;
  at::Tensor grad_bias;
};

template <class Module>
Pass run(Module& bn, const at::Tensor& input, const at::Tensor& upstream) {
  at::Tensor x = input.detach().clone().requires_grad_(true);
  Pass pass;
  pass.output = bn->forward(x);
  (pass.output * upstream).sum().backward();
  pass.grad_input = x.grad();
  pass.grad_weight = bn->weight.grad();
  pass.grad_bias = bn->bias.grad();
  return pass;
}

void check_close(const at::Tensor& actual, const at::Tensor& expected, double tolerance, const std::string& what) {
  INFO(what << ": max difference " << (actual - expected).abs().max().item<double>());
  CHECK(actual.sizes() == expected.sizes());
  CHECK(at::allclose(actual, expected, tolerance, tolerance));
}

}  // namespace

TEST_CASE("dtrain's BatchNorm has torch's parameters, buffers and results", "[nn][batchnorm]") {
  BatchNorm ours(6);
  torch::nn::BatchNorm2d theirs(6);
  std::vector<std::string> our_keys;
  std::vector<std::string> their_keys;
  for (const auto& item : ours->named_parameters()) our_keys.push_back(item.key());
  for (const auto& item : ours->named_buffers()) our_keys.push_back(item.key());
  for (const auto& item : theirs->named_parameters()) their_keys.push_back(item.key());
  for (const auto& item : theirs->named_buffers()) their_keys.push_back(item.key());
  CHECK(our_keys == their_keys);

  at::manual_seed(1);
  const at::Tensor input = at::randn({5, 6, 4, 3}) * 3 + 2;
  const at::Tensor upstream = at::randn({5, 6, 4, 3});
  const Pass a = run(ours, input, upstream);
  const Pass b = run(theirs, input, upstream);
  check_close(a.output, b.output, 1e-6, "output");
  check_close(a.grad_input, b.grad_input, 1e-6, "input gradient");
  check_close(ours->running_var, theirs->running_var, 1e-6, "running variance");
  CHECK(ours->num_batches_tracked.item<int64_t>() == 1);
  ours->eval();
  theirs->eval();
  check_close(ours->forward(input), theirs->forward(input), 1e-6, "eval output");
}

TEST_CASE("BatchNorm refuses one value per channel in training, as PyTorch's does", "[nn][batchnorm]") {
  // ATen's kernel takes it and leaves a NaN running variance (an unbiased update over one value), which
  // surfaced as a NaN test loss blamed on the learning rate (resnet50 at 4 px, batch 1).
  BatchNorm norm(3);
  const at::Tensor single = at::randn({1, 3, 1, 1});
  REQUIRE_THROWS_AS(norm->forward(single), ConfigError);
  CHECK_THROWS_WITH(norm->forward(single),
                    Catch::Matchers::Contains("BatchNorm(3) in training got input [1, 3, 1, 1]: one value per channel") &&
                        Catch::Matchers::Contains("a batch size of 2 or more per rank"));
  CHECK(norm->num_batches_tracked.item<int64_t>() == 0);
  CHECK(at::isfinite(norm->running_var).all().item<bool>());
  // Two values per channel, in a batch of one or of two, are enough; evaluation uses the running ones.
  CHECK_NOTHROW(norm->forward(at::randn({1, 3, 2, 1})));
  CHECK_NOTHROW(norm->forward(at::randn({2, 3, 1, 1})));
  CHECK(at::isfinite(norm->running_var).all().item<bool>());
  norm->eval();
  CHECK(at::isfinite(norm->forward(single)).all().item<bool>());
}

TEST_CASE("synced BatchNorm statistics on one rank give torch's BatchNorm", "[nn][batchnorm]") {
  // With one rank the global batch is the local one, so the synced path (its own forward and backward
  // formulas, and the shifted moments it reduces) must reproduce torch's kernel exactly up to rounding.
  LocalCommunicator comm;
  at::manual_seed(2);
  struct Case {
    std::string name;
    std::vector<int64_t> shape;
    double offset;  // far from zero: the moments' cancellation is what the shift guards against
    bool channels_last;
  };
  const std::vector<Case> cases{{"NCHW", {6, 5, 7, 4}, 0.0, false},
                                {"NCHW, mean 1000", {6, 5, 7, 4}, 1000.0, false},
                                {"channels-last", {6, 5, 7, 4}, 0.5, true},
                                {"NC", {9, 5}, 0.0, false},
                                {"NCL", {3, 5, 11}, -4.0, false}};
  for (const Case& c : cases) {
    SECTION(c.name) {
      at::Tensor input = at::randn(c.shape, at::kDouble) * 2 + c.offset;
      if (c.channels_last) input = input.contiguous(at::MemoryFormat::ChannelsLast);
      const at::Tensor upstream = at::randn(c.shape, at::kDouble);
      BatchNorm synced(5);
      synced->to(at::kDouble);
      synced->sync_statistics(&comm);
      torch::nn::BatchNorm1d reference(5);  // any dimensionality: statistics over all but dimension 1
      reference->to(at::kDouble);
      {
        at::NoGradGuard no_grad;  // a non-trivial affine transform, the same in both
        const at::Tensor w = at::rand({5}, at::kDouble) + 0.5;
        const at::Tensor b = at::randn({5}, at::kDouble);
        synced->weight.copy_(w);
        synced->bias.copy_(b);
        reference->weight.copy_(w);
        reference->bias.copy_(b);
      }
      for (int step = 0; step < 2; ++step) {  // the second with a shift (running mean) away from zero
        synced->zero_grad();
        reference->zero_grad();
        const Pass a = run(synced, input, upstream);
        const Pass b = run(reference, input.reshape({c.shape[0], c.shape[1], -1}),
                           upstream.reshape({c.shape[0], c.shape[1], -1}));
        check_close(a.output, b.output.reshape(c.shape), 1e-9, "output");
        check_close(a.grad_input, b.grad_input.reshape(c.shape), 1e-9, "input gradient");
        check_close(a.grad_weight, b.grad_weight, 1e-9, "weight gradient");
        check_close(a.grad_bias, b.grad_bias, 1e-9, "bias gradient");
        check_close(synced->running_mean, reference->running_mean, 1e-9, "running mean");
        check_close(synced->running_var, reference->running_var, 1e-9, "running variance");
      }
      if (c.channels_last) CHECK(run(synced, input, upstream).output.is_contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
}

TEST_CASE("synced BatchNorm keeps float activations accurate", "[nn][batchnorm]") {
  LocalCommunicator comm;
  at::manual_seed(3);
  const at::Tensor input = at::randn({16, 4, 6, 6}) * 0.1 + 50;  // mean 500 standard deviations from zero
  const at::Tensor upstream = at::randn({16, 4, 6, 6});
  BatchNorm synced(4);
  synced->sync_statistics(&comm);
  torch::nn::BatchNorm2d reference(4);
  const Pass a = run(synced, input, upstream);
  const Pass b = run(reference, input, upstream);
  check_close(a.output, b.output, 1e-3, "output");
  check_close(a.grad_input, b.grad_input, 1e-2, "input gradient");
  check_close(synced->running_var, reference->running_var, 1e-4, "running variance");
}

TEST_CASE("syncing BatchNorm statistics reaches every BatchNorm of a model and refuses torch's", "[nn][batchnorm]") {
  LocalCommunicator comm;
  ResNet resnet(resnet18_options(10));
  CHECK(sync_batchnorm_statistics(resnet, &comm) == 20);  // stem 1, 8 blocks x 2, 3 projection shortcuts
  const auto bn = resnet.named_modules("", /*include_self=*/false)["layer2.0.downsample.1"];
  REQUIRE(bn->as<BatchNormImpl>() != nullptr);
  CHECK(bn->as<BatchNormImpl>()->syncs_statistics());

  torch::nn::Sequential plain(torch::nn::Conv2d(3, 4, 3), torch::nn::BatchNorm2d(4));
  CHECK_THROWS_AS(sync_batchnorm_statistics(*plain, &comm), ConfigError);
  CHECK_THROWS_WITH(sync_batchnorm_statistics(*plain, &comm),
                    Catch::Contains("layer '1' is torch::nn::BatchNorm2d") && Catch::Contains("dtrain::BatchNorm"));
}
