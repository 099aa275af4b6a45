// The NCCL backend. On a machine without a GPU only the failure path runs (and the [gpu] cases say they
// were skipped); on a GPU host every case runs. Run with one rank per GPU.
#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <mutex>
#include <thread>

#include "runtime/comm/local_communicator.h"
#include "runtime/comm/nccl_communicator.h"
#include "runtime/util/error.h"
#include "test/mpi/mpi_test_support.h"
#include "test/support/gpu.h"
#include "test/support/params.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"

using namespace dtrain;

namespace {

int cuda_devices() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

std::unique_ptr<NcclCommunicator> make_nccl_comm(NcclOptions options = {}) {
  options.device = test::session().local_rank() % std::max(1, cuda_devices());
  if (options.wait.timeout_s == 0.0) options.wait.timeout_s = 120.0;
  return std::make_unique<NcclCommunicator>(test::session(), test::make_mpi_comm(), options);
}

at::TensorOptions on_gpu(at::ScalarType dtype) {
  return at::TensorOptions().dtype(dtype).device(at::kCUDA, test::session().local_rank() % cuda_devices());
}

}  // namespace

TEST_CASE("without a usable GPU, creating the NCCL communicator fails naming the call, rank and host", "[nccl]") {
  if (cuda_devices() > 0) {
    DTRAIN_SKIP("this host has a GPU, so the no-GPU error path cannot be exercised");
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string rank = "[rank " + std::to_string(test::session().rank()) + "/";
  REQUIRE_THROWS_AS(make_nccl_comm(), CommError);
  REQUIRE_THROWS_WITH(make_nccl_comm(), Catch::Contains(rank) && Catch::Contains(std::string(" ") + host + "] ") &&
                                            Catch::Contains("cudaGetDeviceCount(&devices) failed (cudaError"));
}

TEST_CASE("the NCCL runtime reports its version", "[nccl]") {
  const std::string version = nccl_runtime_version();
  CHECK(version.rfind("2.", 0) == 0);
}

TEST_CASE("NCCL allreduce sums and averages CUDA tensors of every supported dtype", "[nccl][gpu]") {
  DTRAIN_SKIP_WITHOUT_GPU();
  auto comm = make_nccl_comm();
  const int n = comm->world_size();
  CHECK(comm->backend_name() == "nccl");
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    for (int64_t numel : {1, 7, (1 << 20) + 3}) {
      at::Tensor sum = at::full({numel}, comm->rank() + 1, on_gpu(dtype));
      comm->allreduce(sum, ReduceOp::kSum);
      CHECK(at::all(sum.to(at::kFloat) == n * (n + 1) / 2.0f).item<bool>());
      at::Tensor average = at::full({numel}, 2.0 * (comm->rank() + 1), on_gpu(dtype));
      comm->allreduce(average, ReduceOp::kAverage);
      CHECK(at::allclose(average.to(at::kFloat).cpu(), at::full({numel}, static_cast<float>(n + 1))));
    }
  }
  at::Tensor counts = at::full({5}, comm->rank(), on_gpu(at::kLong));
  comm->allreduce(counts, ReduceOp::kSum);
  CHECK(counts[4].item<int64_t>() == n * (n - 1) / 2);
}

TEST_CASE("NCCL results are ordered before later work on the compute stream without a host wait", "[nccl][gpu]") {
  DTRAIN_SKIP_WITHOUT_GPU();
  auto comm = make_nccl_comm();
  const int n = comm->world_size();
  std::vector<at::Tensor> tensors;
  std::vector<std::unique_ptr<Work>> works;
  for (int i = 0; i < 8; ++i) {
    tensors.push_back(at::full({(1 << 18) * (i + 1)}, static_cast<float>(comm->rank() + i), on_gpu(at::kFloat)));
    works.push_back(comm->allreduce_async(tensors.back(), ReduceOp::kSum));
  }
  for (auto& work : works) work->wait();
  // Queued right behind the collectives: correct only if wait() ordered the stream after them.
  for (at::Tensor& t : tensors) t.mul_(2);
  for (int i = 0; i < 8; ++i) {
    const float expected = 2.0f * static_cast<float>(n * (n - 1) / 2 + n * i);
    CHECK(at::all(tensors[i] == expected).item<bool>());
  }
  while (!works.back()->is_completed()) std::this_thread::yield();
}

TEST_CASE("NCCL broadcast and allgather work on CUDA tensors, and CPU tensors go over MPI", "[nccl][gpu]") {
  DTRAIN_SKIP_WITHOUT_GPU();
  auto comm = make_nccl_comm();
  const int n = comm->world_size();
  at::Tensor root = at::full({1000}, static_cast<float>(comm->rank()), on_gpu(at::kFloat));
  comm->broadcast(root, n - 1);
  CHECK(at::all(root == static_cast<float>(n - 1)).item<bool>());
  const at::Tensor gathered = comm->allgather(at::full({3}, static_cast<int64_t>(comm->rank()), on_gpu(at::kLong)));
  CHECK(gathered.is_cuda());
  CHECK(gathered.select(1, 2).cpu().equal(at::arange(n, at::kLong)));

  at::Tensor host = at::full({4}, comm->rank() + 1.0, at::kDouble);
  comm->allreduce(host, ReduceOp::kSum);
  CHECK(at::all(host == n * (n + 1) / 2.0).item<bool>());
  comm->barrier();
}

