#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <limits>

#include "runtime/comm/local_communicator.h"
#include "runtime/reduce/bucketed_reducer.h"
#include "runtime/util/error.h"
#include "test/support/params.h"
#include "test/support/tiny_workload.h"

using namespace dtrain;

namespace {

// Records each allreduce as it is launched: its size, its op, and how many parameters still lacked their
// gradient at that moment. Plays two ranks with identical gradients, so the reducer communicates: a sum
// doubles the data, an average leaves it as is. `averages` says whether it averages inside the reduction.
class RecordingCommunicator final : public Communicator {
 public:
  struct Launch {
    int64_t bytes;
    int64_t grads_missing;
    ReduceOp op;
  };
  std::vector<Launch> launches;
  std::function<int64_t()> grads_missing;
  bool averages = false;

  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend_name() const override { return "recording"; }
  bool averages_in_reduction() const override { return averages; }
  void barrier() override {}

 protected:
  std::unique_ptr<Work> allreduce_checked(at::Tensor tensor, ReduceOp op) override {
    launches.push_back({static_cast<int64_t>(tensor.nbytes()), grads_missing ? grads_missing() : -1, op});
    if (op == ReduceOp::kSum) tensor.mul_(2);
    return local_.allreduce_async(tensor, ReduceOp::kSum);
  }
  void broadcast_checked(at::Tensor& tensor, int root) override {}
  at::Tensor allgather_checked(const at::Tensor& tensor) override { return at::stack({tensor, tensor}); }
  void exchange_checked(const at::Tensor& send, at::Tensor& recv, int) override { recv.copy_(send); }
  ErrorOrigin error_origin() const override { return ErrorOrigin{0, 2, {}}; }

 private:
  LocalCommunicator local_;
};

at::Tensor batch_inputs(int64_t n, int64_t seed) {
  return at::randn({n, 8}, at::detail::createCPUGenerator(seed), at::kFloat);
}
at::Tensor batch_targets(int64_t n, int64_t seed) {
  return at::randint(4, {n}, at::detail::createCPUGenerator(seed + 100), at::kLong);
}

}  // namespace

TEST_CASE("gradients live in the bucket buffers and zero_grad keeps them there", "[reduce]") {
  auto workload = test::make_tiny_workload();
  auto model = workload->make_model({});
  LocalCommunicator comm;
  BucketedReducer reducer(model->parameters(), model->buffers(), comm, ReducerOptions{BucketOptions{256, 128}});
  std::vector<const void*> before;
  for (const auto& p : model->parameters()) before.push_back(p.grad().data_ptr());
  reducer.prepare_backward(true);
  at::nll_loss(model->forward(batch_inputs(4, 1)), batch_targets(4, 1)).backward();
  reducer.finish_backward();
  for (size_t i = 0; i < before.size(); ++i) {
    CHECK(model->parameters()[i].grad().data_ptr() == before[i]);
    CHECK(model->parameters()[i].grad().abs().sum().item<double>() > 0);
  }
  reducer.zero_grad();
  for (const auto& p : model->parameters()) CHECK(p.grad().abs().sum().item<double>() == 0);
}

TEST_CASE("buckets launch in order while backward is still running", "[reduce]") {
  auto workload = test::make_tiny_workload();
  auto model = workload->make_model({});
  RecordingCommunicator comm;
  // Per-parameter bytes: fc1.weight 512, fc1.bias 64, fc2.weight 256, fc2.bias 16 -> reversed with caps
  // 16 and 256: [fc2.bias], [fc2.weight], [fc1.bias, fc1.weight].
  BucketedReducer reducer(model->parameters(), model->buffers(), comm, ReducerOptions{BucketOptions{256, 16}});
  REQUIRE(reducer.buckets().size() == 3);
  std::vector<at::Tensor> params = model->parameters();
  auto first_layer_grad_sum = [&] { return params[0].grad().abs().sum().item<double>(); };
  comm.grads_missing = [&] { return first_layer_grad_sum() == 0 ? int64_t{1} : int64_t{0}; };
  reducer.prepare_backward(true);
  at::nll_loss(model->forward(batch_inputs(8, 2)), batch_targets(8, 2)).backward();
  const StepCommStats stats = reducer.finish_backward();
  REQUIRE(comm.launches.size() == 3);
  CHECK(comm.launches[0].bytes == 16);
  CHECK(comm.launches[1].bytes == 256);
  CHECK(comm.launches[2].bytes == 576);
  // The first two buckets went out before the first layer's gradient existed: overlap with backward.
  CHECK(comm.launches[0].grads_missing == 1);
  CHECK(comm.launches[1].grads_missing == 1);
  CHECK(stats.bytes_reduced == 16 + 256 + 576);
  CHECK(stats.buckets == 3);
}

