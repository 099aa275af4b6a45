#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include "runtime/comm/local_communicator.h"
#include "runtime/reduce/bucket_probe.h"
#include "runtime/reduce/bucketed_reducer.h"
#include "test/mpi/mpi_test_support.h"
#include "test/support/params.h"
#include "test/support/tiny_workload.h"

using namespace dtrain;

namespace {

struct GlobalBatch {
  at::Tensor x;
  at::Tensor y;
};

// The same data on every rank; rank r trains on its slice, the reference on all of it.
GlobalBatch global_batch(int64_t n, int64_t step, at::ScalarType dtype = at::kFloat) {
  return {at::randn({n, 8}, at::detail::createCPUGenerator(1000 + step), dtype),
          at::randint(4, {n}, at::detail::createCPUGenerator(2000 + step), at::kLong)};
}

}  // namespace

TEST_CASE("the reducer starts every replica from rank 0's parameters", "[reduce][mpi]") {
  auto comm = test::make_mpi_comm();
  auto workload = test::make_tiny_workload();
  at::manual_seed(100 + comm->rank());  // deliberately different initialisations
  auto model = workload->make_model({});
  BucketedReducer reducer(model->parameters(), model->buffers(), *comm, ReducerOptions{BucketOptions{}});
  CHECK(test::same_as_root(*comm, test::flat_params(*model)));
}

TEST_CASE("k steps at world W with batch b match world 1 with batch W*b", "[reduce][mpi]") {
  auto comm = test::make_mpi_comm();
  const int world = comm->world_size();
  const int64_t b = 6;
  const int64_t k = 5;
  for (size_t bucket_bytes : {size_t{64}, size_t{25} << 20}) {  // many small buckets, and one bucket
    // In float64, so that the bound is float64's rounding (test::kReorderBound), whatever the CPU.
    auto workload = test::make_tiny_workload();
    at::manual_seed(comm->rank() == 0 ? 11 : 99);
    auto model = workload->make_model({});
    model->to(at::kDouble);
    at::manual_seed(11);
    auto reference = workload->make_model({});  // rank 0's initialisation, on every rank
    reference->to(at::kDouble);

    BucketedReducer reducer(model->parameters(), model->buffers(), *comm, ReducerOptions{BucketOptions{bucket_bytes, 32}});
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    torch::optim::SGD reference_optimizer(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    for (int64_t step = 0; step < k; ++step) {
      const GlobalBatch batch = global_batch(world * b, step, at::kDouble);
      reducer.prepare_backward(true);
      at::nll_loss(model->forward(batch.x.narrow(0, comm->rank() * b, b)), batch.y.narrow(0, comm->rank() * b, b))
          .backward();
      reducer.finish_backward();
      optimizer.step();
      reducer.zero_grad();

      reference_optimizer.zero_grad();
      at::nll_loss(reference->forward(batch.x), batch.y).backward();
      reference_optimizer.step();
    }
    const double difference = test::max_relative_difference(test::flat_params(*model), test::flat_params(*reference));
    CHECK(difference < test::kReorderBound);
    CHECK(test::same_as_root(*comm, test::flat_params(*model)));  // bitwise identical replicas
  }
}

TEST_CASE("accumulating K micro-steps at world W matches one step on the K-fold global batch", "[reduce][mpi]") {
  auto comm = test::make_mpi_comm();
  const int world = comm->world_size();
  const int64_t b = 4;
  const int64_t k = 3;
  auto workload = test::make_tiny_workload();
  at::manual_seed(21);
  auto model = workload->make_model({});
  model->to(at::kDouble);
  at::manual_seed(21);
  auto reference = workload->make_model({});
  reference->to(at::kDouble);
  BucketedReducer reducer(model->parameters(), model->buffers(), *comm, ReducerOptions{BucketOptions{128, 32}});
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.2));
  torch::optim::SGD reference_optimizer(reference->parameters(), torch::optim::SGDOptions(0.2));

  // Global batch of W*K*b samples: micro-step i of rank r takes rows [(i*W + r)*b, +b).
  const GlobalBatch batch = global_batch(world * k * b, 7, at::kDouble);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t begin = (i * world + comm->rank()) * b;
    reducer.prepare_backward(i == k - 1);
    (at::nll_loss(model->forward(batch.x.narrow(0, begin, b)), batch.y.narrow(0, begin, b)) /
     static_cast<double>(k))
        .backward();
    const StepCommStats stats = reducer.finish_backward();
    CHECK((stats.bytes_reduced > 0) == (i == k - 1));
  }
  optimizer.step();
  at::nll_loss(reference->forward(batch.x), batch.y).backward();
  reference_optimizer.step();
  CHECK(test::max_relative_difference(test::flat_params(*model), test::flat_params(*reference)) < test::kReorderBound);
  CHECK(test::same_as_root(*comm, test::flat_params(*model)));
}