namespace {

void CUDART_CB hold_stream(void* seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(*static_cast<double*>(seconds)));
}

}  // namespace

TEST_CASE("a collective that outlives the timeout aborts the communicator and reports why", "[nccl][gpu]") {
  DTRAIN_SKIP_WITHOUT_GPU();
  // A compute stream held by a host function for longer than the timeout: the collective queued behind
  // it cannot finish, exactly as when a peer never arrives.
  cudaStream_t held = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking) == cudaSuccess);
  static double hold_s = 4.0;
  std::mutex mutex;
  std::string fatal;
  int fatal_rank = -1;
  NcclOptions options;
  options.wait.timeout_s = 0.5;
  options.compute_stream = [held] { return static_cast<void*>(held); };
  options.on_fatal = [&](const CommError& error) {
    std::lock_guard<std::mutex> lock(mutex);
    fatal = error.what();
    fatal_rank = error.origin().rank;
  };
  auto comm = make_nccl_comm(options);
  at::Tensor t = at::ones({1024}, on_gpu(at::kFloat));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaLaunchHostFunc(held, hold_stream, &hold_s) == cudaSuccess);
  auto work = comm->allreduce_async(t, ReduceOp::kSum);
  for (int i = 0; i < 300; ++i) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!fatal.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    CHECK_THAT(fatal, Catch::Contains("ncclAllReduce of 4096 bytes did not complete within 0.5 s") &&
                          Catch::Contains("[rank 0/") && Catch::Contains("aborted the NCCL communicator"));
    CHECK(fatal_rank == 0);
  }
  CHECK_THROWS_AS(work->wait(), CommError);
  CHECK_THROWS_AS(comm->allreduce_async(t, ReduceOp::kSum), CommError);
  cudaStreamSynchronize(held);
  cudaStreamDestroy(held);
}

TEST_CASE("training on the GPU over NCCL matches training on the CPU", "[nccl][gpu][train]") {
  DTRAIN_SKIP_WITHOUT_GPU();
  auto comm = make_nccl_comm();
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 2;
  config.checkpoint.enabled = false;
  auto workload = test::make_tiny_workload();
  const c10::Device gpu(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(comm->device()));
  const test::TrainRun on_gpu_run = test::train_run(config, *workload, *comm, ReducerOptions{BucketOptions{512, 64}}, gpu);
  LocalCommunicator local;
  const test::TrainRun on_cpu_run = test::train_run(config, *workload, local);
  if (comm->world_size() == 1) {
    CHECK(test::max_relative_difference(on_gpu_run.params.cpu(), on_cpu_run.params) < 1e-3);
  }
  CHECK(on_gpu_run.result.epochs.back().train.at("loss") < on_gpu_run.result.epochs.front().train.at("loss"));

  for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
    TrainConfig mixed = config;
    mixed.train.precision = precision;
    mixed.comm.compress = Compression::kBf16;
    const test::TrainRun run = test::train_run(mixed, *workload, *comm, ReducerOptions{BucketOptions{512, 64}, true}, gpu);
    CHECK(run.result.epochs.back().train.at("loss") < run.result.epochs.front().train.at("loss"));
    CHECK(std::isfinite(run.result.epochs.back().test.at("loss")));
  }
}

TEST_CASE("a checkpoint written on the CPU resumes on the GPU", "[nccl][gpu][checkpoint]") {
  DTRAIN_SKIP_WITHOUT_GPU();
  auto comm = make_nccl_comm();
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  auto workload = test::make_tiny_workload();
  LocalCommunicator local;
  config.train.epochs = 2;
  const test::TrainRun uninterrupted = test::train_run(config, *workload, local);

  TrainConfig first = config;
  first.train.epochs = 1;
  first.checkpoint.dir = dir.file("resume");
  test::train_run(first, *workload, local);
  TrainConfig second = config;
  second.checkpoint.dir = first.checkpoint.dir;
  second.checkpoint.resume = true;
  const c10::Device gpu(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(comm->device()));
  const test::TrainRun resumed = test::train_run(second, *workload, *comm, ReducerOptions{BucketOptions{512, 64}}, gpu);
  REQUIRE(resumed.result.epochs.size() == 1);
  CHECK(resumed.result.epochs.front().epoch == 2);
  if (comm->world_size() == 1) {
    CHECK(test::max_relative_difference(resumed.params.cpu(), uninterrupted.params) < 1e-3);
  }
}
