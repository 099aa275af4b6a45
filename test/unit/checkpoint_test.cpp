// Checkpoints as a restarted job meets them: a model they do not fit, files of other runs beside them,
// odd names, and a run that had already finished.
#include "test/support/catch.h"

#include <ATen/ATen.h>

#include <torch/version.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/comm/local_communicator.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/optimizer_state.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/error.h"
#include "runtime/util/file_io.h"
#include "test/support/format4_archive.h"
#include "test/support/params.h"
#include "test/support/skip.h"
#include "test/support/temp_dir.h"
#include "test/support/tiny_workload.h"
#include "test/support/train_run.h"

using namespace dtrain;
using Catch::Matchers::Contains;


namespace {

// One SGD/Adam/... step of `model` on a fixed gradient: the optimizer's state changes in place.
void fake_step(torch::nn::Module& model, torch::optim::Optimizer& optimizer, double gradient) {
  for (at::Tensor& p : model.parameters()) p.mutable_grad() = at::full_like(p, gradient);
  optimizer.step();
}

// A tiny model and its `kind` optimizer after steps on `gradients`: the optimizer holds state.
struct SteppedModel {
  test::TempDir dir;
  TrainConfig config;
  std::unique_ptr<ClassifierWorkload> workload = test::make_tiny_workload();
  std::shared_ptr<torch::nn::Module> model;
  std::vector<TrainedModule> modules;

  SteppedModel(OptimizerKind kind, const std::function<void(TrainConfig&)>& configure, std::initializer_list<double> gradients)
      : config(test::tiny_config(dir.path())) {
    config.train.optimizer = kind;
    configure(config);
    model = workload->make_model({});
    modules.push_back({"model", model, make_optimizer(config.train, *model), nullptr});
    for (double g : gradients) fake_step(*model, *modules[0].optimizer, g);
  }
};

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
             Contains("checkpoint-epoch-000001.safetensors' (workload tiny, world size 1) does not match this tiny model: "
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
  const std::string foreign = config.checkpoint.dir + "/checkpoint-epoch-000009.safetensors";
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
    CHECK(checkpointer.save(meta, modules) == config.checkpoint.dir + "/checkpoint-epoch-00000" + std::to_string(epoch) + ".safetensors");
  }
  CHECK(std::filesystem::exists(config.checkpoint.dir + "/checkpoint-epoch-000002.safetensors"));
  CHECK_FALSE(std::filesystem::exists(config.checkpoint.dir + "/checkpoint-epoch-000001.safetensors"));
  CHECK(std::filesystem::exists(foreign));
}

TEST_CASE("odd checkpoint names and paths are clear errors", "[checkpoint]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.checkpoint.resume = true;
  std::filesystem::create_directories(config.checkpoint.dir);
  std::ofstream(config.checkpoint.dir + "/checkpoint-epoch-99999999999999999999.safetensors") << "x";
  CHECK_THAT(test::training_error<DataError>(config, *test::make_tiny_workload()),
             Contains("checkpoint-epoch-99999999999999999999.safetensors' has an epoch number too large for any run"));
  // Names that only look alike are not checkpoints.
  std::filesystem::remove(config.checkpoint.dir + "/checkpoint-epoch-99999999999999999999.safetensors");
  std::ofstream(config.checkpoint.dir + "/checkpoint-epoch-12ab.safetensors") << "x";
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

TEST_CASE("a format-4 checkpoint (dtrain 0.1) stops the resume naming the converter, and nothing is loaded",
          "[checkpoint][train]") {
  test::TempDir dir;
  TrainConfig config = test::tiny_config(dir.path());
  config.train.epochs = 1;
  auto workload = test::make_tiny_workload();
  test::train_alone(config, *workload);
  // A newer format-4 file beside it: resuming from the older one would lose the training since.
  const std::string old = config.checkpoint.dir + "/checkpoint-epoch-000002.pt";
  std::ofstream(old) << std::string("PK\x03\x04", 4) << std::string(100, '\0');

  TrainConfig resume = config;
  resume.checkpoint.resume = true;
  auto fresh = workload->make_model({});
  const at::Tensor before = test::flat_params(*fresh);
  std::vector<TrainedModule> loaded;
  loaded.push_back({"model", fresh, make_optimizer(config.train, *fresh), nullptr});
  LocalCommunicator comm;
  CHECK_THROWS_WITH(Checkpointer(resume.checkpoint, comm).restore(loaded, "tiny", "sgd"),
                    Contains("checkpoint '" + old + "' is of format 4 (a LibTorch archive of dtrain 0.1)") &&
                        Contains("scripts/convert_checkpoint.py " + old + " (writes checkpoint-epoch-000002.safetensors"));
  CHECK(at::equal(test::flat_params(*fresh), before));
  // Once converted (a file of format 5 at the same position), the conversion is what resumes; the
  // format-4 file older than the newest is never read.
  std::filesystem::copy_file(config.checkpoint.dir + "/checkpoint-epoch-000001.safetensors",
                             config.checkpoint.dir + "/checkpoint-epoch-000000.safetensors");
  std::filesystem::rename(old, config.checkpoint.dir + "/checkpoint-epoch-000001.pt");
  CHECK(Checkpointer(resume.checkpoint, comm).restore(loaded, "tiny", "sgd").checkpoint->epoch == 1);
}

TEST_CASE("a real format-4 checkpoint is refused naming the converter, and converted it resumes at its step",
          "[checkpoint][converter]") {
  for (const OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kAdadelta}) {
    const std::string name = to_string(kind);
    INFO("optimizer " << name);
    SteppedModel stepped(kind, [](TrainConfig& c) { c.train.lr = 0.01; }, {0.5, -0.25});
    TrainConfig& config = stepped.config;
    auto& workload = stepped.workload;
    auto& model = stepped.model;
    std::vector<TrainedModule>& modules = stepped.modules;
    CheckpointMeta meta;
    meta.epoch = 1;
    meta.epoch_samples = 64;
    meta.epoch_steps = 2;
    meta.partial_samples = 64;
    meta.partial_train = MetricValues({MetricValue{"loss", 0.5, 32.0, 64.0}});
    meta.global_batch = 32;
    meta.seed = 9;
    meta.workload = "tiny";
    meta.optimizer = name;
    meta.world_size = 2;
    meta.labels = "classes: a, b";
    std::filesystem::create_directories(config.checkpoint.dir);
    const std::string old = config.checkpoint.dir + "/checkpoint-epoch-000002-step-00000002.pt";
    write_file_atomically(old, test::format4_archive(meta, modules));

    TrainConfig resume = config;
    resume.checkpoint.resume = true;
    auto fresh = workload->make_model({});
    std::vector<TrainedModule> loaded;
    loaded.push_back({"model", fresh, make_optimizer(config.train, *fresh), nullptr});
    LocalCommunicator comm;
    CHECK_THROWS_WITH(Checkpointer(resume.checkpoint, comm).restore(loaded, "tiny", name, meta.labels),
                      Contains("is of format 4") && Contains("scripts/convert_checkpoint.py " + old));
    if (TORCH_VERSION_MAJOR != 1) {
      // Debian's python3-torch (1.13), which the converter loads the archive with, does not read the
      // archives of LibTorch 2 (the CUDA builds): such a file needs a torch of its version.
      DTRAIN_SKIP("the converter reads archives of LibTorch 1.x (Debian's python3-torch); this build's is " << TORCH_VERSION);
    }
    const std::string command = "/usr/bin/python3 " DTRAIN_SCRIPTS_DIR "/convert_checkpoint.py '" + old + "' >/dev/null 2>&1";
    REQUIRE(std::system(command.c_str()) == 0);
    const Restored restored = Checkpointer(resume.checkpoint, comm).restore(loaded, "tiny", name, meta.labels);
    REQUIRE(restored.checkpoint);
    CHECK(restored.checkpoint->epoch_steps == 2);
    CHECK(restored.checkpoint->epoch_samples == 64);
    CHECK(restored.checkpoint->partial_train.at("loss") == 0.5);
    CHECK(restored.checkpoint->labels == meta.labels);
    CHECK(at::equal(test::flat_params(*fresh), test::flat_params(*model)));
    // The state continues as the original's: one more step of each from the same gradient.
    for (auto* m : {&modules, &loaded}) fake_step(*(*m)[0].module, *(*m)[0].optimizer, 0.125);
    CHECK(at::equal(test::flat_params(*fresh), test::flat_params(*model)));
  }
}

