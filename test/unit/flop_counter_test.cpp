// The FLOP counter against hand-counted ops and the published size of ResNet-50.
#include "test/support/catch.h"

#include <ATen/ATen.h>

#include "runtime/monitor/flop_counter.h"
#include "runtime/util/error.h"
#include "workloads/vision/resnet.h"

using namespace dtrain;

TEST_CASE("the FLOP counter counts convolutions and matrix products, forward and backward", "[monitor]") {
  const at::Tensor x = at::randn({2, 3, 8, 8});
  const at::Tensor w = at::randn({4, 3, 3, 3}).requires_grad_(true);
  double forward = 0;
  {
    FlopCounter counter;
    at::conv2d(x, w, at::Tensor(), 1, 1);  // 8x8 outputs per channel: 2 x 2 samples x 64 positions x 108 weights
    forward = counter.flops();
  }
  CHECK(forward == 2.0 * 2 * 64 * 108);
  {
    FlopCounter counter;
    const std::vector<int64_t> stride{2, 2};
    const std::vector<int64_t> no_padding{0, 0};
    at::conv2d(x, w, at::Tensor(), stride, no_padding);  // stride 2, no padding: 3x3 outputs
    CHECK(counter.flops() == 2.0 * 2 * 9 * 108);
  }
  {
    // Backward: the weight's gradient only (the input needs none), one more forward's worth.
    FlopCounter counter;
    at::conv2d(x, w, at::Tensor(), 1, 1).sum().backward();
    CHECK(counter.flops() == 2 * forward);
  }
  {
    FlopCounter counter;
    at::linear(at::randn({5, 7}), at::randn({3, 7}), at::randn({3}));  // addmm: 2 x 5 x 7 x 3
    at::bmm(at::randn({2, 4, 6}), at::randn({2, 6, 5}));               // 2 x 2 x 4 x 6 x 5
    at::relu(at::randn({100}));                                         // not counted
    CHECK(counter.flops() == 210.0 + 480.0);
  }
  {
    // A sparse left operand counts its non-zeros: 3 of them times 4 columns.
    const at::Tensor sparse = at::sparse_coo_tensor(at::tensor({0, 1, 2, 0, 2, 1}, at::kLong).view({2, 3}),
                                                    at::ones({3}), {3, 3});
    FlopCounter counter;
    at::mm(sparse, at::randn({3, 4}));
    CHECK(counter.flops() == 2.0 * 3 * 4);
  }
  FlopCounter one;
  CHECK_THROWS_AS(FlopCounter(), Error);
}

TEST_CASE("ResNet-50's forward at 224 px counts the published 4.1 billion multiply-adds", "[monitor][vision]") {
  // torchvision lists 4.09 GFLOPS for resnet50 (IMAGENET1K_V1), counting multiply-adds; 2 FLOPs each.
  ResNet model(resnet50_options(1000));
  model.eval();
  at::NoGradGuard no_grad;
  FlopCounter counter;
  model.forward(at::randn({1, 3, 224, 224}));
  const double macs = counter.flops() / 2;
  CHECK(macs > 4.05e9);
  CHECK(macs < 4.15e9);
}
