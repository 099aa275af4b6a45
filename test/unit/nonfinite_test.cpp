// NaN and infinite losses and gradients: stop at the step that produced them (default) or skip exactly
// those steps, and never let a non-finite state reach a checkpoint.
#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "runtime/comm/local_communicator.h"
#include "runtime/data/distributed_sampler.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/error.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> checkpoint_names(const std::string& dir) {
  std::vector<std::string> names;
  if (!std::filesystem::exists(dir)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".safetensors") names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The 1-based step of `epoch` whose batch holds training sample `sample` (one rank).
int64_t step_holding(int64_t sample, const TrainConfig& config, int64_t train_samples, int64_t epoch) {
  const DistributedSampler sampler(train_samples, 0, 1, static_cast<uint64_t>(config.train.seed));
  const std::vector<int64_t> order = sampler.indices(epoch);
  const auto at = std::find(order.begin(), order.end(), sample) - order.begin();
  return at / config.train.batch_size + 1;
}

bool all_finite(const at::Tensor& t) { return at::isfinite(t).all().item<bool>(); }

}  // namespace

TEST_CASE("a diverging run stops at its first non-finite step and writes no checkpoint", "[train][nonfinite]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.lr = 1e30;
  auto workload = test::make_tiny_workload();
  // Step 1's gradients are finite; its update makes every later loss NaN.
  CHECK_THAT(test::training_error<NonFiniteError>(config, *workload),
             Contains("epoch 1, step 2: the loss or the averaged gradients are NaN or infinite (train.on_nonfinite: "
                      "stop); no checkpoint was written for this epoch. Lower the learning rate (1e+30)"));
  CHECK(checkpoint_names(config.checkpoint.dir).empty());
}

TEST_CASE("a NaN input stops the run at exactly the step whose batch holds it", "[train][nonfinite]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  test::TinyOptions options;
  options.nan_train_samples = {37};
  auto workload = test::make_tiny_workload(options);
  const int64_t step = step_holding(37, config, options.train_samples, 1);
  CHECK_THAT(test::training_error<NonFiniteError>(config, *workload), Contains("epoch 1, step " + std::to_string(step) + ":"));
}

TEST_CASE("good checkpoints survive a run that diverges after resuming", "[train][nonfinite][checkpoint]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 2;
  config.checkpoint.keep = 2;
  auto workload = test::make_tiny_workload();
  test::train_alone(config, *workload);
  REQUIRE(checkpoint_names(config.checkpoint.dir) ==
          std::vector<std::string>{"checkpoint-epoch-000001.safetensors", "checkpoint-epoch-000002.safetensors"});

  TrainConfig diverging = config;
  diverging.train.epochs = 5;
  diverging.train.lr = 1e30;
  diverging.checkpoint.resume = true;
  // The epoch started from the checkpoint resumed: the advice names it, and what to do if it fails again.
  CHECK_THAT(test::training_error<NonFiniteError>(diverging, *workload),
             Contains("epoch 3, step 2") &&
                 Contains("then --resume from " + config.checkpoint.dir + "/checkpoint-epoch-000002.safetensors again; if that "
                          "fails alike, the state it holds is the cause: move it out of '" + config.checkpoint.dir +
                          "' so that --resume takes the one before it, or start afresh"));
  // Nothing written for epoch 3, so keep-2 pruning removed nothing; the newest good one still resumes.
  CHECK(checkpoint_names(config.checkpoint.dir) ==
        std::vector<std::string>{"checkpoint-epoch-000001.safetensors", "checkpoint-epoch-000002.safetensors"});
  TrainConfig resumed = config;
  resumed.train.epochs = 3;
  resumed.checkpoint.resume = true;
  const test::TrainRun run = test::train_alone(resumed, *workload);
  REQUIRE(run.result.epochs.size() == 1);
  CHECK(run.result.epochs[0].epoch == 3);
  CHECK(std::isfinite(run.result.epochs[0].train.at("loss")));
}