TEST_CASE("optimizer state is saved by parameter name and restores bitwise for every optimizer", "[checkpoint]") {
  for (const OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kAdadelta}) {
    const std::string name = to_string(kind);
    INFO("optimizer " << name);
    SteppedModel stepped(kind, [](TrainConfig& c) { c.train.weight_decay = 0.01; }, {0.5, -0.25, 0.125});
    TrainConfig& config = stepped.config;
    auto& workload = stepped.workload;
    auto& model = stepped.model;
    std::vector<TrainedModule>& modules = stepped.modules;
    LocalCommunicator comm;
    CheckpointMeta meta;
    meta.epoch = 1;
    meta.workload = "tiny";
    meta.optimizer = name;
    meta.world_size = 1;
    const std::string path = Checkpointer(config.checkpoint, comm).save(meta, modules);
    // The file names each state tensor by its parameter: "optimizer.model.fc1.weight.<key>".
    const std::string bytes = read_file(path);
    const SafetensorsFile file = parse_safetensors(bytes);
    for (const std::string& key : optimizer_state_keys(*modules[0].optimizer)) {
      CHECK(file.find("optimizer.model.fc1.weight." + key) != nullptr);
    }

    auto fresh = workload->make_model({});
    TrainConfig other = config;
    other.train.lr = 123.0;  // options come from the file
    std::vector<TrainedModule> loaded;
    loaded.push_back({"model", fresh, make_optimizer(other.train, *fresh), nullptr});
    config.checkpoint.resume = true;
    REQUIRE(Checkpointer(config.checkpoint, comm).restore(loaded, "tiny", name).checkpoint);
    CHECK(optimizer_options(*loaded[0].optimizer) == optimizer_options(*modules[0].optimizer));
    const auto states = [](const torch::optim::Optimizer& optimizer, const torch::nn::Module& module) {
      std::map<std::string, at::Tensor> out;
      std::map<const void*, std::string> names;
      for (const auto& p : module.named_parameters()) names[p.value().unsafeGetTensorImpl()] = p.key();
      for_each_optimizer_state(optimizer, [](const at::Tensor& t) { return t; },
                               [&](const at::Tensor& p, const std::string& key, at::Tensor t) {
                                 out[names.at(p.unsafeGetTensorImpl()) + "." + key] = t;
                               });
      return out;
    };
    const auto want = states(*modules[0].optimizer, *model);
    const auto got = states(*loaded[0].optimizer, *fresh);
    REQUIRE(want.size() == got.size());
    REQUIRE_FALSE(want.empty());
    for (const auto& [key, t] : want) {
      INFO(key);
      REQUIRE(got.count(key) == 1);
      CHECK(at::equal(t, got.at(key)));
    }
  }
}

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
    CHECK(path == (std::filesystem::path(config.checkpoint.dir) / "checkpoint-epoch-000002.safetensors").string());

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
