#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "runtime/comm/local_communicator.h"
#include "runtime/data/distributed_sampler.h"
#include "runtime/util/error.h"
#include "runtime/train/trainer.h"
#include "test/mpi/mpi_test_support.h"
#include "test/support/error_message.h"
#include "test/support/params.h"
#include "test/support/train_run.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_cnn_workload.h"
#include "test/support/tiny_workload.h"

using namespace dtrain;
using Catch::Matchers::Contains;

TEST_CASE("training at world W lowers the loss and keeps replicas identical", "[train][mpi]") {
  auto comm = test::make_mpi_comm();
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 3;
  test::TinyOptions tiny;
  tiny.dropout = 0.2;
  auto workload = test::make_tiny_workload(tiny);
  const test::TrainRun run = test::train_run(config, *workload, *comm);
  REQUIRE(run.result.epochs.size() == 3);
  CHECK(run.result.epochs[2].train.at("loss") < run.result.epochs[0].train.at("loss"));
  CHECK(run.result.epochs[0].test_samples == 64);  // the whole test set, not one shard
  CHECK(run.result.epochs[0].bytes_allreduced > 0);
  CHECK(run.result.summary.peak_rss_bytes.size() == static_cast<size_t>(comm->world_size()));
  CHECK(test::same_as_root(*comm, run.params));
}

TEST_CASE("resuming at world W reproduces the uninterrupted run", "[train][checkpoint][mpi]") {
  auto comm = test::make_mpi_comm();
  test::TempDir whole_dir;
  test::TempDir split_dir;
  test::TinyOptions tiny;
  tiny.dropout = 0.3;
  auto workload = test::make_tiny_workload(tiny);
  TrainConfig config = test::tiny_config(whole_dir.path());
  config.train.epochs = 3;
  const test::TrainRun whole = test::train_run(config, *workload, *comm);

  TrainConfig first = test::tiny_config(split_dir.path());
  first.train.epochs = 1;
  test::train_run(first, *workload, *comm);
  TrainConfig rest = first;
  rest.train.epochs = 3;
  rest.checkpoint.resume = true;
  const test::TrainRun resumed = test::train_run(rest, *workload, *comm);
  CHECK(resumed.result.epochs.front().epoch == 2);
  CHECK(test::all_ranks(*comm, at::equal(resumed.params, whole.params)));
}

TEST_CASE("a checkpoint from W ranks resumes on 1 rank with the same global batch", "[train][checkpoint][mpi]") {
  auto comm = test::make_mpi_comm();
  const int world = comm->world_size();
  const int64_t b = 8;
  test::TempDir dir;
  test::TempDir reference_dir;
  // A dataset that divides into whole global batches, and no dropout: W ranks with batch b then train
  // on exactly the samples one rank with batch W*b sees, so the runs agree up to float summation order.
  test::TinyOptions tiny;
  tiny.train_samples = world * b * 6;
  tiny.float64 = true;  // the bound is float64's rounding (test::kReorderBound), whatever the CPU
  auto workload = test::make_tiny_workload(tiny);
  TrainConfig distributed = test::tiny_config(dir.path());
  distributed.train.batch_size = b;
  distributed.train.epochs = 1;
  test::train_run(distributed, *workload, *comm);

  bool ok = true;
  if (comm->is_root()) {  // only rank 0 wrote the checkpoint
    LocalCommunicator local;
    TrainConfig single = distributed;
    single.train.batch_size = world * b;
    single.train.epochs = 2;
    single.checkpoint.resume = true;
    const test::TrainRun resumed = test::train_run(single, *workload, local);

    TrainConfig reference = test::tiny_config(reference_dir.path());
    reference.train = single.train;
    const test::TrainRun uninterrupted = test::train_run(reference, *workload, local);
    const double difference = test::max_relative_difference(resumed.params, uninterrupted.params);
    CHECK(difference < test::kReorderBound);
    CHECK(resumed.result.epochs.front().epoch == 2);
    ok = difference < test::kReorderBound;
  }
  CHECK(test::all_ranks(*comm, ok));
}

namespace {

// The 1-based step of `epoch` in which training sample `sample` is trained, on whichever rank holds it.
int64_t global_step_holding(int64_t sample, const TrainConfig& config, int64_t train_samples, int world, int64_t epoch) {
  for (int rank = 0; rank < world; ++rank) {
    const DistributedSampler sampler(train_samples, rank, world, static_cast<uint64_t>(config.train.seed));
    const std::vector<int64_t> order = sampler.indices(epoch);
    const auto at = std::find(order.begin(), order.end(), sample);
    if (at != order.end()) return (at - order.begin()) / config.train.batch_size + 1;
  }
  return -1;
}

}  // namespace

TEST_CASE("a NaN loss on one rank stops every rank at the same step", "[train][nonfinite][mpi]") {
  auto comm = test::make_mpi_comm();
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  test::TinyOptions options;
  options.nan_train_samples = {37};  // on one rank only: the sampler deals each sample to one rank
  std::string error = "no NonFiniteError";
  try {
    test::train_run(config, *test::make_tiny_workload(options), *comm);
  } catch (const NonFiniteError& e) {
    error = e.what();
  }
  const int64_t step = global_step_holding(37, config, options.train_samples, comm->world_size(), 1);
  CHECK_THAT(error, Catch::Matchers::Contains("epoch 1, step " + std::to_string(step) + ":"));
  at::Tensor text = at::zeros({512}, at::kByte);
  std::memcpy(text.data_ptr(), error.data(), std::min<size_t>(error.size(), 512));
  CHECK(test::same_as_root(*comm, text));  // the same error, at the same step, on every rank
}