TEST_CASE("skip-step skips exactly the steps with a NaN loss and trains on", "[train][nonfinite]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 2;
  config.train.on_nonfinite = NonFinitePolicy::kSkipStep;
  test::TinyOptions options;
  options.nan_train_samples = {5, 200};
  auto workload = test::make_tiny_workload(options);
  const test::TrainRun run = test::train_alone(config, *workload);
  REQUIRE(run.result.epochs.size() == 2);
  for (const EpochStats& epoch : run.result.epochs) {
    const bool same_batch = step_holding(5, config, 256, epoch.epoch) == step_holding(200, config, 256, epoch.epoch);
    const int64_t skipped = same_batch ? 1 : 2;
    CHECK(epoch.skipped_steps == skipped);
    // The skipped steps' samples are not in the training loss, so it stays finite.
    CHECK(epoch.train_samples == 256 - skipped * config.train.batch_size);
    CHECK(std::isfinite(epoch.train.at("loss")));
  }
  CHECK(run.result.epochs[1].train.at("loss") < run.result.epochs[0].train.at("loss"));
  CHECK(all_finite(run.params));
  CHECK_THAT(run.console, Contains("epoch 1: ") && Contains(" of 16 optimizer steps skipped for a NaN or infinite loss"));
}

TEST_CASE("skip-step stops when every step of an epoch is skipped", "[train][nonfinite]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.on_nonfinite = NonFinitePolicy::kSkipStep;
  test::TinyOptions options;
  for (int64_t i = 0; i < options.train_samples; ++i) options.nan_train_samples.push_back(i);
  auto workload = test::make_tiny_workload(options);
  CHECK_THAT(test::training_error<NonFiniteError>(config, *workload), Contains("epoch 1, steps 1-16: every optimizer step had a NaN"));
  CHECK(checkpoint_names(config.checkpoint.dir).empty());
}

TEST_CASE("a non-finite test loss stops the run before its checkpoint", "[train][nonfinite]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  test::TinyOptions options;
  options.nan_test_inputs = true;
  auto workload = test::make_tiny_workload(options);
  const std::string error = test::training_error<NonFiniteError>(config, *workload);
  CHECK_THAT(error, Contains("epoch 1: evaluation after the epoch gave a NaN"));
  // Skipping training steps would not help an evaluation; and without BatchNorm there is nothing to say
  // about running statistics.
  CHECK_THAT(error, Contains("Train more steps before the evaluation, or lower the learning rate (0.05)") &&
                        !Contains("skip-step") && !Contains("BatchNorm"));
  CHECK(checkpoint_names(config.checkpoint.dir).empty());

  // With BatchNorm, whose running statistics evaluation uses instead of each batch's own: the message says
  // so (small images and few steps gave ResNets an infinite test loss, blamed on the learning rate).
  options.batchnorm = true;
  CHECK_THAT(test::training_error<NonFiniteError>(config, *test::make_tiny_workload(options)),
             Contains("evaluation after the epoch gave a NaN or infinite test loss, while training's stayed finite: "
                      "evaluation normalises with the BatchNorm layers' running statistics, which after 16 training "
                      "step(s) of 16 samples per rank may not describe the data yet (or the test data holds NaN or "
                      "infinite values)"));
}

TEST_CASE("a checkpoint is never written from non-finite parameters", "[checkpoint][nonfinite]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  auto workload = test::make_tiny_workload();
  auto model = workload->make_model({});
  std::vector<TrainedModule> modules;
  modules.push_back({"model", model, make_optimizer(config.train, *model), nullptr});
  {
    at::NoGradGuard no_grad;
    model->named_parameters()["fc2.bias"].fill_(std::nan(""));
  }
  LocalCommunicator comm;
  Checkpointer checkpointer(config.checkpoint, comm);
  CheckpointMeta meta;
  meta.epoch = 1;
  meta.seed = 1;
  meta.workload = "tiny";
  meta.optimizer = "sgd";
  meta.world_size = 1;
  CHECK_THROWS_WITH(checkpointer.save(meta, modules),
                    Contains("epoch 1: parameter fc2.bias is NaN or infinite; no checkpoint was written"));
  // The same check where the copy is written behind training (the writer's thread scans the copies).
  CHECK_THROWS_WITH(checkpointer.persist(checkpointer.snapshot(meta, modules, SnapshotCopy::kHostCopy)),
                    Contains("epoch 1: parameter fc2.bias is NaN or infinite; no checkpoint was written"));
  CHECK(checkpoint_names(config.checkpoint.dir).empty());
}