TEST_CASE("accumulation micro-steps do not communicate and sum to the K-fold batch", "[reduce]") {
  const int64_t k = 4;
  const int64_t b = 5;
  auto workload = test::make_tiny_workload();
  at::manual_seed(3);
  auto model = workload->make_model({});
  model->to(at::kDouble);  // float64: the bound is its rounding (test::kReorderBound), whatever the CPU
  at::manual_seed(3);
  auto reference = workload->make_model({});
  reference->to(at::kDouble);
  RecordingCommunicator comm;
  BucketedReducer reducer(model->parameters(), model->buffers(), comm, ReducerOptions{BucketOptions{}});
  const at::Tensor x = batch_inputs(k * b, 4).to(at::kDouble);
  const at::Tensor y = batch_targets(k * b, 4);
  for (int64_t i = 0; i < k; ++i) {
    reducer.prepare_backward(i == k - 1);
    (at::nll_loss(model->forward(x.narrow(0, i * b, b)), y.narrow(0, i * b, b)) / static_cast<double>(k)).backward();
    reducer.finish_backward();
    CHECK(comm.launches.size() == (i == k - 1 ? 1u : 0u));
  }
  at::nll_loss(reference->forward(x), y).backward();
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    CHECK(test::max_relative_difference(model->parameters()[i].grad().to(at::kDouble),
                                        reference->parameters()[i].grad().to(at::kDouble)) < test::kReorderBound);
  }
}

TEST_CASE("misusing the reducer is an error, not silent corruption", "[reduce]") {
  auto workload = test::make_tiny_workload();
  auto model = workload->make_model({});
  LocalCommunicator comm;
  BucketedReducer reducer(model->parameters(), model->buffers(), comm, ReducerOptions{BucketOptions{}});
  CHECK_THROWS_AS(reducer.finish_backward(), Error);
  CHECK_THROWS_WITH(at::nll_loss(model->forward(batch_inputs(2, 5)), batch_targets(2, 5)).backward(),
                    Catch::Matchers::Contains("backward ran without prepare_backward()"));
  model->parameters()[0].mutable_grad() = at::zeros_like(model->parameters()[0]);
  CHECK_THROWS_WITH(reducer.prepare_backward(true), Catch::Matchers::Contains("had its .grad replaced"));
}

TEST_CASE("the reducer tells finite gradients from NaN and inf, however large they are", "[reduce][nonfinite]") {
  auto workload = test::make_tiny_workload();
  auto model = workload->make_model({});
  LocalCommunicator comm;
  BucketedReducer reducer(model->parameters(), model->buffers(), comm, ReducerOptions{BucketOptions{256, 128}});
  REQUIRE(reducer.buckets().size() > 1);
  CHECK(reducer.all_finite().item<bool>());  // zero gradients
  at::NoGradGuard no_grad;
  at::Tensor last = model->parameters().back().grad();
  // Finite values whose float sum overflows to inf are still finite gradients.
  for (const auto& p : model->parameters()) p.grad().fill_(3e38);
  CHECK(reducer.all_finite().item<bool>());
  last.view(-1)[0] = std::nan("");
  CHECK_FALSE(reducer.all_finite().item<bool>());
  last.view(-1)[0] = -std::numeric_limits<float>::infinity();
  CHECK_FALSE(reducer.all_finite().item<bool>());
  reducer.zero_grad();
  CHECK(reducer.all_finite().item<bool>());
}

TEST_CASE("the average: divided in the hooks where the backend only sums, in the reduction where it averages",
          "[reduce]") {
  // Two layers, the second unused in the last micro-batch: its gradient, accumulated earlier and never seen
  // by a hook in the step that communicates, must be averaged like the others.
  for (const bool backend_averages : {false, true}) {
    CAPTURE(backend_averages);
    at::manual_seed(5);
    torch::nn::Linear used(8, 4), unused(8, 4);
    used->to(at::kDouble);
    unused->to(at::kDouble);
    std::vector<at::Tensor> params = used->parameters();
    for (const at::Tensor& p : unused->parameters()) params.push_back(p);
    RecordingCommunicator comm;
    comm.averages = backend_averages;
    BucketedReducer reducer(params, {}, comm, ReducerOptions{BucketOptions{64, 64}});
    const at::Tensor x = batch_inputs(6, 7).to(at::kDouble);
    reducer.prepare_backward(false);
    (used->forward(x).sum() + unused->forward(x).pow(2).sum()).backward();
    reducer.finish_backward();
    std::vector<at::Tensor> expected;
    for (const at::Tensor& p : params) expected.push_back(p.grad().clone());
    reducer.prepare_backward(true);
    used->forward(x).sum().backward();
    reducer.finish_backward();
    REQUIRE_FALSE(comm.launches.empty());
    for (const auto& launch : comm.launches) {
      CHECK(launch.op == (backend_averages ? ReduceOp::kAverage : ReduceOp::kSum));
    }
    // Both ranks hold the same gradients, so their average is this rank's own.
    for (size_t i = 0; i < params.size(); ++i) {
      CAPTURE(i);
      const at::Tensor own = i < 2 ? expected[i] * 2 : expected[i];
      CHECK(test::max_relative_difference(params[i].grad(), own) < test::kReorderBound);
    }
  }
}