TEST_CASE("a NaN loss on one rank makes every rank skip the same step", "[train][nonfinite][mpi]") {
  auto comm = test::make_mpi_comm();
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.on_nonfinite = NonFinitePolicy::kSkipStep;
  test::TinyOptions options;
  options.nan_train_samples = {37};
  const test::TrainRun run = test::train_run(config, *test::make_tiny_workload(options), *comm);
  REQUIRE(run.result.epochs.size() == 2);
  CHECK(run.result.epochs[0].skipped_steps == 1);
  CHECK(run.result.epochs[1].skipped_steps == 1);
  CHECK(at::isfinite(run.params).all().item<bool>());
  CHECK(test::same_as_root(*comm, run.params));  // the replicas stayed identical: all skipped together
}

TEST_CASE("BatchNorm statistics are rank 0's on every rank after training, so evaluation agrees",
          "[train][batchnorm][mpi]") {
  auto comm = test::make_mpi_comm();
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 2;
  auto workload = test::make_tiny_cnn_workload();
  ReducerFactory make_reducer = [](std::vector<at::Tensor> params, const std::vector<at::Tensor>& buffers,
                                   Communicator& c, const ReducerPlan&) -> std::unique_ptr<GradReducer> {
    return std::make_unique<BucketedReducer>(std::move(params), buffers, c, ReducerOptions{BucketOptions{512, 64}});
  };
  std::ostringstream console;
  const std::unique_ptr<RunDirectory> run_dir = test::open_run_directory(config, *comm);
  RunLogger logger(config.log, comm->is_root(), run_dir ? std::optional<Directory>(run_dir->directory()) : std::nullopt, console);
  Trainer trainer(test::resolved(config, run_dir.get()), *workload, *comm, logger, make_reducer);
  trainer.run(RunInfo{});
  torch::nn::Module& model = *trainer.state().modules().front().module;
  const at::Tensor buffers = test::flat_buffers(model);
  // The running means moved away from their initial zeros ...
  CHECK(model.named_buffers()["bn.running_mean"].abs().sum().item<double>() > 0);
  // ... and every rank holds the same: each rank's own batches would have given each its own.
  CHECK(test::same_as_root(*comm, buffers));
  CHECK(test::same_as_root(*comm, test::flat_params(model)));
  // The same model evaluates the same inputs identically on every rank.
  model.eval();
  at::NoGradGuard no_grad;
  at::manual_seed(5);
  const at::Tensor probe = at::randn({4, 3, 8, 8});
  const at::Tensor outputs = dynamic_cast<Model&>(model).forward(probe);
  CHECK(test::same_as_root(*comm, outputs));
}

TEST_CASE("under train.deterministic the trainer's reducers follow its plan: W ranks end with 1 rank's bits",
          "[train][deterministic][mpi]") {
  auto comm = test::make_mpi_comm();
  const int world = comm->world_size();
  test::TinyOptions tiny;
  tiny.dropout = 0.2;  // drawn per shard, not per rank
  auto workload = test::make_tiny_workload(tiny);
  auto deterministic = [](const std::string& dir) {
    TrainConfig config = test::tiny_config(dir);
    config.train.deterministic = true;
    config.train.shards = 4;
    config.train.global_batch_size = 32;
    config.train.max_steps = 3;
    return config;
  };
  test::TempDir world_dir;
  if (world != 2 && world != 4) {  // ranks that cannot share 4 shards are refused alike on every rank
    CHECK_THAT(test::error_message([&] { test::train_run(deterministic(world_dir.path()), *workload, *comm); }),
               Contains(std::to_string(world) + " ranks cannot share the 4 shards of train.shards"));
    return;
  }
  const test::TrainRun together = test::train_run(deterministic(world_dir.path()), *workload, *comm);
  // Every rank trains the 1-rank run alone, in a directory of its own, and compares.
  test::TempDir alone_dir;
  LocalCommunicator local;
  const test::TrainRun alone = test::train_run(deterministic(alone_dir.path()), *workload, local);
  REQUIRE(together.result.epochs.size() == 2);
  CHECK(together.result.epochs[0].train_samples == alone.result.epochs[0].train_samples);
  CHECK(at::equal(together.params, alone.params));
  CHECK(at::equal(together.buffers, alone.buffers));
  // Control: the same runs without the mode (the same global batch, held) differ.
  auto plain = [&](const std::string& dir) {
    TrainConfig config = deterministic(dir);
    config.train.deterministic = false;
    config.train.elastic_batch = ElasticBatch::kGlobal;
    return config;
  };
  test::TempDir plain_world_dir, plain_alone_dir;
  CHECK_FALSE(at::equal(test::train_run(plain(plain_world_dir.path()), *workload, *comm).params,
                        test::train_run(plain(plain_alone_dir.path()), *workload, local).params));
}