TEST_CASE("bf16 compression averages gradients to within bf16 precision", "[reduce][mpi]") {
  auto comm = test::make_mpi_comm();
  auto workload = test::make_tiny_workload();
  at::manual_seed(5);
  auto exact_model = workload->make_model({});
  at::manual_seed(5);
  auto compressed_model = workload->make_model({});
  ReducerOptions compressed;
  compressed.buckets = BucketOptions{128, 32};
  compressed.compress_bf16 = true;
  BucketedReducer exact(exact_model->parameters(), exact_model->buffers(), *comm, ReducerOptions{BucketOptions{128, 32}});
  BucketedReducer lossy(compressed_model->parameters(), compressed_model->buffers(), *comm, compressed);

  const GlobalBatch batch = global_batch(comm->world_size() * 8, 3);
  const at::Tensor x = batch.x.narrow(0, comm->rank() * 8, 8);
  const at::Tensor y = batch.y.narrow(0, comm->rank() * 8, 8);
  exact.prepare_backward(true);
  at::nll_loss(exact_model->forward(x), y).backward();
  const StepCommStats exact_stats = exact.finish_backward();
  lossy.prepare_backward(true);
  at::nll_loss(compressed_model->forward(x), y).backward();
  const StepCommStats lossy_stats = lossy.finish_backward();

  CHECK(lossy_stats.bytes_reduced * 2 == exact_stats.bytes_reduced);  // half the bytes on the wire
  std::vector<at::Tensor> exact_grads;
  std::vector<at::Tensor> lossy_grads;
  for (const at::Tensor& p : exact_model->parameters()) exact_grads.push_back(p.grad().reshape(-1));
  for (const at::Tensor& p : compressed_model->parameters()) lossy_grads.push_back(p.grad().reshape(-1));
  const at::Tensor expected = at::cat(exact_grads);
  const at::Tensor got = at::cat(lossy_grads);
  CHECK(got.scalar_type() == at::kFloat);
  // bf16 keeps 8 significant bits: each value within 2^-7 of its magnitude (plus rounding of the sum).
  const double scale = expected.abs().max().item<double>();
  CHECK(at::allclose(got, expected, /*rtol=*/1.0 / 64, /*atol=*/scale / 256));
  CHECK_FALSE(at::equal(got, expected));  // the wire format really was bf16
  CHECK(test::same_as_root(*comm, got));  // and every rank holds the same gradients
}

TEST_CASE("the network probe gives every rank the same fit and buckets", "[reduce][mpi]") {
  auto comm = test::make_mpi_comm();
  const AllreduceFit fit = probe_allreduce(*comm, c10::Device(c10::DeviceType::CPU));
  CHECK(fit.small_bytes < fit.large_bytes);
  CHECK(fit.small_s > 0);
  CHECK(fit.large_s > 0);
  CHECK(fit.bytes_per_s > 0);
  CHECK(fit.latency_s >= 0);
  CHECK(fit.latency_s <= fit.small_s);
  CHECK(fit.small_cpu_s >= 0);
  const BucketOptions chosen = buckets_for_network(fit, 1.0, 40 << 20, BucketOptions{});
  const at::Tensor mine = at::tensor({fit.latency_s, fit.bytes_per_s, static_cast<double>(chosen.bucket_bytes)}, at::kDouble);
  CHECK(test::same_as_root(*comm, mine));
}
