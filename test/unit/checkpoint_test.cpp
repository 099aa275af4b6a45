// Checkpoints as a restarted job meets them: a model they do not fit, files of other runs beside them,
// odd names, and a run that had already finished.
#include "test/support/catch.h"

#include <ATen/ATen.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/comm/local_communicator.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/error.h"
#include "test/support/params.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"

using namespace dtrain;
using Catch::Matchers::Contains;

namespace {

at::Tensor bytes_of(const std::string& text) {
  at::Tensor t = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

}  // namespace

TEST_CASE("a checkpoint that does not fit the model is rejected before anything is loaded", "[checkpoint]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 1;
  test::train_alone(config, *test::make_tiny_workload());
  config.train.epochs = 2;
  config.checkpoint.resume = true;

  test::TinyOptions wider;
  wider.hidden = 32;
  CHECK_THAT(test::training_error<DataError>(config, *test::make_tiny_workload(wider)),
             Contains("checkpoint-epoch-000001.pt' (workload tiny, world size 1) does not match this tiny model: "
                      "parameter fc1.weight is [16, 8] Float in the file but [32, 8] Float in the model"));

  // The restore checks first, so the model is left exactly as it was built.
  auto workload = test::make_tiny_workload(wider);
  auto model = workload->make_model({});
  const at::Tensor before = test::flat_params(*model);
  std::vector<TrainedModule> modules;
  modules.push_back({"model", model, make_optimizer(config.train, *model), nullptr});
  LocalCommunicator comm;
  CHECK_THROWS_AS(Checkpointer(config.checkpoint, comm).restore(modules, "tiny", "sgd"), DataError);
  CHECK(at::equal(test::flat_params(*model), before));
}

TEST_CASE("pruning keeps the checkpoint just written and leaves later epochs alone", "[checkpoint]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.checkpoint.keep = 1;
  std::filesystem::create_directories(config.checkpoint.dir);
  // A newer checkpoint in the directory (a run's directory holds one run, but a file may be copied in).
  const std::string foreign = config.checkpoint.dir + "/checkpoint-epoch-000009.pt";
  std::ofstream(foreign) << "another run";
  auto workload = test::make_tiny_workload();
  auto model = workload->make_model({});
  std::vector<TrainedModule> modules;
  modules.push_back({"model", model, make_optimizer(config.train, *model), nullptr});
  LocalCommunicator comm;
  Checkpointer checkpointer(config.checkpoint, comm);
  CheckpointMeta meta;
  meta.workload = "tiny";
  meta.optimizer = "sgd";
  meta.world_size = 1;
  for (int64_t epoch : {1, 2}) {
    meta.epoch = epoch;
    CHECK(checkpointer.save(meta, modules) == config.checkpoint.dir + "/checkpoint-epoch-00000" + std::to_string(epoch) + ".pt");
  }
  CHECK(std::filesystem::exists(config.checkpoint.dir + "/checkpoint-epoch-000002.pt"));
  CHECK_FALSE(std::filesystem::exists(config.checkpoint.dir + "/checkpoint-epoch-000001.pt"));
  CHECK(std::filesystem::exists(foreign));
}

TEST_CASE("odd checkpoint names and paths are clear errors", "[checkpoint]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.checkpoint.resume = true;
  std::filesystem::create_directories(config.checkpoint.dir);
  std::ofstream(config.checkpoint.dir + "/checkpoint-epoch-99999999999999999999.pt") << "x";
  CHECK_THAT(test::training_error<DataError>(config, *test::make_tiny_workload()),
             Contains("checkpoint-epoch-99999999999999999999.pt' has an epoch number too large for any run"));
  // Names that only look alike are not checkpoints.
  std::filesystem::remove(config.checkpoint.dir + "/checkpoint-epoch-99999999999999999999.pt");
  std::ofstream(config.checkpoint.dir + "/checkpoint-epoch-12ab.pt") << "x";
  std::ofstream(config.checkpoint.dir + "/checkpoint-epoch-000001.pt.tmp") << "x";
  CHECK_FALSE(Checkpointer::latest(config.checkpoint.dir).has_value());

  std::filesystem::remove_all(config.checkpoint.dir);
  std::ofstream(config.checkpoint.dir) << "a file, not a directory";
  CHECK_THAT(test::training_error<ConfigError>(config, *test::make_tiny_workload()),
             Contains("checkpoint.dir '" + config.checkpoint.dir + "' exists but is not a directory"));
}

TEST_CASE("resuming a finished run reports its final metrics from the checkpoint", "[checkpoint][train]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 2;
  auto workload = test::make_tiny_workload();
  const test::TrainRun first = test::train_alone(config, *workload);
  const EpochStats& last = first.result.epochs.back();

  config.checkpoint.resume = true;
  const test::TrainRun again = test::train_alone(config, *workload);
  CHECK(again.result.epochs.empty());
  CHECK(again.result.summary.epochs_run == 0);
  CHECK(again.result.summary.final_test.at("accuracy") == last.test.at("accuracy"));
  CHECK(again.result.summary.final_test.at("loss") == last.test.at("loss"));
  CHECK(at::equal(again.params, first.params));
  CHECK_THAT(again.console, Contains("epoch 2/2 | train_loss") && Contains("from its checkpoint, nothing left to train"));
  CHECK_THAT(again.console, Contains("{metricName: accuracy, metricValue: "));
  char loss[64];
  std::snprintf(loss, sizeof loss, "{metricName: loss, metricValue: %.4f}", last.test.at("loss"));
  CHECK_THAT(again.console, Contains(loss));

  // Raising train.epochs trains on from there.
  config.train.epochs = 3;
  const test::TrainRun more = test::train_alone(config, *workload);
  REQUIRE(more.result.epochs.size() == 1);
  CHECK(more.result.epochs[0].epoch == 3);
}

TEST_CASE("a checkpoint of a format before 4 is refused, saying it is older, and nothing is loaded", "[checkpoint][train]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 1;
  auto workload = test::make_tiny_workload();
  const test::TrainRun first = test::train_alone(config, *workload);
  const EpochStats& last = first.result.epochs.back();

  // Rewrite the checkpoint as dtrain before 0.1.0 wrote format 1: the same model and optimizer.
  auto model = workload->make_model({});
  std::vector<TrainedModule> modules;
  modules.push_back({"model", model, make_optimizer(config.train, *model), nullptr});
  LocalCommunicator comm;
  TrainConfig resume = config;
  resume.checkpoint.resume = true;
  Checkpointer(resume.checkpoint, comm).restore(modules, "tiny", "sgd");
  torch::serialize::OutputArchive archive;
  archive.write("format_version", at::tensor(int64_t{1}));
  archive.write("epoch", at::tensor(int64_t{1}));
  archive.write("seed", at::tensor(config.train.seed));
  archive.write("world_size", at::tensor(int64_t{1}));
  archive.write("workload", bytes_of("tiny"));
  archive.write("optimizer_name", bytes_of("sgd"));
  torch::serialize::OutputArchive model_archive;
  model->save(model_archive);
  archive.write("model", model_archive);
  torch::serialize::OutputArchive optimizer_archive;
  modules[0].optimizer->save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  archive.save_to(last.checkpoint_path);

  auto fresh = workload->make_model({});
  const at::Tensor before = fresh->parameters().front().clone();
  std::vector<TrainedModule> loaded;
  loaded.push_back({"model", fresh, make_optimizer(config.train, *fresh), nullptr});
  CHECK_THROWS_WITH(Checkpointer(resume.checkpoint, comm).restore(loaded, "tiny", "sgd"),
                    Contains(last.checkpoint_path) && Contains("format version 1, expected 4") &&
                        Contains("written before dtrain 0.1.0"));
  CHECK(at::equal(fresh->parameters().front(), before));
}

namespace {

// One SGD/Adam/... step of `model` on a fixed gradient: the optimizer's state changes in place.
void fake_step(torch::nn::Module& model, torch::optim::Optimizer& optimizer, double gradient) {
  for (at::Tensor& p : model.parameters()) p.mutable_grad() = at::full_like(p, gradient);
  optimizer.step();
}

}  // namespace

TEST_CASE("a checkpoint written behind training holds its step's state, whatever training does next",
          "[checkpoint]") {
  for (const OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW,
                                   OptimizerKind::kAdadelta}) {
    const std::string name = to_string(kind);
    INFO("optimizer " << name);
    test::TempDir behind_dir;
    test::TempDir live_dir;
    TrainConfig config = test::tiny_config(behind_dir.path());
    config.train.optimizer = kind;
    auto workload = test::make_tiny_workload();
    auto model = workload->make_model({});
    std::vector<TrainedModule> modules;
    modules.push_back({"model", model, make_optimizer(config.train, *model), nullptr});
    fake_step(*model, *modules[0].optimizer, 0.5);  // the optimizer now holds state (momentum, averages)

    LocalCommunicator comm;
    CheckpointMeta meta;
    meta.epoch = 2;
    meta.workload = "tiny";
    meta.optimizer = name;
    meta.world_size = 1;
    Checkpointer behind(config.checkpoint, comm);
    CheckpointSnapshot snapshot = behind.snapshot(meta, modules, SnapshotCopy::kHostCopy);
    REQUIRE_FALSE(snapshot.live());
    // The same state, written the way a checkpoint on the training thread is.
    CheckpointOptions live_options = config.checkpoint;
    live_options.dir = live_dir.path();
    Checkpointer(live_options, comm).save(meta, modules);
    const at::Tensor params_then = test::flat_params(*model);

    // Training goes on while the snapshot waits to be written: parameters and optimizer state change.
    fake_step(*model, *modules[0].optimizer, -2.0);
    REQUIRE_FALSE(at::equal(test::flat_params(*model), params_then));
    const std::string path = behind.persist(std::move(snapshot));
    CHECK(path == (std::filesystem::path(config.checkpoint.dir) / "checkpoint-epoch-000002.pt").string());

    // Both files load to the state of the step the snapshot was taken at: parameters, and an optimizer
    // that continues exactly as the one written on the training thread.
    auto load = [&](const std::string& dir) {
      auto fresh = workload->make_model({});
      std::vector<TrainedModule> loaded;
      loaded.push_back({"model", fresh, make_optimizer(config.train, *fresh), nullptr});
      CheckpointOptions options = config.checkpoint;
      options.dir = dir;
      REQUIRE(Checkpointer(options, comm).restore(loaded, "tiny", name).checkpoint);
      fake_step(*fresh, *loaded[0].optimizer, 1.0);
      return test::flat_params(*fresh);
    };
    const at::Tensor continued_behind = load(config.checkpoint.dir);
    const at::Tensor continued_live = load(live_dir.path());
    CHECK(at::equal(continued_behind, continued_live));
    CHECK_FALSE(at::equal(continued_behind, params_then));  // the step after the restore moved them
  }
}
