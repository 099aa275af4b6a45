// The gloo backend under mpirun (MPI bootstraps, Gloo carries the data): the collectives the reducer and
// trainer use, and the bucketed reducer over it matching one process on the global batch.
#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include "runtime/comm/gloo_communicator.h"
#include "runtime/reduce/bucketed_reducer.h"
#include "runtime/util/error.h"
#include "test/mpi/mpi_test_support.h"
#include "test/support/params.h"
#include "test/support/tiny_workload.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

std::unique_ptr<GlooCommunicator> make_gloo_comm() {
  GlooOptions options;
  options.wait = WaitOptions{120.0, nullptr, {}};
  return std::make_unique<GlooCommunicator>(test::session(), options);
}

}  // namespace

TEST_CASE("gloo: allreduce sums and averages, several in flight at once", "[comm][gloo][mpi]") {
  auto comm = make_gloo_comm();
  const int n = comm->world_size();
  CHECK(comm->backend_name() == "gloo");
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (int64_t numel : {1, 7, (1 << 20) + 3}) {
      at::Tensor sum = at::full({numel}, comm->rank() + 1.0, dtype);
      comm->allreduce(sum, ReduceOp::kSum);
      CHECK(at::all(sum == n * (n + 1) / 2.0).item<bool>());
      at::Tensor average = at::full({numel}, comm->rank() + 1.0, dtype);
      comm->allreduce(average, ReduceOp::kAverage);
      CHECK(at::allclose(average, at::full({numel}, (n + 1) / 2.0, dtype)));
    }
  }
  at::Tensor counts = at::full({5}, comm->rank(), at::kLong);
  comm->allreduce(counts, ReduceOp::kSum);
  CHECK(counts[4].item<int64_t>() == n * (n - 1) / 2);

  std::vector<at::Tensor> tensors;
  std::vector<std::unique_ptr<Work>> works;
  for (int i = 0; i < 6; ++i) {
    tensors.push_back(at::full({1000 * (i + 1)}, static_cast<float>(comm->rank() + i), at::kFloat));
    works.push_back(comm->allreduce_async(tensors.back(), ReduceOp::kSum));
  }
  for (auto& work : works) work->wait();
  for (int i = 0; i < 6; ++i) CHECK(at::all(tensors[i] == static_cast<float>(n * (n - 1) / 2 + n * i)).item<bool>());
}

TEST_CASE("gloo: broadcast, allgather and barrier", "[comm][gloo][mpi]") {
  auto comm = make_gloo_comm();
  for (int root : {0, comm->world_size() - 1}) {
    at::Tensor t = at::full({3, 5}, static_cast<double>(comm->rank() * 10 + 1), at::kDouble);
    comm->broadcast(t, root);
    CHECK(at::all(t == root * 10 + 1).item<bool>());
  }
  const at::Tensor gathered = comm->allgather(at::full({2}, comm->rank(), at::kLong));
  REQUIRE(gathered.sizes() == at::IntArrayRef({comm->world_size(), 2}));
  for (int r = 0; r < comm->world_size(); ++r) CHECK(gathered[r][1].item<int64_t>() == r);
  comm->barrier();
}

TEST_CASE("gloo: what it cannot carry fails locally with the reason", "[comm][gloo][mpi]") {
  auto comm = make_gloo_comm();
  at::Tensor bf16 = at::ones({4}, at::kBFloat16);
  CHECK_THROWS_WITH(comm->allreduce_async(bf16, ReduceOp::kAverage), Contains("unsupported dtype BFloat16"));
  at::Tensor ints = at::ones({4}, at::kLong);
  CHECK_THROWS_WITH(comm->allreduce_async(ints, ReduceOp::kAverage), Contains("average needs a floating-point tensor"));
  CHECK_THROWS_AS(comm->broadcast(ints, comm->world_size()), CommError);
}

TEST_CASE("gloo: the bucketed reducer over gloo matches one process on the global batch", "[reduce][gloo][mpi]") {
  auto comm = make_gloo_comm();
  const int world = comm->world_size();
  const int64_t b = 6;
  auto workload = test::make_tiny_workload();
  at::manual_seed(comm->rank() == 0 ? 11 : 99);
  auto model = workload->make_model({});
  model->to(at::kDouble);  // float64: the bound is its rounding (test::kReorderBound), whatever the CPU
  at::manual_seed(11);
  auto reference = workload->make_model({});
  reference->to(at::kDouble);
  BucketedReducer reducer(model->parameters(), model->buffers(), *comm, ReducerOptions{BucketOptions{64, 32}});
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD reference_optimizer(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int64_t step = 0; step < 5; ++step) {
    const at::Tensor x = at::randn({world * b, 8}, at::detail::createCPUGenerator(1000 + step), at::kDouble);
    const at::Tensor y = at::randint(4, {world * b}, at::detail::createCPUGenerator(2000 + step), at::kLong);
    reducer.prepare_backward(true);
    at::nll_loss(model->forward(x.narrow(0, comm->rank() * b, b)), y.narrow(0, comm->rank() * b, b)).backward();
    reducer.finish_backward();
    optimizer.step();
    reducer.zero_grad();
    reference_optimizer.zero_grad();
    at::nll_loss(reference->forward(x), y).backward();
    reference_optimizer.step();
  }
  CHECK(test::max_relative_difference(test::flat_params(*model), test::flat_params(*reference)) < test::kReorderBound);
  CHECK(test::same_as_root(*comm, test::flat_params(*model)));
}
